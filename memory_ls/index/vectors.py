"""Chunk vectors, stored as float16 in ``chunk_vectors`` and read as float32 of unit length: a
file's, by id, an even sample, or all of them; and the log of which ones changed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .rows import ChunkState
from .schema import f16_blob, f32_blob, sqlite3, unit_f32


def store_vectors(conn: Any, items: Sequence[tuple[int, bytes]], model: str) -> None:
    """Give chunks their vectors (float32 bytes in, float16 stored)."""
    conn.executemany(
        "UPDATE chunks SET vec = 1, model = ? WHERE id = ?", [(model, i) for i, _ in items]
    )
    conn.executemany(
        "INSERT OR REPLACE INTO chunk_vectors(id, embedding) VALUES (?, ?)",
        [(cid, f16_blob(b)) for cid, b in items],
    )


def file_vectors(conn: Any, path: str) -> dict[str, bytes]:
    rows = conn.execute(
        "SELECT c.hash, v.embedding FROM chunks c JOIN chunk_vectors v ON v.id = c.id "
        "WHERE c.path = ?",
        (path,),
    ).fetchall()
    return {h: f32_blob(b) for h, b in rows}


def chunk_states(conn: Any, path: str, first_id: int) -> list[ChunkState]:
    rows = conn.execute(
        "SELECT c.id, c.hash, c.start_line, c.end_line, v.embedding FROM chunks c "
        "LEFT JOIN chunk_vectors v ON v.id = c.id WHERE c.path = ? AND c.id >= ? ORDER BY c.id",
        (path, first_id),
    ).fetchall()
    return [ChunkState(i, h, a, b, f32_blob(e) if e else None) for i, h, a, b, e in rows]


def embeddings_for(conn: Any, ids: Sequence[int]) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for i in range(0, len(ids), 500):
        part = list(ids[i : i + 500])
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            f"SELECT id, embedding FROM chunk_vectors WHERE id IN ({marks})", part
        ).fetchall()
        out.update({cid: unit_f32(np.frombuffer(b, dtype=np.float16)) for cid, b in rows})
    return out


def sample_embeddings(conn: Any, limit: int, dims_hint: int) -> np.ndarray:
    """Up to ``limit`` chunk vectors at ids spread evenly over the id range (all of a small
    index). Looked up by id: a pass over every row (``id % step``) and a ``count(*)`` cost
    450 ms a query at a million chunks, as each reads the whole table."""
    lo = conn.execute("SELECT min(id) FROM chunk_vectors").fetchone()[0]
    hi = conn.execute("SELECT max(id) FROM chunk_vectors").fetchone()[0]
    if lo is None:
        return np.zeros((0, dims_hint or 1), dtype=np.float32)
    step = max(1, -(-(hi - lo + 1) // limit))
    ids = list(range(lo, hi + 1, step))[:limit]
    rows: list[tuple[bytes]] = []
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        marks = ",".join("?" * len(part))
        sql = f"SELECT embedding FROM chunk_vectors WHERE id IN ({marks})"
        rows += conn.execute(sql, part).fetchall()
    if len({len(b) for (b,) in rows}) != 1:  # none, or vectors of two models mid-rebuild
        return np.zeros((0, dims_hint or 1), dtype=np.float32)
    return _unit_rows([b for (b,) in rows])


def _unit_rows(blobs: Sequence[bytes]) -> np.ndarray:
    """Stored float16 vectors of one size as unit float32 rows."""
    raw = np.frombuffer(b"".join(blobs), dtype=np.float16)
    return unit_f32(raw.reshape(len(blobs), -1))


def blocks(
    conn: Any, size: int = 4096, stored: bool = False
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every chunk vector in id order as (ids, unit float32 rows), ``size`` rows at a time;
    ``stored``: the float16 rows as stored, not made unit length again."""
    cur = conn.execute("SELECT id, embedding FROM chunk_vectors ORDER BY id")
    while rows := cur.fetchmany(size):
        dims = len(rows[0][1]) // 2
        rows = [r for r in rows if len(r[1]) == dims * 2]  # vectors of another size: skipped
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        if stored:
            raw = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float16)
            yield ids, raw.reshape(len(rows), dims)
        else:
            yield ids, _unit_rows([r[1] for r in rows])


ROOM = 1 << 16  # rows of room at most after a load's vectors (50 MB of float16 at 384-d)


