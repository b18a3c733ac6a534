"""The embedding cache: (provider, model, provider key, text hash) -> vector, LRU-evicted.

It outlives full rebuilds (a rebuild seeds its new database with the old cache), so nothing is
embedded twice for the same model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CacheKey = tuple[str, str, str]  # (provider, model, provider key)


class EmbeddingCache:
    def __init__(self, conn: Any):
        self.conn = conn

    def get(self, key: CacheKey, hashes: Sequence[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for i in range(0, len(hashes), 500):
            part = list(hashes[i : i + 500])
            marks = ",".join("?" * len(part))
            rows = self.conn.execute(
                "SELECT hash, embedding FROM embedding_cache WHERE provider = ? AND model = ? "
                f"AND provider_key = ? AND hash IN ({marks})",
                (*key, *part),
            ).fetchall()
            out.update(rows)
        if out:
            now = time.time()
            self.conn.executemany(
                "UPDATE embedding_cache SET used_at = ? WHERE provider = ? AND model = ? "
                "AND provider_key = ? AND hash = ?",
                [(now, *key, h) for h in out],
            )
        return out

    def put(self, key: CacheKey, items: Sequence[tuple[str, bytes]]) -> None:
        now = time.time()
        self.conn.executemany(
            "INSERT OR REPLACE INTO embedding_cache(provider, model, provider_key, hash, "
            "embedding, used_at) VALUES (?, ?, ?, ?, ?, ?)",
            [(*key, h, b, now) for h, b in items],
        )

    def evict(self, max_entries: int) -> int:
        n = self.conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0]
        if n <= max_entries:
            return 0
        self.conn.execute(
            "DELETE FROM embedding_cache WHERE rowid IN (SELECT rowid FROM embedding_cache "
            "ORDER BY used_at LIMIT ?)",
            (n - max_entries,),
        )
        return n - max_entries

    def copy_from(self, other: Path) -> int:
        """Seed this (new) database with another index's embedding cache."""
        self.conn.execute("ATTACH DATABASE ? AS old", (str(other),))
        try:
            if not self.conn.execute(
                "SELECT 1 FROM old.sqlite_master WHERE name = 'embedding_cache'"
            ).fetchone():
                return 0
            cur = self.conn.execute(
                "INSERT OR IGNORE INTO embedding_cache SELECT * FROM old.embedding_cache"
            )
            return cur.rowcount
        finally:
            self.conn.execute("DETACH DATABASE old")

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0])
