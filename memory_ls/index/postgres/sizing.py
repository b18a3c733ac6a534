"""Whether the server's buffer cache can hold what a search reads.

A search walks the HNSW graph (4,180 buffers touched a search at 113,757 chunks) and the
keyword GIN index. When ``shared_buffers`` is smaller than those indexes, each search copies
pages in from the operating system's cache and evicts others: there, with initdb's default of
128 MB (smaller than the HNSW index alone), one client's hybrid p95 was 44-46 ms against 30-39
with 1 GB (docs/guides/team.md, "Sizing the server", bench/pg_buffers.py). memory-ls cannot
change a server setting; status says when it is short, so whoever runs the server can.
"""

from __future__ import annotations

from dataclasses import dataclass

from .database import Session

MB = 1 << 20


@dataclass(frozen=True)
class SearchMemory:
    shared_buffers: int  # bytes
    indexes: dict[str, int]  # index name -> bytes, the HNSW and GIN indexes a search reads

    def hint(self) -> str | None:
        """What to change, when the indexes a search reads do not fit the buffer cache."""
        need = sum(self.indexes.values())
        if need <= self.shared_buffers:
            return None
        return (
            f"the search indexes ({need / MB:.0f} MB) do not fit the server's shared_buffers "
            f"({self.shared_buffers / MB:.0f} MB): searches re-read their pages; raise "
            "shared_buffers (a restart) to hold them, e.g. a quarter of the server's memory"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "sharedBuffersMB": round(self.shared_buffers / MB, 1),
            "searchIndexesMB": {k: round(v / MB, 1) for k, v in sorted(self.indexes.items())},
            "hint": self.hint(),
        }


def search_memory(store: Session) -> SearchMemory:
    """The buffer cache and the sizes of every HNSW and GIN index on memory-ls's two searched
    tables (shared by all namespaces: they compete for one cache). Any role may read these."""
    shared = store.q("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()
    rows = store.q(
        # coalesce: an index dropped meanwhile has no size
        "SELECT c.relname, coalesce(pg_relation_size(c.oid), 0) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
        "WHERE i.indrelid IN (to_regclass('memory_vectors'), to_regclass('memory_chunks')) "
        "AND a.amname IN ('hnsw', 'gin')"
    ).fetchall()
    return SearchMemory(int(shared[0]) if shared else 0, {str(n): int(b) for n, b in rows})
