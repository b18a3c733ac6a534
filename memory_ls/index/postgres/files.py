"""A file's row in the team index (``memory_files``) and its rendered text
(``memory_file_texts``), so any client can show a file that exists on another machine only.

The text is kept in parts: a whole read writes part 0, a transcript's tail appends one part
(its new settled lines) instead of rewriting megabytes, and the last part carries the lines
of an unterminated last JSONL line (``pending``), replaced by the next tail. Each part records
the file's hash after it was written; a text whose last part does not carry the file's hash
(the file changed through a client that does not write texts) is never served.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from ..rows import FileInfo, FileRecord, FileState, FileText, stored_line_map, tail_json
from .database import Session


@dataclass(frozen=True)
class TeamFile:
    """A file as the team index has it: its text (None when no client has sent a current
    one) and its line map (a transcript's JSONL line numbers)."""

    text: str | None
    line_map: list[int] | None
    hash: str  # the file's content hash (or a transcript's tail mark)


def states(s: Session, paths: Iterable[str] | None = None) -> dict[str, FileState]:
    if paths is None:
        rows = s.q("SELECT path, hash, mtime, size FROM memory_files WHERE ns = %s", (s.ns,))
    else:
        rows = s.q(
            "SELECT path, hash, mtime, size FROM memory_files WHERE ns = %s AND path = ANY(%s)",
            (s.ns, list(paths)),
        )
    return {p: FileState(h, m, sz) for p, h, m, sz in rows}


def infos(s: Session, paths: Iterable[str]) -> dict[str, FileInfo]:
    """One statement for all of a search's files: each is a round trip, and with 16 clients on
    2 cores one file's took 8.8 ms p50 (about 2.7 a search, bench/pg.py's workspace)."""
    rows = s.q(
        "SELECT path, source, lines, line_map, date, tail FROM memory_files "
        "WHERE ns = %s AND path = ANY(%s)",
        (s.ns, list(dict.fromkeys(paths))),
    ).fetchall()
    return {p: (src, n, stored_line_map(m, tail), d) for p, src, n, m, d, tail in rows}


def upsert(s: Session, record: FileRecord) -> None:
    """Write a file's row and, when the record carries one, its text (as part 0)."""
    s.lock_path(record.path)
    s.q(
        "INSERT INTO memory_files (ns, path, source, hash, mtime, size, date, lines, "
        "line_map, tail, meta, origin) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (ns, path) DO UPDATE SET source = excluded.source, "
        "hash = excluded.hash, mtime = excluded.mtime, size = excluded.size, "
        "date = excluded.date, lines = excluded.lines, line_map = excluded.line_map, "
        "tail = excluded.tail, meta = excluded.meta, origin = excluded.origin, "
        "updated_at = now()",
        (s.ns, *record.columns(), s.db.origin),
    )
    s.q("DELETE FROM memory_file_texts WHERE ns = %s AND path = %s", (s.ns, record.path))
    if record.text is not None:
        _put_part(s, record.path, 0, record.hash, record.text)


def extend(s: Session, record: FileRecord) -> None:
    """A transcript's appended tail: ``record.line_map`` extends the row's line map and
    ``record.text`` is appended as the text's next part; the rest of the row is replaced."""
    path = record.path
    s.lock_path(path)
    row = s.q(
        "SELECT line_map, hash FROM memory_files WHERE ns = %s AND path = %s", (s.ns, path)
    ).fetchone()
    line_map = (json.loads(row[0]) if row and row[0] else []) + list(record.line_map or ())
    s.q(
        "UPDATE memory_files SET hash = %s, mtime = %s, size = %s, date = %s, lines = %s, "
        "tail = %s, line_map = %s, origin = %s, updated_at = now() "
        "WHERE ns = %s AND path = %s",
        (
            record.hash,
            record.mtime,
            record.size,
            record.date,
            record.lines,
            tail_json(record.tail),
            json.dumps(line_map) if line_map else None,
            s.db.origin,
            s.ns,
            path,
        ),
    )
    last = s.q(
        "SELECT part, hash FROM memory_file_texts WHERE ns = %s AND path = %s "
        "ORDER BY part DESC LIMIT 1",
        (s.ns, path),
    ).fetchone()
    if record.text is None or row is None or last is None or last[1] != row[1]:
        # What was there is not the text before this tail: serve nothing rather than a text
        # with a hole; the next whole read of the file writes it again.
        s.q("DELETE FROM memory_file_texts WHERE ns = %s AND path = %s", (s.ns, path))
        return
    _put_part(s, path, int(last[0]) + 1, record.hash, record.text)


def _put_part(s: Session, path: str, part: int, hash_: str, text: FileText) -> None:
    s.q(
        "INSERT INTO memory_file_texts (ns, path, part, hash, body, pending) "
        "VALUES (%s, %s, %s, %s, %s, %s)",
        (s.ns, path, part, hash_, text.body, text.pending),
    )


def read(s: Session, path: str, known: str | None = None) -> TeamFile | None:
    """The file's text and line map; None when the team index has no such file. ``known``:
    the hash of a text the caller holds, not read again while the file has that hash."""
    row = s.q(
        "SELECT hash, line_map, tail FROM memory_files WHERE ns = %s AND path = %s",
        (s.ns, path),
    ).fetchone()
    if row is None:
        return None
    if row[0] == known:
        return TeamFile(None, stored_line_map(row[1], row[2]), row[0])
    parts = s.q(
        "SELECT string_agg(body, '' ORDER BY part), (array_agg(hash ORDER BY part DESC))[1], "
        "(array_agg(pending ORDER BY part DESC))[1] FROM memory_file_texts "
        "WHERE ns = %s AND path = %s",
        (s.ns, path),
    ).fetchone()
    body, last_hash, pending = parts if parts else (None, None, None)
    text = body + pending if body is not None and last_hash == row[0] else None
    return TeamFile(text, stored_line_map(row[1], row[2]), row[0])


def put_text(s: Session, path: str, hash_: str, text: FileText) -> bool:
    """Give a file the team index holds with content ``hash_`` its text (as part 0, in place
    of any); False when the file is not there with that content (it changed meanwhile)."""
    s.lock_path(path)
    row = s.q("SELECT hash FROM memory_files WHERE ns = %s AND path = %s", (s.ns, path)).fetchone()
    if row is None or row[0] != hash_:
        return False
    s.q("DELETE FROM memory_file_texts WHERE ns = %s AND path = %s", (s.ns, path))
    _put_part(s, path, 0, hash_, text)
    return True


def without_text(s: Session, paths: Iterable[str]) -> set[str]:
    """Of ``paths``, the files the team index holds with no current text (written by a client
    that sent none): their next push sends it."""
    rows = s.q(
        "SELECT f.path FROM memory_files f WHERE f.ns = %s AND f.path = ANY(%s) AND NOT EXISTS "
        "(SELECT 1 FROM memory_file_texts t WHERE t.ns = f.ns AND t.path = f.path "
        "AND t.hash = f.hash)",
        (s.ns, list(paths)),
    )
    return {r[0] for r in rows}
