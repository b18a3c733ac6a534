"""Claude Code transcripts: ``~/.claude/projects/<project>/<session>.jsonl``.

Records (checked against public descriptions of the format and parsers of it; no real
transcript is copied): ``{"type": "user"|"assistant", "message": {"role", "content"}, "uuid",
"parentUuid", "sessionId", "timestamp", "isSidechain", "isMeta"?, "isCompactSummary"?}``, with
content a string or blocks ``text`` / ``tool_use {name, input}`` / ``tool_result {tool_use_id,
content, is_error}`` / ``thinking`` / ``image {source}``; ``{"type": "summary", "summary",
"leafUuid"}``; ``{"type": "system", "subtype": "compact_boundary", ...}`` and other
bookkeeping records (``file-history-snapshot``, ``progress``, ...).

A tool result arrives as a ``user`` record of ``tool_result`` blocks: it renders as a
``Tool result:`` line. ``isMeta`` records (caveats the harness adds) and system records are
skipped; subagent (``isSidechain``) messages are kept. The summary the harness writes after
``/compact`` (``isCompactSummary``) and ``summary`` records render as ``Summary:``.
"""

from __future__ import annotations

import re
from typing import Any

from .common import SUMMARY, Parsed, blocks

# Text the harness wraps into user messages: reminders are noise; a slash command reads
# better as "/name args" than as its tags.
_REMINDER = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.S)
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_STDOUT_TAGS = re.compile(r"</?local-command-std(?:out|err)>")


def _tidy(text: str) -> str:
    command = _COMMAND.search(text)
    if command:
        args = _COMMAND_ARGS.search(text)
        return f"{command.group(1).strip()} {args.group(1).strip() if args else ''}".strip()
    return _STDOUT_TAGS.sub("", _REMINDER.sub("", text))


def parse(rec: dict[str, Any]) -> Parsed | None:
    kind = rec.get("type")
    if kind == "summary":
        summary = rec.get("summary")
        return Parsed(SUMMARY, [summary]) if isinstance(summary, str) else None
    msg = rec.get("message")
    if kind not in ("user", "assistant") or rec.get("isMeta") or not isinstance(msg, dict):
        return None
    parsed = blocks(msg.get("content"), kind)
    parsed.texts = [_tidy(t) for t in parsed.texts]
    if rec.get("isCompactSummary"):
        return Parsed(SUMMARY, parsed.texts)
    return parsed
