"""Agent session transcripts (JSONL) rendered as ``User: ...`` / ``Assistant: ...`` text.

Each JSON record is read on its own by ``sources/formats`` (OpenClaw, Claude Code, Codex and
plain ``{role, content}`` chat records) and rendered as lines that all map back to that
record's line: ``User: ...`` / ``Assistant: ...`` for messages, ``Tool: <name> <arguments>``
for tool calls, ``Tool result: ...`` for a tool's answer (one short line, cut and marked so),
``Summary: ...`` for compaction summaries. Reasoning, system prompts and metadata records are
left out; attachments show as a placeholder (``[image: image/png]``), never their bytes.
Every message is redacted before it is rendered. Lines that are not JSON (partial writes, a
truncated last line, binary junk) are skipped and logged by number, never by content, and
are picked up again on the next sync once the writer has finished them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from ..redact import redact
from . import formats
from .formats.common import ASSISTANT, CONTROL, RESULT, SUMMARY, USER
from .markdown import SourceError, SourceText, open_regular

log = logging.getLogger(__name__)

# A transcript written to within this many seconds is a live conversation: it waits for the
# delta thresholds. Once quiet, whatever was appended is indexed on the next sync, so the end
# of a conversation is never left out.
IDLE_FLUSH_SECONDS = 120.0

_SURROGATE = re.compile("[\ud800-\udfff]")
_NO_REPLY = {"NO_REPLY", '{"action":"NO_REPLY"}'}
# A rendered message starts with its role label, or with the tool label when it only called
# tools; tool lines also follow a message's text, so only a role label marks a message start.
ROLE_LABELS = {
    USER: "User: ",
    ASSISTANT: "Assistant: ",
    RESULT: "Tool result: ",
    SUMMARY: "Summary: ",
}
CHAT_ROLES = (USER, ASSISTANT)
TOOL_LABEL = "Tool: "


@dataclass(frozen=True)
class Message:
    line: int  # 1-based line of the JSONL file
    role: str  # a key of ROLE_LABELS
    text: str  # redacted; "" when the message only called tools
    tools: tuple[str, ...] = ()

    def render(self) -> list[str]:
        """The message's rendered lines (never empty for a parsed message)."""
        label = ROLE_LABELS[self.role]
        body = [ln for ln in self.text.split("\n") if ln.strip()] if self.text else []
        lines = [f"{label}{body[0]}", *body[1:]] if body else []
        return lines + [f"{TOOL_LABEL}{name}" for name in self.tools]


def no_surrogates(text: str) -> str:
    """JSON may spell a lone surrogate (``"\\ud800"``), which json.loads keeps; it cannot be
    encoded as UTF-8 (SQLite, the note writer), so it becomes U+FFFD like any bad byte."""
    return _SURROGATE.sub("\ufffd", text)


def _clean(text: str) -> str:
    return CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n")).strip()


def parse_record(rec: Any, line: int) -> Message | None:
    """One JSON record -> a Message worth rendering, or None (metadata, reasoning alone)."""
    try:
        parsed = formats.parse(rec)
    except RecursionError:
        # Tool arguments nested nearly as deep as json.loads allows are dumped again a few
        # frames deeper: that raised, and failed the whole sync, every sync. Skip the record.
        log.info("line %d: a record nested too deeply to render, skipped", line)
        return None
    if parsed is None:
        return None
    text = no_surrogates(_clean("\n".join(t for t in parsed.texts if t)))
    if text in _NO_REPLY:
        text = ""
    if not text and not parsed.tools:
        return None
    return Message(line, parsed.role, redact(text), tuple(map(no_surrogates, parsed.tools)))


def iter_messages(text: str, path: str = "", first_line: int = 1) -> Iterator[Message]:
    """The messages of a transcript in order; undecodable lines are skipped and logged.

    ``first_line`` numbers the first line of ``text``: a tail read from the middle of a file
    keeps the file's line numbers."""
    lines = text.split("\n")
    last = first_line + len(lines) - 1
    bad: list[int] = []
    for i, raw in enumerate(lines, first_line):
        raw = raw.strip().lstrip("\ufeff")
        if not raw:
            continue
        try:
            rec = json.loads(raw)
        except (ValueError, RecursionError):
            if i == last:  # no newline yet: the writer is still on this line
                log.debug("%s: line %d is incomplete, left for the next sync", path, i)
            else:
                bad.append(i)
            continue
        msg = parse_record(rec, i)
        if msg is not None:
            yield msg
    if bad:
        log.info(
            "%s: skipped %d line(s) that are not JSON (first: line %d)", path, len(bad), bad[0]
        )


