"""The plain row types of an index and the byte form of a vector."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# (source, lines, line map, date) of an indexed file
FileInfo = tuple[str, int, list[int] | None, str | None]


@dataclass(frozen=True)
class ChunkRow:
    id: int
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    date: str | None  # of the file; None = evergreen
    meta: str | None = None  # the file's front matter (JSON: sources/frontmatter.FileMeta)


@dataclass(frozen=True)
class ChunkState:
    id: int
    hash: str
    start_line: int
    end_line: int
    embedding: bytes | None


@dataclass(frozen=True)
class FileState:
    hash: str
    mtime: float
    size: int


@dataclass(frozen=True)
class FileText:
    """A file's rendered text, for a team index (a client elsewhere may not have the file):
    rendered lines, each ending in a newline (a markdown file: its text as it is)."""

    body: str
    pending: str = ""  # an unterminated last JSONL line's rendered lines, read again next time

    @classmethod
    def of_lines(cls, lines: Sequence[str], pending: Sequence[str] = ()) -> FileText:
        return cls("".join(f"{ln}\n" for ln in lines), "".join(f"{ln}\n" for ln in pending))


@dataclass(frozen=True)
class FileRecord:
    """What an index records of a file it has just written (its ``files`` row), whichever
    store keeps it. For ``extend_file`` (a transcript's appended tail), ``line_map`` and
    ``text`` hold what was appended only, and ``source`` is the one already recorded."""

    path: str
    source: str
    hash: str  # the content hash (or a transcript's tail mark: it never equals one)
    mtime: float
    size: int
    date: str | None  # ISO date driving temporal decay; None = evergreen
    lines: int  # rendered lines
    line_map: Sequence[int] | None = None  # rendered line -> original line (transcripts)
    tail: dict[str, Any] | None = None  # where a transcript's next sync resumes
    text: FileText | None = None  # the rendered text, kept where the file may be elsewhere
    meta: str | None = None  # its front matter (JSON: sources/frontmatter.FileMeta)

    def columns(self) -> tuple[Any, ...]:
        """The ``files`` row's values, as both stores keep them: path, source, hash, mtime,
        size, date, lines, line_map (JSON), tail (JSON), meta (JSON)."""
        line_map = json.dumps(list(self.line_map)) if self.line_map else None
        return (
            self.path, self.source, self.hash, self.mtime, self.size, self.date, self.lines,
            line_map, tail_json(self.tail), self.meta,
        )  # fmt: skip


def tail_json(tail: dict[str, Any] | None) -> str | None:
    return json.dumps(tail, separators=(",", ":")) if tail is not None else None


def to_blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=np.float32).tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32)


def stored_line_map(line_map: str | None, tail: str | None) -> list[int] | None:
    """A file row's line map (JSON), with the rendered lines of a transcript's unterminated
    last JSONL line (its tail state's ``pending``) kept beside it."""
    out = json.loads(line_map) if line_map else None
    pending = json.loads(tail).get("pending") if tail else None
    if pending:
        out = (out or []) + pending
    return out
