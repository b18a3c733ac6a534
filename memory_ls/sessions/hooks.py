"""Where ``memory-ls session save`` gets a conversation: a transcript file, a transcript on
stdin (``-``), or an agent hook's JSON payload (``--hook``).

Two payloads are understood, as the agents send them:

* Claude Code hooks (``SessionEnd``, also ``Stop`` or ``PreCompact``) write a JSON object to the
  command's stdin: ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``reason``.
  The note is made from the transcript the payload points at.
* Codex's ``notify`` program gets one JSON argument after the configured ones, after every turn:
  ``type`` ("agent-turn-complete"), ``thread-id``, ``turn-id``, ``cwd``, ``input-messages`` (the
  turn's user messages) and ``last-assistant-message``. There is no transcript path, so the note
  is made from that turn's messages: one new note per turn (a note is never modified).

Every problem is an ``InputError`` with a one-line message, raised before anything is written.
A hook must not hold its agent up: payloads are capped at ``MAX_PAYLOAD_BYTES`` and stdin is
waited on for ``STDIN_TIMEOUT_S`` at most (an agent may leave its end of the pipe open).
"""

from __future__ import annotations

import json
import os
import queue
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

from ..sources.sessions import Message, parse_record
from .writer import (
    MAX_READ_BYTES,
    SessionInput,
    from_transcript,
    pick_recent,
    read_tail,
)

MAX_PAYLOAD_BYTES = 1024 * 1024
STDIN_TIMEOUT_S = 5.0
_CHUNK = 64 * 1024
# Ids end up on a note's bullet lines: one line, of a sane length.
_ID = re.compile(r"[^\x00-\x1f\x7f]{1,200}")


class InputError(ValueError):
    """A transcript or payload that cannot be saved; ``str()`` is one line for stderr."""


@dataclass(frozen=True)
class Found:
    """A conversation to save (None: it has no messages, nothing to save) and the agent's folder."""

    session: SessionInput | None
    cwd: Path | None = None


def session_input(
    target: str | None,
    *,
    hook: bool,
    count: int,
    stdin: BinaryIO | None,
    key: str | None = None,
    source: str | None = None,
) -> Found:
    """The conversation named by ``session save``'s arguments; raises InputError.

    ``stdin`` is None when the process was started without one (Python's sys.stdin is then
    None): only a payload or a transcript read from it needs it."""
    if target is None and not hook:
        raise InputError("give a transcript, - to read one from stdin, or --hook")
    if target in (None, "-"):
        if stdin is None:
            raise InputError("stdin is closed: give the transcript's path or the payload")
        if hook:
            found = from_payload(read_payload(stdin), count)
        else:
            found = Found(from_transcript(read_stream_tail(stdin), "stdin", count))
    elif hook:
        found = from_payload(target.encode("utf-8", "replace"), count)
    else:
        path = Path(target).expanduser()
        found = Found(from_transcript(_read(path), path.name, count))
    if found.session is not None and not found.session.messages:
        found = replace(found, session=None)  # nothing to save, as for a hook
    if found.session is not None and (key or source):
        session = replace(
            found.session,
            session_key=key or found.session.session_key,
            source=source or found.session.source,
        )
        found = replace(found, session=session)
    return found


def _read(path: Path) -> str:
    try:
        return read_tail(path)
    except OSError as exc:
        raise InputError(f"cannot read the transcript {path}: {exc.strerror or exc}") from None


def read_stream_tail(stream: BinaryIO, limit: int = MAX_READ_BYTES) -> str:
    """A transcript piped in, or its last ``limit`` bytes from a line boundary on (as a file)."""
    chunks: deque[bytes] = deque()
    kept = 0
    cut = False
    while data := stream.read(_CHUNK):
        chunks.append(data)
        kept += len(data)
        while kept - len(chunks[0]) >= limit:
            kept -= len(chunks.popleft())
            cut = True
    data = b"".join(chunks)
    if len(data) > limit:
        data, cut = data[-limit:], True
    if cut:
        data = data[data.find(b"\n") + 1 :]
    return data.decode("utf-8", errors="replace")


