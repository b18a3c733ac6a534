"""The session-memory writer: the last messages of a transcript as a dated memory note.

Writes ``memory/YYYY-MM-DD-<slug>.md`` in the seed's format (OpenClaw's session-memory hook):
a ``# Session: <date> <time> UTC`` title, Session Key / Session ID / Source bullets, then
``## Conversation Summary`` with the last N user and assistant messages, redacted. It is the
one place memory-ls creates a memory file, and it never overwrites one (``-2``, ``-3``, ...).
The caller indexes the new file (``engine.sync()`` or ``engine.mark_dirty``). Where the messages
come from (a file, stdin, an agent hook's payload) is ``sessions/hooks.py``'s business.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from ..redact import redact
from ..search.query import keywords
from ..settings import SessionWriterSettings, Settings
from ..sources.sessions import CHAT_ROLES, Message, iter_messages, no_surrogates
from ..workspace import MEMORY_DIR

log = logging.getLogger(__name__)

# Reading more than the tail of a huge transcript buys nothing: only the last messages are kept.
MAX_READ_BYTES = 50 * 1024 * 1024
MAX_SLUG_WORDS = 5
MAX_SLUG_CHARS = 48
MAX_BULLET_CHARS = 200
SLUG_PROMPT = (
    "Name this conversation for a file name: reply with a slug of 1 to 4 lowercase English "
    "words joined by hyphens (for example api-design or vendor-pitch), and nothing else."
)
_SLUG = re.compile(rf"[a-z0-9]+(?:-[a-z0-9]+){{0,{MAX_SLUG_WORDS - 1}}}")
_MARKER = re.compile(r"\[REDACTED:[^\]]*\]")
_SLUG_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
# Words that say nothing about a conversation's subject.
_DULL = {
    "user",
    "assistant",
    "tool",
    "redacted",
    "secret",
    "http",
    "https",
    "www",
    "com",
    "yes",
    "okay",
    "thanks",
    "thank",
    "please",
    "sure",
    "let",
    "can",
    "could",
    "would",
    "need",
    "want",
    "like",
    "just",
    "also",
    "now",
}


def read_tail(path: Path, limit: int = MAX_READ_BYTES) -> str:
    """The text of a transcript, or of its last ``limit`` bytes from a line boundary on."""
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            fh.seek(size - limit)
            data = fh.read()
            data = data[data.find(b"\n") + 1 :]
        else:
            data = fh.read()
    return data.decode("utf-8", errors="replace")


def session_meta(text: str) -> dict[str, str]:
    """Session id and key from the transcript's header record, when it has one."""
    meta: dict[str, str] = {}
    for raw in text.split("\n", 50)[:50]:
        try:
            rec = json.loads(raw)
        except (ValueError, RecursionError):  # junk, or nested deeper than json.loads goes
            continue
        if not isinstance(rec, dict):
            continue
        for key, names in (
            ("id", ("sessionId", "session_id")),
            ("key", ("sessionKey", "session_key")),
        ):
            for name in names:
                if isinstance(rec.get(name), str) and key not in meta:
                    meta[key] = rec[name]
        if rec.get("type") == "session":
            if isinstance(rec.get("id"), str):
                meta.setdefault("id", rec["id"])
            if isinstance(rec.get("key"), str):
                meta.setdefault("key", rec["key"])
    return meta


def pick_recent(messages: Iterable[Message], count: int) -> list[Message]:
    """The last ``count`` user/assistant messages with text (slash commands left out), without
    tool lines, tool results or summaries."""
    picked = [
        Message(m.line, m.role, m.text)
        for m in messages
        if m.text and m.role in CHAT_ROLES and not (m.role == "user" and m.text.startswith("/"))
    ]
    return picked[-count:] if count > 0 else []


def recent_messages(text: str, count: int, name: str = "") -> list[Message]:
    """The last ``count`` user/assistant messages of a transcript's text."""
    return pick_recent(iter_messages(text, name), count)


