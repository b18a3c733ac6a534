"""Line vectors on the team index: ``index/line_vectors.py``'s rows, one per chunk and model
(``memory_chunk_lines``), shared by every client of the namespace like the chunk vectors.

A chunk with nothing to embed line by line gets a row with no lines, so "done" is a row and
needs no flag on the shared chunk. Clients claim chunks before embedding their lines (the
queue in ``pending.py``), so a fleet pays for each chunk's lines once.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..line_vectors import ChunkLines, pack, unpack
from . import keyword, pending
from .database import Session

# The chunk a row is written for, unless another client is deleting it right now: that
# client's lock is skipped instead of waited for (the foreign key check would wait, then fail
# when the delete commits, or deadlock with a delete of several chunks), and the key share
# lock taken here keeps the chunk until this transaction ends.
LIVE_CHUNK = "SELECT id, ns FROM memory_chunks WHERE id = %s AND ns = %s FOR KEY SHARE SKIP LOCKED"


class PgLineVectors:
    # Many clients share these, each with its own query.lines.maxChunks: one client's limit
    # never drops them (the others would pay for them again); past it, that client neither
    # embeds nor uses them.
    shared = True

    def __init__(self, store: Session):
        self.s = store
        self._after = 0  # where the next claim resumes (see pending.claim)

    def pending(self, limit: int) -> list[tuple[int, str, str]]:
        rows = pending.claim(self.s, limit, self._after, "lines")
        if not rows and self._after:
            rows = pending.claim(self.s, limit, 0, "lines")
        self._after = rows[-1][0] if rows else 0
        return rows

    def count_pending(self) -> int:
        return pending.count(self.s, "lines")

    def put(self, rows: Sequence[tuple[int, str]], lines: dict[int, ChunkLines]) -> None:
        """Store these chunks' lines (a row of none for those without), unless the chunk is
        gone meanwhile (ids are never reused here, so a live id still has its text)."""
        if not rows:
            return
        empty, m, ns = (b"", b""), self.s.db.model_key, self.s.ns
        with self.s.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_chunk_lines (chunk_id, ns, model, rows, vectors) "
                f"SELECT c.id, c.ns, %s, %s, %s FROM ({LIVE_CHUNK}) c "
                "ON CONFLICT (chunk_id, model) DO NOTHING",
                [(m, *(pack(lines[cid]) if cid in lines else empty), cid, ns) for cid, _ in rows],
            )
        pending.release(self.s, [cid for cid, _ in rows], "lines")

    def get(self, ids: Sequence[int]) -> dict[int, ChunkLines]:
        found = self.s.q(
            "SELECT chunk_id, rows, vectors FROM memory_chunk_lines "
            "WHERE ns = %s AND model = %s AND chunk_id = ANY(%s) AND rows <> ''::bytea",
            (self.s.ns, self.s.db.model_key, list(ids)),
            binary=True,
        ).fetchall()
        return unpack(found)

    def carry(self, old: Sequence[int], new: Sequence[int]) -> None:
        """Chunks ``new`` that replace ``old`` (an edit re-chunks its file) get the line
        vectors of an old chunk of the same text, of every model, instead of being embedded
        again. Runs before ``old`` is deleted."""
        if old and new:
            self.s.q(
                "INSERT INTO memory_chunk_lines (chunk_id, ns, model, rows, vectors) "
                "SELECT DISTINCT ON (n.id, l.model) n.id, n.ns, l.model, l.rows, l.vectors "
                "FROM memory_chunks n JOIN memory_chunks o ON o.hash = n.hash "
                "AND o.ns = n.ns AND o.id = ANY(%(old)s) "
                "JOIN memory_chunk_lines l ON l.chunk_id = o.id "
                "WHERE n.ns = %(ns)s AND n.id = ANY(%(new)s) ON CONFLICT DO NOTHING",
                {"ns": self.s.ns, "old": list(old), "new": list(new)},
            )

    def drop_all(self) -> int:
        cur = self.s.q(
            "DELETE FROM memory_chunk_lines WHERE ns = %s AND model = %s",
            (self.s.ns, self.s.db.model_key),
        )
        return int(cur.rowcount)

    def over(self, max_chunks: int) -> bool:
        """More than ``max_chunks`` chunks in the namespace (a count a few seconds old: every
        search asks)."""
        return keyword.totals(self.s)[0] > max_chunks

    def any(self) -> bool:
        row = self.s.q(
            "SELECT 1 FROM memory_chunk_lines WHERE ns = %s AND model = %s LIMIT 1",
            (self.s.ns, self.s.db.model_key),
        ).fetchone()
        return row is not None