def read_payload(
    stream: BinaryIO, limit: int = MAX_PAYLOAD_BYTES, timeout: float = STDIN_TIMEOUT_S
) -> bytes:
    """A JSON payload from stdin: up to end of input or the first complete JSON value.

    A thread reads, so a writer that never closes the pipe costs ``timeout`` at most."""
    chunks: queue.Queue[bytes] = queue.Queue()

    # os.read on the descriptor returns what has arrived, and a thread still blocked in it at
    # exit holds no lock of the buffered stdin object (which aborts the interpreter's shutdown).
    fd = stream.fileno()

    def pump() -> None:
        try:
            while data := os.read(fd, _CHUNK):
                chunks.put(data)
        except (OSError, ValueError):
            pass
        chunks.put(b"")

    threading.Thread(target=pump, name="hook-stdin", daemon=True).start()
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while True:
        try:
            data = chunks.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            what = "an incomplete hook payload" if buf else "no hook payload"
            raise InputError(f"{what} on stdin within {timeout:g} s") from None
        if not data:
            return bytes(buf)
        buf += data
        if len(buf) > limit:
            raise InputError(f"the hook payload is larger than {limit} bytes")
        if _complete(buf):
            return bytes(buf)


def _complete(buf: bytearray) -> bool:
    try:
        json.loads(buf)
    except (ValueError, RecursionError):
        return False
    return True


def from_payload(raw: bytes, count: int) -> Found:
    """A Claude Code hook payload or a Codex notify payload as a conversation to save."""
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise InputError(f"the hook payload is larger than {MAX_PAYLOAD_BYTES} bytes")
    try:
        obj = json.loads(raw.decode("utf-8-sig"))  # a BOM, as some Windows tools write
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InputError("the hook payload is not JSON") from None
    if not isinstance(obj, dict):
        raise InputError("the hook payload is not a JSON object")
    if "hook_event_name" in obj:
        return _claude_code(obj, count)
    if "type" in obj:
        return _codex(obj, count)
    raise InputError(
        "not a Claude Code hook payload (hook_event_name) nor a Codex notify payload (type)"
    )


def _text(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"the hook payload has no {name!r} string")
    return value


def _ident(obj: dict[str, Any], name: str) -> str:
    value = _text(obj, name)
    if not _ID.fullmatch(value):
        raise InputError(f"the hook payload's {name!r} is not a one-line id")
    return value


def _cwd(obj: dict[str, Any]) -> Path | None:
    value = obj.get("cwd")
    return Path(value).expanduser() if isinstance(value, str) and value.strip() else None


def _claude_code(obj: dict[str, Any], count: int) -> Found:
    _text(obj, "hook_event_name")
    session_id = _ident(obj, "session_id")
    cwd = _cwd(obj)
    transcript = Path(_text(obj, "transcript_path")).expanduser()
    if not transcript.is_absolute() and cwd is not None:
        transcript = cwd / transcript
    session = from_transcript(_read(transcript), transcript.name, count)
    if not session.messages:
        return Found(None, cwd)
    return Found(replace(session, session_key=session_id, source="claude-code"), cwd)


def _codex(obj: dict[str, Any], count: int) -> Found:
    kind = obj.get("type")
    if kind != "agent-turn-complete":
        raise InputError(f"unsupported Codex notification type {str(kind)[:40]!r}")
    thread = _ident(obj, "thread-id")
    inputs = obj.get("input-messages")
    if not isinstance(inputs, list) or not all(isinstance(m, str) for m in inputs):
        raise InputError("the hook payload's 'input-messages' is not a list of strings")
    answer = obj.get("last-assistant-message")
    if answer is not None and not isinstance(answer, str):
        raise InputError("the hook payload's 'last-assistant-message' is not a string")
    turns = [("user", text) for text in inputs] + ([("assistant", answer)] if answer else [])
    parsed = [
        parse_record({"role": role, "content": text}, i) for i, (role, text) in enumerate(turns, 1)
    ]
    messages = pick_recent([m for m in parsed if isinstance(m, Message)], count)
    if not messages:
        return Found(None, _cwd(obj))
    return Found(SessionInput(messages, thread, thread, "codex"), _cwd(obj))
