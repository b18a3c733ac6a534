"""The embedding cache: (provider, model, provider key, text hash) -> vector, LRU-evicted.

It outlives full rebuilds (a rebuild seeds its new database with the old one's vectors), so
nothing is embedded twice for the same model. Each vector is stored once: a vector that a chunk
holds lives in ``chunk_vectors`` and is found there by the chunk's text hash; the
``embedding_cache`` table keeps only the others (of chunks since deleted or edited, of texts
embedded before their chunk was written, of other models). Vectors are stored as float16 and
handed out as float32 bytes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .schema import f16_blob, f32_blob

CacheKey = tuple[str, str, str]  # (provider, model, provider key)
_PART = 500


class EmbeddingCache:
    def __init__(self, conn: Any):
        self.conn = conn

    def index_key(self) -> CacheKey:
        """The key of the vectors the chunks hold (the index's provider, model and key)."""
        meta = dict(
            self.conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('provider', 'model', 'providerKey')"
            ).fetchall()
        )
        return meta.get("provider", ""), meta.get("model", ""), meta.get("providerKey", "")

    def get(self, key: CacheKey, hashes: Sequence[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        held = key == self.index_key()
        for i in range(0, len(hashes), _PART):
            part = list(hashes[i : i + _PART])
            marks = ",".join("?" * len(part))
            rows = self.conn.execute(
                "SELECT hash, embedding FROM embedding_cache WHERE provider = ? AND model = ? "
                f"AND provider_key = ? AND hash IN ({marks})",
                (*key, *part),
            ).fetchall()
            out.update((h, f32_blob(b)) for h, b in rows)
            if held:
                rows = self.conn.execute(
                    "SELECT c.hash, v.embedding FROM chunks c JOIN chunk_vectors v ON v.id = c.id "
                    f"WHERE c.hash IN ({marks})",
                    part,
                ).fetchall()
                out.update((h, f32_blob(b)) for h, b in rows)
        if out:
            now = time.time()
            self.conn.executemany(
                "UPDATE embedding_cache SET used_at = ? WHERE provider = ? AND model = ? "
                "AND provider_key = ? AND hash = ?",
                [(now, *key, h) for h in out],
            )
        return out

    def put(self, key: CacheKey, items: Sequence[tuple[str, bytes]]) -> None:
        """Keep these vectors, except the ones chunks already hold (stored once)."""
        if key == self.index_key():
            held = self._held([h for h, _ in items])
            items = [(h, b) for h, b in items if h not in held]
        now = time.time()
        self.conn.executemany(
            "INSERT OR REPLACE INTO embedding_cache(provider, model, provider_key, hash, "
            "embedding, used_at) VALUES (?, ?, ?, ?, ?, ?)",
            [(*key, h, f16_blob(b), now) for h, b in items],
        )

    def _held(self, hashes: Sequence[str]) -> set[str]:
        """Of these text hashes, those whose vector a chunk holds."""
        out: set[str] = set()
        for i in range(0, len(hashes), _PART):
            part = list(hashes[i : i + _PART])
            marks = ",".join("?" * len(part))
            sql = f"SELECT hash FROM chunks WHERE vec = 1 AND hash IN ({marks})"
            out.update(h for (h,) in self.conn.execute(sql, part))
        return out

    def claimed(self, hashes: Sequence[str]) -> None:
        """Chunks now hold the vectors of these texts: drop the cache's own copies."""
        key = self.index_key()
        self.conn.executemany(
            "DELETE FROM embedding_cache WHERE provider = ? AND model = ? AND provider_key = ? "
            "AND hash = ?",
            [(*key, h) for h in set(hashes)],
        )

    def claimed_ids(self, ids: Sequence[int]) -> None:
        """As ``claimed``, by chunk id."""
        hashes: list[str] = []
        for i in range(0, len(ids), _PART):
            part = list(ids[i : i + _PART])
            marks = ",".join("?" * len(part))
            sql = f"SELECT hash FROM chunks WHERE id IN ({marks})"
            hashes += [h for (h,) in self.conn.execute(sql, part)]
        self.claimed(hashes)

    def retire(self, ids: Sequence[int]) -> None:
        """These chunks are about to be deleted: keep their vectors (unless another chunk holds
        the same text) so that an edit undone or a file moved is not embedded again."""
        self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS retiring (id INTEGER PRIMARY KEY)")
        self.conn.executemany("INSERT OR IGNORE INTO retiring(id) VALUES (?)", [(i,) for i in ids])
        self.conn.execute(
            "INSERT OR IGNORE INTO embedding_cache(provider, model, provider_key, hash, "
            "embedding, used_at) SELECT ?, ?, ?, c.hash, v.embedding, ? FROM chunks c "
            "JOIN chunk_vectors v ON v.id = c.id WHERE c.id IN (SELECT id FROM retiring) "
            "AND NOT EXISTS (SELECT 1 FROM chunks o WHERE o.hash = c.hash AND o.vec = 1 "
            "AND o.id NOT IN (SELECT id FROM retiring))",
            (*self.index_key(), time.time()),
        )
        self.conn.execute("DELETE FROM retiring")

    def evict(self, max_entries: int) -> int:
        """Keep at most ``max_entries`` vectors that no chunk holds (least recently used go)."""
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
        """Seed this (new) database with another index's vectors, its cache's and its chunks'
        (an index of an older schema too: its float32 vectors are stored as float16)."""
        self.conn.create_function("f16", 1, f16_blob, deterministic=True)
        self.conn.execute("ATTACH DATABASE ? AS old", (str(other),))
        try:
            tables = {name for (name,) in self.conn.execute("SELECT name FROM old.sqlite_master")}
            if "embedding_cache" not in tables:
                return 0
            meta = dict(self.conn.execute("SELECT key, value FROM old.meta").fetchall())
            if "chunk_vectors" in tables:
                cached, held = "embedding", "v.embedding"
                rows = "old.chunks c JOIN old.chunk_vectors v ON v.id = c.id"
            else:  # before schema 3: float32, in the cache and in chunks.embedding
                cached, held = "f16(embedding)", "f16(c.embedding)"
                rows = "old.chunks c WHERE c.embedding IS NOT NULL"
            copied = self.conn.execute(
                "INSERT OR IGNORE INTO embedding_cache SELECT provider, model, provider_key, "
                f"hash, {cached}, used_at FROM old.embedding_cache"
            ).rowcount
            old_key = [meta.get(k, "") for k in ("provider", "model", "providerKey")]
            copied += self.conn.execute(
                "INSERT OR IGNORE INTO embedding_cache(provider, model, provider_key, hash, "
                f"embedding, used_at) SELECT ?, ?, ?, c.hash, {held}, ? FROM {rows}",
                (*old_key, time.time()),
            ).rowcount
            return copied
        finally:
            self.conn.execute("DETACH DATABASE old")

    def count(self) -> int:
        """Vectors that can be reused: the ones chunks hold and the cache's own."""
        row = self.conn.execute(
            "SELECT (SELECT count(*) FROM embedding_cache) + (SELECT count(*) FROM chunk_vectors)"
        ).fetchone()
        return int(row[0])