@dataclass(frozen=True)
class SessionInput:
    """What a note is written from: the picked messages and the bullets' values."""

    messages: list[Message]
    session_id: str
    session_key: str = "unknown"
    source: str = "unknown"


def from_transcript(text: str, name: str, count: int) -> SessionInput:
    """The last ``count`` messages of a transcript, with the id and key its header names."""
    meta = session_meta(text)
    return SessionInput(
        recent_messages(text, count, name),
        meta.get("id") or Path(name).stem,
        meta.get("key") or "unknown",
    )


def clean_slug(raw: str) -> str | None:
    """A model's answer as a valid slug (short, lowercase, hyphenated), or None."""
    text = re.sub(r"<think>.*?</think>", "", raw, flags=re.S | re.I).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.rsplit(":", 1)[-1].strip().strip("\"'`*.").removesuffix(".md")
    slug = re.sub(r"[\s_]+", "-", line.lower())
    slug = re.sub(r"[^a-z0-9-]", "", slug)
    slug = re.sub(r"-{2,}", "-", slug).strip("-")
    slug = re.sub(r"^\d{4}-\d{2}-\d{2}-?", "", slug)  # a model that dated the name itself
    if len(slug) < 2 or len(slug) > MAX_SLUG_CHARS or not _SLUG.fullmatch(slug):
        return None
    return slug


