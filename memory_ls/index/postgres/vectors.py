"""Vector candidates from pgvector: HNSW (cosine) per dimension count, one index for every
namespace and model of that size, the scan filtered to this namespace and model.

pgvector 0.8's iterative scan keeps walking the graph until the filter has let through k rows;
before 0.8 a larger ``ef_search`` stands in. Both are set with ``set_config(..., true)``: local to
one transaction, never left behind on a pooled connection.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
from psycopg import errors

from . import keyword
from .database import Session, Vector
from .migrations import MIGRATION_LOCK

log = logging.getLogger(__name__)
# On 59k real all-MiniLM-L6-v2 vectors (bench/hnsw_recall.py --sets real) recall@10 is 0.958
# at 100, 0.982 at 200 (p50 2.3 -> 3.0 ms) and 0.992 at 400 (5.2 ms).
EF_SEARCH_MIN = 200
ANALYZE_AFTER = 100


def index_name(dims: int) -> str:
    return f"memory_vectors_hnsw_{int(dims)}"


def defer_index(store: Session, dims: int) -> None:
    """Note that vectors of ``dims`` are being stored. Without an index for them yet, it is
    built once the backfill is done (``build_deferred``): one bulk build is many times faster
    than inserting each vector into a growing graph, and until then an exact scan answers."""
    db = store.db
    if dims in db.hnsw_dims:
        return
    row = store.q("SELECT to_regclass(%s)", (index_name(dims),)).fetchone()
    if row is not None and row[0] is not None:
        db.hnsw_dims.add(dims)
    else:
        db.deferred_dims.add(dims)


def build_deferred(store: Session) -> None:
    """Build the HNSW indexes that ``defer_index`` put off (by whoever gets there first)."""
    db = store.db
    for dims in sorted(db.deferred_dims):
        vt = db.caps.vtype
        try:
            with store.conn.transaction():
                store.q("SELECT pg_advisory_xact_lock(%s, %s)", (MIGRATION_LOCK, int(dims)))
                store.q(
                    f"CREATE INDEX IF NOT EXISTS {index_name(dims)} ON memory_vectors USING hnsw "
                    f"((embedding::{vt}({int(dims)})) {vt}_cosine_ops) WHERE dims = {int(dims)}"
                )
        except errors.InsufficientPrivilege:
            log.warning(
                "no HNSW index for %d-dimensional vectors and this role may not create it: "
                "vector search scans every row until the owner runs memory-ls once",
                dims,
            )
        db.deferred_dims.discard(dims)
        db.hnsw_dims.add(dims)


def refresh_statistics(store: Session) -> None:
    """ANALYZE memory_vectors after a vector phase that stored at least ANALYZE_AFTER rows and
    a tenth of the table or half of the namespace. With the statistics of a nearly empty table,
    or without the namespace in them, the planner answers ``knn`` by reading the namespace's
    rows through the (ns, model) index and sorting them: an exact search, 64 ms at 100k chunks,
    instead of a few ms in the HNSW graph, until autovacuum gets to the table. A role that may
    not analyze gets a server warning; a table busy with another client's index build or
    ANALYZE is skipped (SKIP_LOCKED) and left to autovacuum."""
    db = store.db
    if db.stored_vectors < ANALYZE_AFTER:
        return
    row = store.q(
        "SELECT reltuples FROM pg_class WHERE oid = to_regclass('memory_vectors')"
    ).fetchone()
    estimate = float(row[0]) if row and row[0] is not None else -1.0
    grown = estimate <= 0 or db.stored_vectors >= 0.1 * estimate
    if grown or db.stored_vectors >= 0.5 * keyword.totals(store)[0]:
        try:
            store.q("ANALYZE (SKIP_LOCKED) memory_vectors")
        except (errors.QueryCanceled, errors.LockNotAvailable) as exc:
            log.warning("ANALYZE memory_vectors skipped: %s", exc)
        db.stored_vectors = 0


def knn(store: Session, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """(chunk id, cosine distance), nearest first."""
    if not store.db.model_key or k <= 0:
        return []
    dims, vt = int(len(query)), store.db.caps.vtype
    with store.conn.transaction():
        # One statement: with many clients on few cores every round trip queues.
        iterative = ", set_config('hnsw.iterative_scan', 'relaxed_order', true)"
        store.q(
            "SELECT set_config('hnsw.ef_search', %s, true)"
            + (iterative if store.db.caps.iterative_scan else ""),
            (str(max(EF_SEARCH_MIN, 2 * k)),),
        )
        # Never prepared: PostgreSQL's generic plan of it (chosen after psycopg prepared it)
        # ran 3.5x slower than a plan made for the parameters (bench/pg.py --pooler).
        rows = store.q(
            f"SELECT chunk_id, embedding::{vt}({dims}) <=> %s::{vt}({dims}) AS d "
            f"FROM memory_vectors WHERE dims = {dims} AND ns = %s AND model = %s "
            "ORDER BY d LIMIT %s",
            (Vector(query), store.ns, store.db.model_key, k),
            prepare=False,
        ).fetchall()
    return sorted(((int(i), float(d)) for i, d in rows), key=lambda r: (r[1], r[0]))


def embeddings_for(store: Session, ids: Sequence[int]) -> dict[int, np.ndarray]:
    if not ids:
        return {}
    rows = store.q(
        "SELECT chunk_id, embedding::vector FROM memory_vectors "
        "WHERE ns = %s AND model = %s AND chunk_id = ANY(%s)",
        (store.ns, store.db.model_key, list(ids)),
        binary=True,
    )
    return {int(i): v for i, v in rows}


def all_embeddings(store: Session) -> tuple[np.ndarray, np.ndarray]:
    rows = store.q(
        "SELECT chunk_id, embedding::vector FROM memory_vectors WHERE ns = %s AND model = %s "
        "ORDER BY chunk_id",
        (store.ns, store.db.model_key),
        binary=True,
    ).fetchall()
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 1), dtype=np.float32)
    return np.array([r[0] for r in rows], dtype=np.int64), np.stack([r[1] for r in rows])


def sample(store: Session, limit: int) -> np.ndarray:
    """About ``limit`` of this model's vectors in the namespace, a random share of them, kept
    for a few seconds: the calibration background must not cost a scan per query."""
    db = store.db
    held = db.sample
    if held is not None and held[0] == db.model_key and db.fresh(held[2]):
        return held[1]
    # Sized by the namespace, not the table: other teams' rows in the same table would make a
    # small namespace's sample nearly empty (and its scores unlike the SQLite index's). Block
    # sampling reads a share of the whole table, so it is used only when the namespace is most
    # of it; otherwise the namespace's rows are read through its index, a random share kept.
    chunks = keyword.totals(store)[0]
    share = 2.0 * limit / chunks if chunks else 1.0
    row = store.q(
        "SELECT reltuples FROM pg_class WHERE oid = to_regclass('memory_vectors')"
    ).fetchone()
    table = float(row[0]) if row and row[0] and row[0] > 0 else 0.0
    if share < 1.0 and chunks >= 0.5 * table:
        sampled, keep = f"TABLESAMPLE SYSTEM ({100.0 * share:.4f})", ""
    else:
        sampled, keep = "", f"AND random() < {min(1.0, share):.6f}"
    vecs = [
        r[0]
        for r in store.q(
            f"SELECT embedding::vector FROM memory_vectors {sampled} "
            f"WHERE ns = %s AND model = %s {keep} LIMIT %s",
            (store.ns, db.model_key, limit),
            binary=True,
        )
    ]
    dims = {len(v) for v in vecs}
    out = np.stack(vecs) if len(dims) == 1 else np.zeros((0, 1), dtype=np.float32)
    db.sample = (db.model_key, out, time.monotonic())
    return out
