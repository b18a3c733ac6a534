"""The embedding cache in the server, per namespace: a text any client of the team embedded
once is never embedded again by another (same key as the SQLite cache: provider, model,
provider key, text hash)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import psycopg

from ..cache import CacheKey

TOUCH_SECONDS = 3600.0


class PgEmbeddingCache:
    def __init__(self, conn: psycopg.Connection[Any], namespace: str):
        self.conn = conn
        self.ns = namespace

    def get(self, key: CacheKey, hashes: Sequence[str]) -> dict[str, bytes]:
        if not hashes:
            return {}
        now = time.time()
        # Touching used_at never waits for a row another client holds (SKIP LOCKED), and
        # happens once an hour per entry at most: readers of a shared cache must not queue.
        where = "ns = %s AND provider = %s AND model = %s AND provider_key = %s AND hash = ANY(%s)"
        args = (self.ns, *key, list(hashes))
        rows = self.conn.execute(
            f"WITH touched AS (UPDATE memory_embedding_cache SET used_at = %s WHERE ctid IN ("
            f"SELECT ctid FROM memory_embedding_cache WHERE {where} AND used_at < %s "
            f"FOR UPDATE SKIP LOCKED)) "
            f"SELECT hash, embedding FROM memory_embedding_cache WHERE {where}",
            (now, *args, now - TOUCH_SECONDS, *args),
        ).fetchall()
        return {h: bytes(b) for h, b in rows}

    def put(self, key: CacheKey, items: Sequence[tuple[str, bytes]]) -> None:
        now = time.time()
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_embedding_cache (ns, provider, model, provider_key, hash, "
                "embedding, used_at) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (ns, provider, model, provider_key, hash) DO UPDATE "
                "SET embedding = excluded.embedding, used_at = excluded.used_at",
                [(self.ns, *key, h, b, now) for h, b in items],
            )

    def evict(self, max_entries: int) -> int:
        n = self.count()
        if n <= max_entries:
            return 0
        self.conn.execute(
            "DELETE FROM memory_embedding_cache WHERE ctid IN (SELECT ctid FROM "
            "memory_embedding_cache WHERE ns = %s ORDER BY used_at LIMIT %s)",
            (self.ns, n - max_entries),
        )
        return n - max_entries

    def count(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM memory_embedding_cache WHERE ns = %s", (self.ns,)
        ).fetchone()
        return int(row[0]) if row else 0
