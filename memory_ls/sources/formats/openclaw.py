"""OpenClaw transcripts (``~/.openclaw/agents/<agent>/sessions/<sessionId>.jsonl``) and plain
``{role, content}`` chat records.

OpenClaw writes its transcripts with pi-coding-agent's ``SessionManager`` (OpenClaw's
``docs/reference/session-management-compaction.md``; entry types from pi-mono's session
manager): a ``{"type": "session", "id", "cwd", "timestamp"}`` header, then entries with
``id`` / ``parentId``: ``message`` (``{"message": {"role": "user" | "assistant" | "toolResult",
"content", ...}}``, content a string or parts ``text`` / ``thinking`` / ``toolCall {id, name,
arguments}`` / ``image {data, mimeType}``; a ``toolResult`` has ``toolName``, ``content`` parts
and ``isError``), ``compaction {summary, firstKeptEntryId, tokensBefore}``, ``branch_summary
{fromId, summary}``, and bookkeeping (``model_change``, ``thinking_level_change``, ``custom``,
``custom_message``, ``label``, ``session_info``), which is skipped. ``custom_message`` entries
are written by extensions whose content we cannot know, so they are skipped too.

Plain records are OpenAI-style chat messages: ``{"role", "content", "tool_calls"?}``, with
``role: "tool"`` for a tool's answer.
"""

from __future__ import annotations

from typing import Any

from .common import ASSISTANT, RESULT, SUMMARY, USER, Parsed, blocks, result_text, tool_line

USER_ROLES = {"user", "human"}
ASSISTANT_ROLES = {"assistant", "model", "ai", "bot"}
RESULT_ROLES = {"toolresult", "tool", "function"}
SUMMARY_ENTRIES = {"compaction", "branch_summary"}


def parse(rec: dict[str, Any]) -> Parsed | None:
    kind = rec.get("type")
    if kind in SUMMARY_ENTRIES:
        summary = rec.get("summary")
        return Parsed(SUMMARY, [summary]) if isinstance(summary, str) else None
    if kind not in (None, "message"):
        return None
    msg = rec.get("message")
    if not isinstance(msg, dict):
        msg = rec
    role = str(msg.get("role") or "").lower()
    if role in RESULT_ROLES:
        name = msg.get("toolName") or msg.get("name") or ""
        return Parsed(RESULT, [result_text(msg.get("content"), msg.get("isError") is True, name)])
    if role in USER_ROLES:
        parsed = blocks(msg.get("content"), USER)
    elif role in ASSISTANT_ROLES:
        parsed = blocks(msg.get("content"), ASSISTANT)
    else:  # system, developer, extension roles
        return None
    for call in msg.get("tool_calls") or []:
        if isinstance(call, dict):
            fn = call.get("function")
            fn = fn if isinstance(fn, dict) else call
            parsed.tools.append(tool_line(fn.get("name"), fn.get("arguments")))
    return parsed
