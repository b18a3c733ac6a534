"""PgStore: the IndexBackend on PostgreSQL + pgvector, every statement scoped to one namespace.

Many writers on many machines share a namespace. A write to a file takes a transaction-scoped
advisory lock on (namespace, path) first, so two writers of one file take turns (no duplicate
chunks, no interleaving); writing the chunks a file already has is a no-op (idempotent by
content hash, and the rows, ids and vectors stay as they are).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import psycopg.sql

from ...chunking import Chunk
from .. import chunk_reads
from ..backend import ChunkChanges
from ..chunk_reads import Scope
from ..rows import ChunkRow, ChunkState, FileInfo, FileState, from_blob, to_blob
from . import files, keyword, pending, vectors
from .cache import PgEmbeddingCache
from .database import PgDatabase, Vector
from .files import TeamFile
from .lines import LIVE_CHUNK, PgLineVectors
from .tokens import index_text


class PgStore:
    vec_reason: str | None = None

    def __init__(self, conn: psycopg.Connection[Any], db: PgDatabase):
        self.conn = conn
        self.db = db
        self.ns = db.namespace
        self.cache = PgEmbeddingCache(conn, db.namespace)
        self.lines = PgLineVectors(self)
        self.inserted_chunks = 0  # a writer store lives for one push: that push's chunks
        self._after_commit: list[Callable[[], None]] = []
        self._locked: set[str] = set()
        self._in_tx = False
        self._pending_after = 0  # where the next pending_chunks call resumes
        self.lock_wait_ms: int | None = None  # how long a transaction waits for a lock

    def q(
        self,
        sql: str | psycopg.sql.Composed,
        params: Any = None,
        *,
        binary: bool = False,
        prepare: bool | None = None,
    ) -> psycopg.Cursor[Any]:
        """Run one statement; ``binary`` for rows carrying vectors (no text round trip),
        ``prepare=False`` for one whose plan must see its parameters (psycopg prepares a
        statement after five runs, and PostgreSQL may then run a generic plan)."""
        return self.conn.execute(sql, params, binary=binary, prepare=prepare)

    # -- lifecycle and transactions -----------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        self._after_commit, self._locked = [], set()
        self._in_tx = True
        try:
            with self.conn.transaction():
                if self.lock_wait_ms is not None:  # SET LOCAL: a pooler's next client keeps 0
                    self.q(
                        "SELECT set_config('lock_timeout', %s, true)", (f"{self.lock_wait_ms}ms",)
                    )
                yield
        except BaseException:
            self._after_commit = []
            raise
        finally:
            self._in_tx = False
        callbacks, self._after_commit = self._after_commit, []
        for fn in callbacks:
            fn()

    def after_commit(self, fn: Callable[[], None]) -> None:
        if self._in_tx:
            self._after_commit.append(fn)
        else:
            fn()

    def replace_with(self, other: Any) -> None:
        raise NotImplementedError("a PostgreSQL namespace is rebuilt in place (see Primary)")

    def data_version(self) -> int:
        return 0  # vectors are searched in the server (HNSW), never copied into this process

    def close(self) -> None:
        """The connection belongs to the database's pool or writer slot."""

    def lock_path(self, path: str) -> None:
        """Serialise writers of one file across every client (held until commit)."""
        if path not in self._locked:
            self.q("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", (self.ns, path))
            self._locked.add(path)

    def lock_namespace(self) -> None:
        """Serialise full rebuilds of the namespace (held until commit)."""
        self.q("SELECT pg_advisory_xact_lock(hashtext(%s), 0)", (self.ns,))

    # -- meta and files -------------------------------------------------------------------------
    def get_meta(self) -> dict[str, str]:
        return dict(self.q("SELECT key, value FROM memory_meta WHERE ns = %s", (self.ns,)))

    def set_meta(self, values: Mapping[str, object]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_meta (ns, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value",
                [(self.ns, k, str(v)) for k, v in values.items()],
            )

    def file_states(self, paths: Iterable[str] | None = None) -> dict[str, FileState]:
        return files.states(self, paths)

    def origin_paths(self, origin: str) -> set[str]:
        """The files a client wrote last (its deletions are its to make)."""
        rows = self.q(
            "SELECT path FROM memory_files WHERE ns = %s AND origin = %s", (self.ns, origin)
        )
        return {r[0] for r in rows}

    def file_infos(self, paths: Iterable[str]) -> dict[str, FileInfo]:
        return files.infos(self, paths)

    def file_tail(self, path: str) -> tuple[int, dict[str, Any]] | None:
        # No tail to append to while the file has no current text: read whole, it gets one.
        row = self.q(
            "SELECT lines, tail FROM memory_files f WHERE ns = %s AND path = %s AND EXISTS "
            "(SELECT 1 FROM memory_file_texts t WHERE t.ns = f.ns AND t.path = f.path "
            "AND t.hash = f.hash)",
            (self.ns, path),
        ).fetchone()
        if row is None or not row[1]:
            return None
        return row[0], json.loads(row[1])

    # The file rows' writers, as they are (they take the path's lock themselves).
    upsert_file = files.upsert
    extend_file = files.extend

    def file_text(self, path: str, known: str | None = None) -> TeamFile | None:
        return files.read(self, path, known)

    put_file_text = files.put_text

    def files_without_text(self, paths: Iterable[str]) -> set[str]:
        return files.without_text(self, paths)

    def touch_file(self, path: str, mtime: float, size: int) -> None:
        # Same content, another machine's mtime: recording it would make every other client
        # with the same file read and hash it again on its next sync. Nothing to write.
        return None

    def delete_file(self, path: str) -> list[int]:
        self.lock_path(path)
        ids = [
            r[0]
            for r in self.q(
                "DELETE FROM memory_chunks WHERE ns = %s AND path = %s RETURNING id",
                (self.ns, path),
            )
        ]
        self.q("DELETE FROM memory_files WHERE ns = %s AND path = %s", (self.ns, path))
        return ids

    # -- chunks and vectors ---------------------------------------------------------------------
    def chunk_embeddings(self, path: str) -> dict[str, bytes]:
        rows = self.q(
            "SELECT c.hash, v.embedding::vector FROM memory_chunks c JOIN memory_vectors v "
            "ON v.chunk_id = c.id AND v.model = %s WHERE c.ns = %s AND c.path = %s",
            (self.db.model_key, self.ns, path),
            binary=True,
        )
        return {h: to_blob(vec) for h, vec in rows}

    def chunk_rows(self, path: str, first_id: int = 0) -> list[ChunkState]:
        rows = self.q(
            "SELECT c.id, c.hash, c.start_line, c.end_line, v.embedding::vector "
            "FROM memory_chunks c LEFT JOIN memory_vectors v ON v.chunk_id = c.id "
            "AND v.model = %s WHERE c.ns = %s AND c.path = %s AND c.id >= %s ORDER BY c.id",
            (self.db.model_key, self.ns, path, first_id),
            binary=True,
        )
        return [
            ChunkState(i, h, s, e, to_blob(v) if v is not None else None) for i, h, s, e, v in rows
        ]

    def replace_chunks(
        self, path: str, source: str, chunks: Sequence[Chunk], known: dict[str, bytes], model: str
    ) -> ChunkChanges:
        self.lock_path(path)
        have = self.q(
            "SELECT id, hash, start_line, end_line, source FROM memory_chunks "
            "WHERE ns = %s AND path = %s ORDER BY id",
            (self.ns, path),
        ).fetchall()
        if [tuple(r[1:]) for r in have] == [
            (c.hash, c.start_line, c.end_line, source) for c in chunks
        ]:
            return [], []  # another client (or an earlier sync) wrote exactly these chunks
        return self._swap(path, source, [r[0] for r in have], chunks, known)

    def update_chunks(
        self,
        path: str,
        source: str,
        remove: Sequence[int],
        chunks: Sequence[Chunk],
        known: dict[str, bytes],
        model: str,
    ) -> ChunkChanges:
        self.lock_path(path)
        return self._swap(path, source, remove, chunks, known)

    def _swap(
        self,
        path: str,
        source: str,
        remove: Sequence[int],
        chunks: Sequence[Chunk],
        known: dict[str, bytes],
    ) -> ChunkChanges:
        """Insert the new chunks, give them the line vectors of removed chunks of the same
        text, then delete the removed ones (one transaction: readers see either set)."""
        added = self._insert_chunks(path, source, chunks, known)
        self.lines.carry(remove, [cid for cid, _ in added])
        if remove:
            self.q(
                "DELETE FROM memory_chunks WHERE ns = %s AND id = ANY(%s)", (self.ns, list(remove))
            )
        return list(remove), added

    def _insert_chunks(
        self, path: str, source: str, chunks: Sequence[Chunk], known: dict[str, bytes]
    ) -> list[tuple[int, bytes | None]]:
        if not chunks:
            return []
        params = []
        for c in chunks:
            body, length = index_text(c.text)
            params.append(
                (self.ns, path, source, c.start_line, c.end_line, c.hash, c.text, body, length)
            )
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_chunks (ns, path, source, start_line, end_line, hash, text, "
                f"tsv, len) VALUES (%s, %s, %s, %s, %s, %s, %s, to_tsvector('{keyword.TS_CONFIG}', "
                "%s), %s) RETURNING id",
                params,
                returning=True,
            )
            ids = []
            while True:
                ids.append(cur.fetchone()[0])  # type: ignore[index]
                if not cur.nextset():
                    break
        self.inserted_chunks += len(ids)
        added = [(cid, known.get(c.hash)) for cid, c in zip(ids, chunks, strict=True)]
        self._put_vectors([(cid, b) for cid, b in added if b is not None])
        return added

    def _put_vectors(self, items: Sequence[tuple[int, bytes]]) -> None:
        if not items or not self.db.model_key:
            return
        self.db.stored_vectors += len(items)
        vtype = self.db.caps.vtype
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_vectors (chunk_id, ns, model, dims, embedding) "
                f"SELECT c.id, c.ns, %s, %s, %s::{vtype} FROM ({LIVE_CHUNK}) c "
                "ON CONFLICT (chunk_id, model) "
                "DO UPDATE SET embedding = excluded.embedding, dims = excluded.dims",
                [
                    (self.db.model_key, len(b) // 4, Vector(from_blob(b)), cid, self.ns)
                    for cid, b in items
                ],
            )

    def pending_chunks(self, limit: int) -> list[tuple[int, str, str]]:
        """Chunks without this model's vector that no other client is embedding now; they are
        claimed for this client, so a fleet syncing the same notes pays for each text once."""
        rows = pending.claim(self, limit, self._pending_after)
        if not rows and self._pending_after:
            rows = pending.claim(self, limit, 0)  # once more from the start: released claims
        self._pending_after = rows[-1][0] if rows else 0
        return rows

    def still_pending(self, rows: Sequence[tuple[int, str]]) -> set[int]:
        return pending.still_pending(self, rows)

    def count_pending(self) -> int:
        return pending.count(self)

    def set_embeddings(self, items: Sequence[tuple[int, bytes]], model: str) -> None:
        self._put_vectors(items)
        if items:
            pending.release(self, [cid for cid, _ in items])

    def ensure_vec_table(self, dims: int) -> None:
        vectors.defer_index(self, dims)

    def build_indexes(self) -> None:
        """After a vector phase: the HNSW indexes it put off (see ``vectors.defer_index``),
        and the planner's statistics when the phase grew the table."""
        vectors.build_deferred(self)
        vectors.refresh_statistics(self)

    def merge_keyword_postings(self) -> None:
        """After a keyword push: the GIN index's pending list (see ``keyword.merge_pending``)."""
        keyword.merge_pending(self, self.inserted_chunks)

    # -- search -----------------------------------------------------------------------------------
    def doc_frequencies(self, words: Sequence[str]) -> tuple[list[int], int]:
        return keyword.doc_frequencies(self, words)

    def chunk_texts(self, paths: Iterable[str]) -> list[str]:
        """The texts of the namespace's chunks of ``paths``."""
        rows = self.q(
            "SELECT text FROM memory_chunks WHERE ns = %s AND path = ANY(%s)",
            (self.ns, list(paths)),
        )
        return [r[0] for r in rows]

    def keyword_totals(self) -> tuple[int, float]:
        """The namespace's chunks and their average length in tokens (BM25's N and avgdl)."""
        return keyword.totals(self)

    def fts_search(
        self, expr: str, limit: int, postings: int = 0, left_out: str = ""
    ) -> list[tuple[int, float]]:
        # The whole query: the server plans its own parallelism, and ``keyword.search`` picks
        # the rarer words to find chunks by and scores every word.
        return keyword.search(self, f"{expr} OR {left_out}" if left_out else expr, limit)

    def fts_within(self, expr: str, ids: Sequence[int], limit: int) -> list[tuple[int, float]]:
        return keyword.search(self, expr, limit, only=ids)

    def chunks_in(self, scope: Scope, cap: int) -> list[int] | None:
        cond, args = chunk_reads.where(scope, "%s")
        rows = self.q(
            "SELECT c.id FROM memory_files f JOIN memory_chunks c ON c.ns = f.ns AND "
            f"c.path = f.path WHERE f.ns = %s AND {cond} LIMIT %s",
            (self.ns, *args, cap + 1),
        ).fetchall()
        return None if len(rows) > cap else [int(r[0]) for r in rows]

    def vec_search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        return vectors.knn(self, query, k)

    def chunks_by_ids(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        rows = self.q(
            "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.text, f.date, f.meta "
            "FROM memory_chunks c LEFT JOIN memory_files f ON f.ns = c.ns AND f.path = c.path "
            "WHERE c.ns = %s AND c.id = ANY(%s)",
            (self.ns, list(ids)),
        )
        return {r[0]: ChunkRow(*r) for r in rows}

    def embeddings_for(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        return vectors.embeddings_for(self, ids)

    def all_embeddings(self) -> tuple[np.ndarray, np.ndarray]:
        return vectors.all_embeddings(self)

    def sample_embeddings(self, limit: int) -> np.ndarray:
        return vectors.sample(self, limit)

    def counts(self) -> dict[str, object]:
        by_source = dict(
            self.q(
                "SELECT source, count(*) FROM memory_chunks WHERE ns = %s GROUP BY source",
                (self.ns,),
            ).fetchall()
        )
        files = self.q("SELECT count(*) FROM memory_files WHERE ns = %s", (self.ns,)).fetchone()
        return {
            "files": int(files[0]) if files else 0,
            "chunks": sum(by_source.values()),
            "chunksBySource": by_source,
            "pendingEmbeddings": self.count_pending() if self.db.model_key else 0,
            "pendingLineVectors": self.lines.count_pending() if self.db.model_key else 0,
            "cacheEntries": self.cache.count(),
        }


@contextmanager
def reader(db: PgDatabase) -> Iterator[PgStore]:
    """A store on a pooled connection, for searches."""
    with db.connection() as conn:
        yield PgStore(conn, db)


def writer(db: PgDatabase) -> PgStore:
    """The store on the database's one writer connection."""
    return PgStore(db.writer_connection(), db)


def pusher(db: PgDatabase, wait_s: float) -> PgStore:
    """The writer for a push that someone waits for (``wait_s`` >= 0: a search, a save): its
    transactions wait that long at most for a lock (raising LockNotAvailable), since another
    client's forced rebuild holds every file of its folder until it commits, for minutes on a
    large namespace."""
    store = writer(db)
    if db.pooler == "transaction":
        # The writer has no short budget, and a pooler that lost its server may hold
        # statements for minutes: find that out within a search's budget first.
        with db.budget(store.conn):
            store.q("SELECT 1")
    if wait_s >= 0:
        store.lock_wait_ms = max(1, int(wait_s * 1000))
    return store