def llm_slug(conversation: str, cfg: SessionWriterSettings) -> str | None:
    """A slug from an OpenAI-compatible chat-completions endpoint; None when none is
    configured or it fails (the failure is logged without the key or the conversation)."""
    if not (cfg.base_url and cfg.model and conversation.strip()):
        return None
    url = cfg.base_url.rstrip("/")
    if not url.endswith("/chat/completions"):
        url += "/chat/completions"
    headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
    body: dict[str, Any] = {
        "model": cfg.model,
        "messages": [
            {"role": "system", "content": SLUG_PROMPT},
            {"role": "user", "content": conversation[-4000:]},
        ],
        "temperature": 0,
        "max_tokens": 24,
    }
    try:
        resp = httpx.post(url, json=body, headers=headers, timeout=cfg.timeout_ms / 1000)
        resp.raise_for_status()
        answer = resp.json()["choices"][0]["message"]["content"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        log.warning("session slug: chat endpoint failed (%s); using keywords", redact(str(exc)))
        return None
    slug = clean_slug(answer) if isinstance(answer, str) else None
    if slug is None:
        log.warning("session slug: the model's answer is not a usable slug; using keywords")
    return slug


def keyword_slug(messages: list[Message], words: int = 3) -> str | None:
    """The conversation's top keywords (by how many messages use them) as a slug."""
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    for m in messages:
        for w in keywords(_MARKER.sub(" ", m.text)):
            if _SLUG_WORD.fullmatch(w) and w not in _DULL:
                counts[w] += 1
                first.setdefault(w, len(first))
    slug = ""
    for w in sorted(counts, key=lambda w: (-counts[w], first[w]))[:words]:
        if len(slug) + len(w) + 1 > MAX_SLUG_CHARS:
            break
        slug = f"{slug}-{w}" if slug else w
    return slug or None


def _bullet(value: str) -> str:
    """A bullet's value on its one line, of a sane length. The id and key come from the
    transcript's header record (and --key / --source, memory.saveSession's source): one with
    line breaks wrote headings and lines of its choosing into the note, as if remembered."""
    flat = " ".join(value.split())  # every line break str.split knows: \n, \r, U+2028, ...
    return flat if len(flat) <= MAX_BULLET_CHARS else flat[: MAX_BULLET_CHARS - 1] + "…"


def render_note(
    messages: list[Message], when: datetime, key: str, session_id: str, source: str
) -> str:
    parts = [
        f"# Session: {when:%Y-%m-%d %H:%M:%S} UTC",
        "",
        f"- **Session Key**: {_bullet(key)}",
        f"- **Session ID**: {_bullet(session_id)}",
        f"- **Source**: {_bullet(source)}",
        "",
    ]
    if messages:
        body = [line for m in messages for line in m.render()]
        parts += ["## Conversation Summary", "", *body, ""]
    return redact("\n".join(parts))


def write_new(folder: Path, stem: str, text: str) -> Path:
    """Create ``stem.md`` in ``folder``, or ``stem-2.md``, ``stem-3.md``...: never overwrite.

    The note is written whole under a hidden name, then linked to its name, which fails when
    the name is taken: the check and the creation are one step, so two writers cannot pick one
    name, and the note never shows half-written (a process killed mid-write left one, which a
    watching editor indexed and nothing ever finished).
    """
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{stem}.", suffix=".tmp", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 is not a note's mode
        for path in _names(folder, stem):
            try:
                os.link(tmp, path)
            except FileExistsError:
                continue
            except OSError:  # no hard links here (some network or FAT file systems)
                return _write_exclusive(folder, stem, text)
            return path
        raise AssertionError("unreachable: _names never ends")
    finally:
        tmp.unlink(missing_ok=True)


def _write_exclusive(folder: Path, stem: str, text: str) -> Path:
    """``write_new`` where hard links fail: O_EXCL picks the name; a full disk leaves no half
    note behind (a killed process may)."""
    for path in _names(folder, stem):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path
    raise AssertionError("unreachable: _names never ends")


def _names(folder: Path, stem: str) -> Iterator[Path]:
    """``stem.md``, then ``stem-2.md``, ``stem-3.md``...: the names a new note may take."""
    yield folder / f"{stem}.md"
    for n in itertools.count(2):
        yield folder / f"{stem}-{n}.md"


def write_note(
    root: Path | str,
    session: SessionInput,
    settings: Settings | None = None,
    now: datetime | None = None,
) -> Path:
    """Write ``session`` as ``memory/YYYY-MM-DD-<slug>.md`` under ``root``; return its path."""
    settings = settings or Settings()
    when = (now or datetime.now(UTC)).astimezone(UTC)
    picked = session.messages
    conversation = "\n".join(line for m in picked for line in m.render())
    slug = (
        llm_slug(conversation, settings.session_writer)
        or keyword_slug(picked)
        or f"{when:%H%M}"  # the seed's fallback: nothing to name it by
    )
    note = render_note(picked, when, session.session_key, session.session_id, session.source)
    note = no_surrogates(note)  # a JSON "\\ud800" in the header record's id, say
    path = write_new(Path(root) / MEMORY_DIR, f"{when:%Y-%m-%d}-{slug}", note)
    log.info("saved %d messages of session %s to %s", len(picked), session.session_id, path.name)
    return path


def save_session(
    root: Path | str,
    transcript_path: Path | str,
    messages: int = 15,
    source: str | None = None,
    settings: Settings | None = None,
    *,
    session_key: str | None = None,
    now: datetime | None = None,
) -> Path:
    """Write the last ``messages`` messages of a transcript as ``memory/YYYY-MM-DD-<slug>.md``
    under ``root`` and return its path. Raises OSError when the transcript cannot be read."""
    session = load_session(transcript_path, messages, source, session_key)
    return write_note(root, session, settings, now)


def load_session(
    transcript_path: Path | str,
    messages: int = 15,
    source: str | None = None,
    session_key: str | None = None,
) -> SessionInput:
    """The last ``messages`` messages of a transcript file, with its header's id and key
    (``source`` and ``session_key`` win). Raises OSError when it cannot be read."""
    transcript = Path(transcript_path).expanduser()
    session = from_transcript(read_tail(transcript), transcript.name, messages)
    return replace(
        session,
        source=source or session.source,
        session_key=session_key or session.session_key,
    )
