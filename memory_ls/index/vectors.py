"""Reading chunk vectors out of the chunks table: by id, an even sample, or all of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def embeddings_for(conn: Any, ids: Sequence[int]) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for i in range(0, len(ids), 500):
        part = list(ids[i : i + 500])
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            f"SELECT id, embedding FROM chunks WHERE id IN ({marks}) AND embedding IS NOT NULL",
            part,
        ).fetchall()
        out.update({cid: np.frombuffer(b, dtype=np.float32) for cid, b in rows})
    return out


def sample_embeddings(conn: Any, limit: int, dims_hint: int) -> np.ndarray:
    """Up to ``limit`` chunk vectors spread evenly over the index (all of a small one)."""
    n = count_embedded(conn)
    step = max(1, -(-n // limit)) if n else 1
    rows = conn.execute(
        "SELECT embedding FROM chunks WHERE embedding IS NOT NULL AND id % ? = 0 LIMIT ?",
        (step, limit),
    ).fetchall()
    vecs = [np.frombuffer(b, dtype=np.float32) for (b,) in rows]
    if len({len(v) for v in vecs}) != 1:  # none, or vectors of two models mid-rebuild
        return np.zeros((0, dims_hint or 1), dtype=np.float32)
    return np.stack(vecs)


def count_embedded(conn: Any) -> int:
    """Chunks that have a vector."""
    row = conn.execute("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL")
    return int(row.fetchone()[0])


def all_embeddings(conn: Any, dims_hint: int) -> tuple[np.ndarray, np.ndarray]:
    """Every chunk vector as (ids, matrix), filled in place: the vectors are held once,
    not three times (row list, joined bytes, matrix) as a naive load would."""
    n, dims = conn.execute(
        "SELECT count(*), max(length(embedding)) / 4 FROM chunks WHERE embedding IS NOT NULL"
    ).fetchone()
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros((0, dims_hint or 1), dtype=np.float32)
    ids = np.empty(n, dtype=np.int64)
    mat = np.empty((n, int(dims)), dtype=np.float32)
    cur = conn.execute("SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL ORDER BY id")
    i = 0
    while rows := cur.fetchmany(4096):
        for cid, blob in rows:
            if i == n or len(blob) != dims * 4:
                continue  # a row added meanwhile, or a vector of another size
            ids[i] = cid
            mat[i] = np.frombuffer(blob, dtype=np.float32)
            i += 1
    return ids[:i], mat[:i]
