"""Line vectors: each line of a chunk embedded on its own, for re-scoring a chunk by its best
line (``search/score.py``).

A chunk's vector averages a dozen lines, so a question answered by one of them (one turn of a
conversation, one sentence of an abstract) matches the whole chunk only weakly. They are
embedded after the chunk vectors, in the background, and stored per chunk (``chunk_lines``,
as int8), so they go when their chunk goes. A chunk of one line has none: its vector is that line's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .schema import unit_f32

MIN_CHARS = 12  # "Thanks!", "---", a date: nothing to match a question against
SPLIT_OVER = 600  # a longer line (a paragraph on one line) is cut into sentences
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")
_PART = 500


def segments(text: str, keep: Callable[[str], bool] | None = None) -> list[tuple[int, str]]:
    """The parts of a chunk that get a vector, each with its line in the chunk (0-based):
    its lines, without headings (the chunk's vector holds them) and lines under MIN_CHARS;
    a line over SPLIT_OVER characters as its sentences; only the parts ``keep`` accepts.
    Empty when there is at most one such part (the chunk's own vector says it all)."""
    out: list[tuple[int, str]] = []
    for i, raw in enumerate(text.split("\n")):
        line = raw.strip()
        if len(line) < MIN_CHARS or line.startswith("#"):
            continue
        parts = _SENTENCE_END.split(line) if len(line) > SPLIT_OVER else [line]
        out += [(i, p.strip()) for p in parts if len(p.strip()) >= MIN_CHARS]
    if keep is not None:
        out = [(i, p) for i, p in out if keep(p)]
    return out if len(out) > 1 else []


@dataclass(frozen=True)
class ChunkLines:
    rows: np.ndarray  # each vector's line in the chunk (0-based)
    vectors: np.ndarray  # float32, unit length, one row per part


class LineVectors:
    """The ``chunk_lines`` table of one connection."""

    shared = False  # one user's index: past query.lines.maxChunks its line vectors are dropped

    def __init__(self, conn: Any):
        self.conn = conn

    def pending(self, limit: int) -> list[tuple[int, str, str]]:
        """(id, hash, text) of chunks that have their vector but not yet their lines'."""
        return self.conn.execute(
            "SELECT id, hash, text FROM chunks WHERE vec = 1 AND lines = 0 ORDER BY id LIMIT ?",
            (limit,),
        ).fetchall()

    def count_pending(self) -> int:
        return self.conn.execute(
            "SELECT count(*) FROM chunks WHERE vec = 1 AND lines = 0"
        ).fetchone()[0]

    def put(self, rows: Sequence[tuple[int, str]], lines: dict[int, ChunkLines]) -> None:
        """Mark these (id, hash) chunks done, unless their text changed since they were read,
        and store the lines of those that have some."""
        if not rows:
            return
        marks = ",".join("?" * len(rows))
        live = self.conn.execute(
            f"SELECT id, hash FROM chunks WHERE id IN ({marks})", [cid for cid, _ in rows]
        ).fetchall()
        wanted = dict(rows)
        done = [cid for cid, h in live if wanted.get(cid) == h]
        # A row left by an older writer under a reused id must not outlive the new chunk.
        self.conn.executemany("DELETE FROM chunk_lines WHERE id = ?", [(c,) for c in done])
        self.conn.executemany(
            "INSERT OR REPLACE INTO chunk_lines(id, rows, vectors) VALUES (?, ?, ?)",
            [(cid, *pack(lines[cid])) for cid in done if cid in lines],
        )
        self.conn.executemany("UPDATE chunks SET lines = 1 WHERE id = ?", [(c,) for c in done])

    def get(self, ids: Sequence[int]) -> dict[int, ChunkLines]:
        found: list[tuple[int, bytes, bytes]] = []
        for i in range(0, len(ids), _PART):
            part = list(ids[i : i + _PART])
            marks = ",".join("?" * len(part))
            found += self.conn.execute(
                f"SELECT id, rows, vectors FROM chunk_lines WHERE id IN ({marks})", part
            ).fetchall()
        return unpack(found)

    def retire(self, ids: Sequence[int]) -> None:
        """These chunks are about to be deleted: set their lines aside by text, so that the
        chunks that replace them (an edit re-chunks the whole file) get them back from
        ``revive`` instead of embedding them again. What was set aside before is dropped."""
        self.conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS retired_lines "
            "(hash TEXT PRIMARY KEY, rows BLOB NOT NULL, vectors BLOB NOT NULL)"
        )
        self.conn.execute("DELETE FROM temp.retired_lines")
        for i in range(0, len(ids), _PART):
            part = list(ids[i : i + _PART])
            marks = ",".join("?" * len(part))
            self.conn.execute(
                "INSERT OR IGNORE INTO temp.retired_lines SELECT c.hash, l.rows, l.vectors "
                f"FROM chunks c JOIN chunk_lines l ON l.id = c.id WHERE c.id IN ({marks})",
                part,
            )
        self.conn.executemany("DELETE FROM chunk_lines WHERE id = ?", [(i,) for i in ids])

    def revive(self, chunks: Sequence[tuple[int, str]]) -> None:
        """New (id, text hash) chunks whose text had lines set aside by ``retire`` get them."""
        if (
            not chunks
            or not self.conn.execute(
                "SELECT 1 FROM sqlite_temp_master WHERE name = 'retired_lines'"
            ).fetchone()
        ):
            return
        self.conn.executemany(
            "INSERT OR REPLACE INTO chunk_lines(id, rows, vectors) "
            "SELECT ?, rows, vectors FROM temp.retired_lines WHERE hash = ?",
            chunks,
        )
        self.conn.executemany(
            "UPDATE chunks SET lines = 1 WHERE id = ? AND EXISTS "
            "(SELECT 1 FROM temp.retired_lines WHERE hash = ?)",
            chunks,
        )

    def drop_all(self) -> int:
        """Forget every line vector (the index outgrew ``query.lines.maxChunks``)."""
        n = self.conn.execute("DELETE FROM chunk_lines").rowcount
        self.conn.execute("UPDATE chunks SET lines = 0 WHERE lines = 1")
        return int(n)

    def copy_from(self, other: Path) -> int:
        """Give this (rebuilt) index's chunks the line vectors of ``other``'s chunks of the same
        text, when both index the same model: a rebuild for new chunking settings re-embeds
        only the lines of chunks it has not seen. Returns how many chunks got theirs."""
        self.conn.execute("ATTACH DATABASE ? AS old", (str(other),))
        try:
            tables = {n for (n,) in self.conn.execute("SELECT name FROM old.sqlite_master")}
            if "chunk_lines" not in tables:
                return 0
            keys = ("provider", "model", "providerKey")
            sql = "SELECT key, value FROM {}meta WHERE key IN ('provider', 'model', 'providerKey')"
            mine, theirs = (dict(self.conn.execute(sql.format(d)).fetchall()) for d in ("", "old."))
            if any(mine.get(k, "") != theirs.get(k, "") for k in keys) or not mine.get("model"):
                return 0
            n = self.conn.execute(
                "INSERT OR IGNORE INTO chunk_lines(id, rows, vectors) "
                "SELECT c.id, l.rows, l.vectors FROM chunks c JOIN old.chunks o ON o.hash = c.hash "
                "JOIN old.chunk_lines l ON l.id = o.id"
            ).rowcount
            self.conn.execute(
                "UPDATE chunks SET lines = 1 WHERE lines = 0 AND id IN (SELECT id FROM chunk_lines)"
            )
            return int(n)
        finally:
            self.conn.execute("DETACH DATABASE old")

    def over(self, max_chunks: int) -> bool:
        """The index holds more than ``max_chunks`` chunks (reads at most that many rows)."""
        row = self.conn.execute("SELECT 1 FROM chunks LIMIT 1 OFFSET ?", (max_chunks,))
        return row.fetchone() is not None

    def any(self) -> bool:
        return self.conn.execute("SELECT 1 FROM chunk_lines LIMIT 1").fetchone() is not None


def pack(lines: ChunkLines) -> tuple[bytes, bytes]:
    """(rows as uint16, vectors as int8): each vector scaled to +-127 at its largest component
    and rounded, half of float16's size; cosine only needs the direction (a row is made unit
    length again when read; measured cosine to the float32 row > 0.9999)."""
    v = np.asarray(lines.vectors, dtype=np.float32)
    peak = np.abs(v).max(axis=1, keepdims=True)
    scaled = np.divide(v * 127.0, peak, out=np.zeros_like(v), where=peak > 0)
    return lines.rows.astype(np.uint16).tobytes(), np.rint(scaled).astype(np.int8).tobytes()


def unpack(found: Sequence[tuple[int, bytes, bytes]]) -> dict[int, ChunkLines]:
    """Chunk id -> its lines, from (id, rows, vectors) as ``pack`` made them; rows of no lines
    (a chunk marked done with nothing to embed) are left out."""
    found = [f for f in found if f[1]]
    if not found:
        return {}
    # One conversion for all of them: a search asks for 30 chunks and waits for this.
    rows = [np.frombuffer(r, dtype=np.uint16) for _, r, _ in found]
    flat = np.frombuffer(b"".join(bytes(v) for _, _, v in found), dtype=np.int8)
    vectors = unit_f32(flat.reshape(sum(len(r) for r in rows), -1))
    out: dict[int, ChunkLines] = {}
    start = 0
    for (cid, _, _), r in zip(found, rows, strict=True):
        out[cid] = ChunkLines(r, vectors[start : start + len(r)])
        start += len(r)
    return out
