"""The SQLite store: files, chunks, FTS5, sqlite-vec and the embedding cache, done plainly.

A Store wraps one connection. The engine owns one writer Store and gives every reader thread
its own Store on the same file (WAL), so a search never waits for a write.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..chunking import Chunk
from ..embeddings.base import EmbeddingError
from ..text import fts_text
from . import chunk_reads, schema, vectors
from .cache import EmbeddingCache
from .chunk_reads import Scope
from .journal import Written
from .keyword_scan import KeywordScan, Row
from .line_vectors import LineVectors
from .rows import (
    ChunkRow,
    ChunkState,
    FileInfo,
    FileRecord,
    FileState,
    stored_line_map,
    tail_json,
    to_blob,
)
from .schema import DatabaseError, connect, f16_blob, f32_blob, move_aside
from .vocab import DocFrequencies

log = logging.getLogger(__name__)


class Store:
    def __init__(self, path: Path, *, create: bool = True):
        self.path = path
        self.conn, self.vec_reason = connect(path)
        if create:
            schema.create(self.conn)
        self.dims = int(self.get_meta().get("dims") or 0)
        self.has_vec_table = schema.has_table(self.conn, "chunks_vec")
        # sqlite-vec's table is a second copy of every vector: kept only when it is searched.
        self.keep_vec_table = False
        self._after_commit: list[Callable[[], None]] = []
        self._df = DocFrequencies(self.conn)
        self._bm25 = KeywordScan(self.conn, path)
        self.cache = EmbeddingCache(self.conn)
        self.lines = LineVectors(self.conn)
        self.vector_log = vectors.VectorLog(self.conn)
        self.written = Written()  # files whose row this connection wrote (the memory checks)
        self.committed: vectors.Mark | None = None

    @classmethod
    def open(cls, path: Path) -> Store:
        """Open or create the index; a corrupt or foreign file is moved aside and replaced."""
        schema.check_index_path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(path.parent, os.W_OK):
            raise PermissionError(f"index folder {path.parent} is not writable")
        try:
            store = cls(path)
            store.conn.execute("SELECT count(*) FROM chunks").fetchone()
            meta = store.get_meta()
            version = meta.get("schema")
            if version not in (None, str(schema.SCHEMA_VERSION)) and not schema.upgrade(
                store.conn, version
            ):
                store.close()
                raise DatabaseError(f"schema version {meta.get('schema')}")
            return store
        except DatabaseError as exc:
            if not path.exists() or not schema.is_unusable_file(exc):
                raise  # a full disk, a lock, an I/O error: the index is kept as it is
            move_aside(path, str(exc))
            return cls(path)

    def close(self) -> None:
        self._bm25.close()
        with contextlib.suppress(Exception):  # closing twice is harmless
            self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction; callbacks given to ``after_commit`` run only once it is
        committed (the in-memory vector index must never see a write that rolled back)."""
        self.conn.execute("BEGIN IMMEDIATE")
        self._after_commit = []
        try:
            if self.vec_reason is None:
                # Another process (a CLI, a rebuild) may have made or dropped it since we looked.
                self.has_vec_table = schema.has_table(self.conn, "chunks_vec")
            yield
            self.committed = self.vector_log.before_commit()
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            self._after_commit = []
            raise
        callbacks, self._after_commit = self._after_commit, []
        for fn in callbacks:
            fn()
        self.committed = None  # a write outside a transaction has no place of its own

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the current transaction commits (at once outside a transaction)."""
        if self.conn.in_transaction:
            self._after_commit.append(fn)
        else:
            fn()

    def replace_with(self, other: Store) -> None:
        """Make this index a copy of ``other`` (SQLite's backup API, in one write transaction:
        readers see the old index or the new one, never a mix; a rename is unsafe with WAL)."""
        other.conn.backup(self.conn)
        self.dims = other.dims
        self.has_vec_table = other.has_vec_table

    def data_version(self) -> int:
        """Changes when another connection commits to this file (not on our own commits)."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    # -- meta -------------------------------------------------------------------------------
    def get_meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta").fetchall())

    def set_meta(self, values: Mapping[str, object]) -> None:
        self.conn.executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [(k, str(v)) for k, v in values.items()],
        )

    # -- files ------------------------------------------------------------------------------
    def file_states(self, paths: Iterable[str] | None = None) -> dict[str, FileState]:
        """Stored state of every file, or of the given paths only (one edit: one row)."""
        if paths is None:
            rows = self.conn.execute("SELECT path, hash, mtime, size FROM files").fetchall()
        else:
            wanted, rows = list(paths), []
            for i in range(0, len(wanted), 500):
                part = wanted[i : i + 500]
                marks = ",".join("?" * len(part))
                rows += self.conn.execute(
                    f"SELECT path, hash, mtime, size FROM files WHERE path IN ({marks})", part
                ).fetchall()
        return {p: FileState(h, m, s) for p, h, m, s in rows}

    def file_infos(self, paths: Iterable[str]) -> dict[str, FileInfo]:
        """(source, lines, line map, date) of each indexed file of ``paths``."""
        wanted = list(dict.fromkeys(paths))
        marks = ",".join("?" * len(wanted))
        sql = f"SELECT path, source, lines, line_map, date, tail FROM files WHERE path IN ({marks})"
        rows = self.conn.execute(sql, wanted).fetchall()
        return {p: (src, n, stored_line_map(m, tail), d) for p, src, n, m, d, tail in rows}

    def file_tail(self, path: str) -> tuple[int, dict[str, Any]] | None:
        """(lines, tail state) of a transcript indexed from disk, None when it has none."""
        row = self.conn.execute("SELECT lines, tail FROM files WHERE path = ?", (path,)).fetchone()
        if row is None or not row[1]:
            return None
        return row[0], json.loads(row[1])

    def upsert_file(self, record: FileRecord) -> None:
        """Write a file's row (``record.text`` is for a team index: this file is on disk)."""
        self.conn.execute(
            "INSERT INTO files(path, source, hash, mtime, size, date, lines, line_map, tail, "
            "meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET "
            "source = excluded.source, hash = excluded.hash, mtime = excluded.mtime, "
            "size = excluded.size, date = excluded.date, lines = excluded.lines, "
            "line_map = excluded.line_map, tail = excluded.tail, meta = excluded.meta",
            record.columns(),
        )
        self.written.add(record.path)

    def extend_file(self, record: FileRecord) -> None:
        """Record a transcript's appended tail: the line map grows inside SQLite (the JSON
        list is extended as text, never parsed here) by ``record.line_map``, the rest of the
        row is replaced (its source kept)."""
        more = ", ".join(str(n) for n in record.line_map or ()) or None
        self.conn.execute(
            "UPDATE files SET hash = ?, mtime = ?, size = ?, date = ?, lines = ?, tail = ?, "
            "line_map = CASE WHEN ?7 IS NULL THEN line_map "
            "WHEN line_map IS NULL THEN '[' || ?7 || ']' "
            "ELSE substr(line_map, 1, length(line_map) - 1) || ', ' || ?7 || ']' END "
            "WHERE path = ?8",
            (
                record.hash,
                record.mtime,
                record.size,
                record.date,
                record.lines,
                tail_json(record.tail),
                more,
                record.path,
            ),
        )
        self.written.add(record.path)

    def touch_file(self, path: str, mtime: float, size: int) -> None:
        self.conn.execute(
            "UPDATE files SET mtime = ?, size = ? WHERE path = ?", (mtime, size, path)
        )

    def delete_file(self, path: str) -> list[int]:
        removed = self._delete_chunks(path)
        self.conn.execute("DELETE FROM files WHERE path = ?", (path,))
        self.written.add(path)
        return removed

    # -- chunks -----------------------------------------------------------------------------
    def chunk_embeddings(self, path: str) -> dict[str, bytes]:
        """hash -> embedding of a file's current chunks, so re-chunking reuses vectors."""
        return vectors.file_vectors(self.conn, path)

    def chunk_rows(self, path: str, first_id: int = 0) -> list[ChunkState]:
        """A file's chunks from id ``first_id`` on, in order (chunks are inserted in order)."""
        return vectors.chunk_states(self.conn, path, first_id)

    def _delete_chunks(self, path: str) -> list[int]:
        ids = [r[0] for r in self.conn.execute("SELECT id FROM chunks WHERE path = ?", (path,))]
        self._delete_ids(ids)
        return ids

    def _delete_ids(self, ids: Sequence[int]) -> None:
        if not ids:
            return
        params = [(i,) for i in ids]
        self.cache.retire(ids)
        self.lines.retire(ids)
        # A contentless FTS5 row is deleted by naming the tokens it was written with.
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            marks = ",".join("?" * len(part))
            texts = self.conn.execute(
                f"SELECT id, text FROM chunks WHERE id IN ({marks})", part
            ).fetchall()
            self.conn.executemany(
                "INSERT INTO chunks_fts(chunks_fts, rowid, body) VALUES ('delete', ?, ?)",
                [(cid, fts_text(text)) for cid, text in texts],
            )
        if self.has_vec_table:
            self.conn.executemany("DELETE FROM chunks_vec WHERE rowid = ?", params)
        self.conn.executemany("DELETE FROM chunk_vectors WHERE id = ?", params)
        self.conn.executemany("DELETE FROM chunks WHERE id = ?", params)

    def replace_chunks(
        self, path: str, source: str, chunks: Sequence[Chunk], known: dict[str, bytes], model: str
    ) -> tuple[list[int], list[tuple[int, bytes | None]]]:
        """Swap a file's chunks; ``known`` maps chunk hashes to embeddings already paid for.
        Returns (removed chunk ids, [(new id, embedding or None)])."""
        removed = self._delete_chunks(path)
        return removed, self._insert_chunks(path, source, chunks, known, model)

    def update_chunks(
        self,
        path: str,
        source: str,
        remove: Sequence[int],
        chunks: Sequence[Chunk],
        known: dict[str, bytes],
        model: str,
    ) -> tuple[list[int], list[tuple[int, bytes | None]]]:
        """Delete some of a file's chunks (by id) and add others after the ones it keeps."""
        self._delete_ids(remove)
        return list(remove), self._insert_chunks(path, source, chunks, known, model)

    def _insert_chunks(
        self, path: str, source: str, chunks: Sequence[Chunk], known: dict[str, bytes], model: str
    ) -> list[tuple[int, bytes | None]]:
        now = time.time()
        added: list[tuple[int, bytes | None]] = []
        for c in chunks:
            blob = known.get(c.hash)
            cur = self.conn.execute(
                "INSERT INTO chunks(path, source, start_line, end_line, hash, text, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (path, source, c.start_line, c.end_line, c.hash, c.text, now),
            )
            cid = int(cur.lastrowid)
            self.conn.execute(
                "INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)", (cid, fts_text(c.text))
            )
            added.append((cid, blob))
        self.lines.revive([(cid, c.hash) for (cid, _), c in zip(added, chunks, strict=True)])
        known_blobs = [(cid, b) for cid, b in added if b is not None]
        vectors.store_vectors(self.conn, known_blobs, model)
        if known_blobs and not self.has_vec_table:
            self.ensure_vec_table(len(known_blobs[0][1]) // 4)  # a rebuild fed by the cache
        self._vec_insert(known_blobs)
        self.cache.claimed([c.hash for c in chunks if c.hash in known])
        return added

    def pending_chunks(self, limit: int) -> list[tuple[int, str, str]]:
        """(id, hash, text) of chunks that have no embedding yet."""
        return self.conn.execute(
            "SELECT id, hash, text FROM chunks WHERE vec = 0 ORDER BY id LIMIT ?",
            (limit,),
        ).fetchall()

    def still_pending(self, rows: Sequence[tuple[int, str]]) -> set[int]:
        """Of (id, hash) pairs read earlier, the ids still waiting for exactly that text's
        vector: an edit meanwhile may have re-used an id for other text."""
        if not rows:
            return set()
        marks = ",".join("?" * len(rows))
        found = self.conn.execute(
            f"SELECT id, hash FROM chunks WHERE id IN ({marks}) AND vec = 0",
            [cid for cid, _ in rows],
        ).fetchall()
        wanted = dict(rows)
        return {cid for cid, h in found if wanted.get(cid) == h}

    def count_pending(self) -> int:
        return self.conn.execute("SELECT count(*) FROM chunks WHERE vec = 0").fetchone()[0]

    def set_embeddings(self, items: Sequence[tuple[int, bytes]], model: str) -> None:
        vectors.store_vectors(self.conn, items, model)
        self._vec_insert(items)
        self.cache.claimed_ids([cid for cid, _ in items])

    def ensure_vec_table(self, dims: int) -> None:
        if self.dims and self.dims != dims:
            # An EmbeddingError, so the engine reports it (status, searches) or falls back:
            # the model behind an unchanged name (a compatible server's alias) has changed.
            raise EmbeddingError(
                f"the index holds {self.dims}-dimensional vectors but the model now gives "
                f"{dims}: it changed under the same name; delete the index to rebuild it"
            )
        self.dims = dims
        self.set_meta({"dims": dims})
        if self.keep_vec_table and self.vec_reason is None and not self.has_vec_table:
            schema.create_vec_table(self.conn, dims)
            self.has_vec_table = True

    def keep_vectors_for_sqlite_vec(self, keep: bool) -> None:
        """Create and fill sqlite-vec's table from the stored vectors, or drop it: it exists
        only while ``store.vectorBackend = "sqlite-vec"`` (then it costs 1.5 KB a chunk)."""
        self.keep_vec_table = keep and self.vec_reason is None
        if self.keep_vec_table == self.has_vec_table:
            return
        with self.transaction():
            if not self.keep_vec_table:
                self.conn.execute("DROP TABLE IF EXISTS chunks_vec")
                self.has_vec_table = False
            elif self.dims:
                self.ensure_vec_table(self.dims)
                for cids, mat in vectors.blocks(self.conn):
                    self._vec_insert(list(zip(cids.tolist(), map(bytes, mat), strict=True)))

    def _vec_insert(self, items: Sequence[tuple[int, bytes]]) -> None:
        if self.has_vec_table and items:
            self.conn.executemany(
                "INSERT OR REPLACE INTO chunks_vec(rowid, embedding) VALUES (?, ?)",
                # The stored precision, so both vector backends score alike.
                [(cid, f32_blob(f16_blob(b))) for cid, b in items],
            )

    def chunks_by_ids(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        return chunk_reads.chunks_by_ids(self.conn, ids)

    def chunks_in(self, scope: Scope, cap: int) -> list[int] | None:
        return chunk_reads.chunks_in(self.conn, scope, cap)

    def embeddings_for(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        return vectors.embeddings_for(self.conn, ids)

    def sample_embeddings(self, limit: int) -> np.ndarray:
        """Up to ``limit`` chunk vectors spread evenly over the index (all of a small one)."""
        return vectors.sample_embeddings(self.conn, limit, self.dims)

    def all_embeddings(
        self, float16_from: int = 0, room: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(ids, unit vectors); float16 rows when there are ``float16_from`` or more (0: never)."""
        return vectors.all_embeddings(self.conn, self.dims, float16_from, room)

    # -- search -----------------------------------------------------------------------------
    def doc_frequencies(self, words: Sequence[str]) -> tuple[list[int], int]:
        """For each query word, the number of chunks holding it, and the number of chunks."""
        return self._df.count(words)

    def fts_search(self, expr: str, limit: int, postings: int = 0, left_out: str = "") -> list[Row]:
        return self._bm25.search(expr, limit, postings, left_out)

    def fts_within(self, expr: str, ids: Sequence[int], limit: int) -> list[Row]:
        return self._bm25.search_within(expr, ids, limit)

    def vec_table_ready(self) -> bool:
        """sqlite-vec's table is there (another connection may have made it since we looked)."""
        if not self.has_vec_table and self.vec_reason is None:
            self.has_vec_table = schema.has_table(self.conn, "chunks_vec")
        return self.has_vec_table

    def vec_search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(chunk id, cosine distance) by sqlite-vec KNN (never ORDER BY a distance function)."""
        if not self.vec_table_ready():
            return []
        return self.conn.execute(
            "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?",
            (to_blob(query), k),
        ).fetchall()

    # -- status -------------------------------------------------------------------------------
    def file_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM files").fetchone()[0])

    def counts(self) -> dict[str, object]:
        q = self.conn.execute
        by_source = dict(q("SELECT source, count(*) FROM chunks GROUP BY source").fetchall())
        return {
            "files": q("SELECT count(*) FROM files").fetchone()[0],
            "chunks": sum(by_source.values()),
            "chunksBySource": by_source,
            "pendingEmbeddings": self.count_pending(),
            "pendingLineVectors": self.lines.count_pending(),
            "cacheEntries": self.cache.count(),
        }