def _render_into(msg: Message, out: list[str], line_map: list[int]) -> None:
    rendered = msg.render()
    out += rendered
    line_map += [msg.line] * len(rendered)


def render_messages(messages: list[Message]) -> SourceText:
    out: list[str] = []
    line_map: list[int] = []
    for msg in messages:
        _render_into(msg, out, line_map)
    return SourceText("\n".join(out), tuple(line_map))


def render_transcript(text: str, path: str = "") -> SourceText:
    """The redacted, rendered text of a transcript with its line map (rendered line ->
    original 1-based JSONL line)."""
    return render_messages(list(iter_messages(text, path)))


# -- growing transcripts ------------------------------------------------------------------------

ANCHOR_BYTES = 4096


@dataclass
class Segment:
    """The rendered lines of a transcript's bytes from a line boundary to the end.

    Complete (newline-terminated) lines are settled. An unterminated last line that already
    parses is rendered too (``pending``: a writer may never end its file with a newline) but
    not consumed: the next sync reads it again, finished or not.
    """

    lines: list[str]  # rendered lines of the complete JSONL lines
    numbers: list[int]  # their original 1-based JSONL line numbers
    pending: list[str]  # rendered lines of the unterminated last line
    pending_numbers: list[int]
    consumed: int  # bytes of complete lines, through the last newline
    next_line: int  # number of the first line not complete yet


def render_segment(data: bytes, first_line: int = 1, path: str = "") -> Segment:
    """Render ``data``, which starts at the beginning of line ``first_line`` of a transcript.

    Rendering is per JSONL line (and redaction per message), so a tail renders exactly as the
    same lines do inside the whole file."""
    consumed = data.rfind(b"\n") + 1
    next_line = first_line + data.count(b"\n")
    seg = Segment([], [], [], [], consumed, next_line)
    # A newline byte never occurs inside a UTF-8 sequence: decoding from a line start is exact.
    for msg in iter_messages(data.decode("utf-8", errors="replace"), path, first_line):
        if msg.line < next_line:
            _render_into(msg, seg.lines, seg.numbers)
        else:
            _render_into(msg, seg.pending, seg.pending_numbers)
    return seg


def anchor(head: bytes, before: bytes) -> str:
    """Fingerprint of the bytes an earlier sync read: the first and the last ANCHOR_BYTES
    before its offset. If they still match, the file was appended to, not rewritten."""
    h = hashlib.sha256(len(head).to_bytes(8, "big"))
    h.update(head)
    h.update(before)
    return h.hexdigest()[:32]


def anchor_windows(fh: BinaryIO, offset: int) -> tuple[bytes, bytes]:
    """(first, last) ANCHOR_BYTES of the file before ``offset``: two small reads."""
    fh.seek(0)
    head = fh.read(min(ANCHOR_BYTES, offset))
    start = max(0, offset - ANCHOR_BYTES)
    fh.seek(start)
    return head, fh.read(offset - start)


def count_messages(data: bytes) -> int:
    """User and assistant messages in complete (newline-terminated) JSONL lines of ``data``."""
    n = 0
    for raw in data.split(b"\n")[:-1]:
        try:
            rec = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        msg = parse_record(rec, 0)
        n += msg is not None and msg.role in CHAT_ROLES
    return n


SyncAction = Literal["index", "wait", "drop"]


def sync_action(
    path: Path,
    size: int,
    mtime: float,
    indexed_size: int | None,
    delta_bytes: int,
    delta_messages: int,
    retention_days: int = 0,
    now: float | None = None,
) -> SyncAction:
    """What a sync should do with a transcript on disk.

    ``drop``: older than the retention (by last write), so out of the index (never off disk).
    ``wait``: it grew since it was indexed, but by less than both delta thresholds, and it is
    still being written: the next sync past a threshold (or once quiet) indexes it.
    ``index``: go on as for any file (new, rewritten, shrunk, past a threshold, or quiet).
    Only the appended bytes are read to count messages, never the whole file.
    """
    now = time.time() if now is None else now
    if retention_days > 0 and now - mtime > retention_days * 86400:
        return "drop"
    if indexed_size is None or size <= indexed_size:
        return "index"
    grown = size - indexed_size
    if grown >= delta_bytes or now - mtime >= IDLE_FLUSH_SECONDS:
        return "index"
    try:
        with open_regular(path) as fh:
            fh.seek(indexed_size)
            tail = fh.read(grown)
    except (OSError, SourceError):
        return "index"  # let the normal path report the problem
    return "index" if count_messages(tail) >= delta_messages else "wait"