def all_embeddings(
    conn: Any, dims_hint: int, float16_from: int = 0, room: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Every chunk vector as (ids, matrix), filled in place block by block: the vectors are
    held once, not three times (row list, joined bytes, matrix) as a naive load would.
    ``room``: zero rows after the vectors (the matrix then has more rows than ids), so that
    the next chunks are appended without a copy of every vector."""
    # One snapshot for the count and the scan: a vector another process gives an old chunk
    # in between made the scan longer than the count, and its last rows were left out though
    # they had not changed, so the log (which brings only what changed) never brought them.
    with snapshot(conn):
        return _all_embeddings(conn, dims_hint, float16_from, room)


@contextlib.contextmanager
def snapshot(conn: Any) -> Iterator[None]:
    """One read transaction (WAL: one view of the file) for several statements."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def _all_embeddings(
    conn: Any, dims_hint: int, float16_from: int, room: bool
) -> tuple[np.ndarray, np.ndarray]:
    n, dims = conn.execute(
        "SELECT count(*), max(length(embedding)) / 2 FROM chunk_vectors"
    ).fetchone()
    spare = min(max(1024, n // 8), ROOM) if room else 0
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros((0, dims_hint or 1), dtype=np.float32)
    ids = np.empty(n, dtype=np.int64)
    # Half the memory: the caller scans it by sign codes and makes the rows it scores unit
    # length (``unit_f32``), so they are kept as stored (making all of them unit length, then
    # float16 again, took most of a million vectors' read).
    large = 0 < float16_from <= n
    # Zeros: the room's pages are not touched until a vector goes there.
    mat = np.zeros((n + spare, int(dims)), dtype=np.float16 if large else np.float32)
    i = 0
    for block_ids, block in blocks(conn, stored=large):
        take = min(len(block_ids), n - i)
        if block.shape[1] != dims or take <= 0:
            continue
        ids[i : i + take] = block_ids[:take]
        mat[i : i + take] = block[:take]
        i += take
    return ids[:i], mat if spare else mat[:i]


# Where a reader stands in an index's vector log: (the log's name, the last change it has).
Mark = tuple[str, int]
# Changes a reader fetches: (its new mark, ids whose vectors are gone, ids with their vectors).
Changes = tuple[Mark, list[int], list[tuple[int, np.ndarray]]]
KEPT_CHANGES = 100_000  # entries of the log kept; a reader further behind loads everything


class VectorLog:
    """``vector_changes``, which triggers fill on every write to ``chunk_vectors``: what
    another process's copy of the vectors must apply to follow this file."""

    def __init__(self, conn: Any):
        self.conn = conn

    def mark(self) -> Mark | None:
        """Where the log stands now (None: this file has no log, an older version made it)."""
        try:
            name, seq = self.conn.execute(
                "SELECT (SELECT value FROM meta WHERE key = 'vectorLog'), "
                "(SELECT seq FROM sqlite_sequence WHERE name = 'vector_changes')"
            ).fetchone()
        except sqlite3.OperationalError:  # no sqlite_sequence yet, or no log at all
            return None
        return None if name is None else (str(name), int(seq or 0))

    def since(self, mark: Mark | None, limit: int) -> Changes | None:
        """The vectors changed after ``mark``, each as it is now; None when they cannot be
        told (another log, entries pruned, more than ``limit`` of them): load them all.
        One snapshot: a rebuilt index copied in between would have its log read with this
        one's numbers, and its vectors applied over this one's."""
        with snapshot(self.conn):
            return self._since(mark, limit)

    def _since(self, mark: Mark | None, limit: int) -> Changes | None:
        now = self.mark()
        if mark is None or now is None or now[0] != mark[0] or now[1] < mark[1]:
            return None
        if now[1] == mark[1]:
            return now, [], []
        first, count = self.conn.execute(
            "SELECT min(seq), count(*) FROM vector_changes WHERE seq > ? AND seq <= ?",
            (mark[1], now[1]),
        ).fetchone()
        if first != mark[1] + 1 or count > limit:
            return None
        rows = self.conn.execute(
            "SELECT c.id, v.embedding FROM (SELECT DISTINCT id FROM vector_changes "
            "WHERE seq > ? AND seq <= ?) c LEFT JOIN chunk_vectors v ON v.id = c.id",
            (mark[1], now[1]),
        ).fetchall()
        gone = [cid for cid, blob in rows if blob is None]
        live = [(cid, blob) for cid, blob in rows if blob is not None]
        dims = {len(b) for _, b in live}
        if len(dims) > 1:  # vectors of two models mid-rebuild
            return None
        vecs = _unit_rows([b for _, b in live]) if live else np.zeros((0, 1), np.float32)
        return now, gone, [(cid, vecs[k]) for k, (cid, _) in enumerate(live)]

    def before_commit(self) -> Mark | None:
        """The writer, in its transaction: the log pruned, and its place at this commit (each
        vector written or deleted adds a row; the last ``KEPT_CHANGES`` are kept)."""
        self.prune()
        return self.mark()

    def prune(self) -> None:
        """Drop all but the last ``KEPT_CHANGES`` entries (the writer, before each commit)."""
        # An older version's rebuild leaves a file without the log: nothing to prune.
        with contextlib.suppress(sqlite3.OperationalError):
            self.conn.execute(
                "DELETE FROM vector_changes WHERE seq <= (SELECT max(seq) FROM vector_changes) - ?",
                (KEPT_CHANGES,),
            )
