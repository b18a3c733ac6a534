"""The indexer: the one writer of a folder's index.

It owns the writer connection and its lock, the editor buffers, the set of files changed on
disk, the in-memory vector index that follows every committed write, and the safe full rebuild.
The embedding model is never called while the writer lock is held.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

from ..embeddings.base import EmbeddingError, normalize
from ..embeddings.batch import batch_embedder_for
from ..index.embed import embed_lines, embed_pending
from ..index.readers import ReaderPool
from ..index.rows import to_blob
from ..index.schema import SCHEMA_VERSION, DatabaseError, is_unusable_file
from ..index.store import Store
from ..index.sync import (
    IndexContext,
    Progress,
    SyncReport,
    index_document,
    reindex_buffers,
    sync_keyword,
)
from ..index.vectors import Changes, Mark
from ..search.vector import VectorIndex
from ..settings import Settings
from ..text import rules_stamp
from ..workspace import PathError, Workspace
from .calibration_passages import reference_vectors
from .embed_target import EmbedTarget, index_context
from .index_files import file_identity, remove_stale_rebuilds
from .providers import ProviderPolicy, readable

log = logging.getLogger(__name__)


class Indexer:
    def __init__(
        self,
        settings: Settings,
        workspace: Workspace,
        policy: ProviderPolicy,
        index_path: Path,
        *,
        keyword_only: bool = False,
    ):
        """``keyword_only``: this index holds no vectors (a team's PostgreSQL index has them
        and this one is its local fallback), whatever the provider."""
        self.settings = settings
        self.keyword_only = keyword_only
        self.workspace = workspace
        self.policy = policy
        self.index_path = index_path
        self.lock = threading.RLock()
        self.writer = Store.open(index_path)
        self.opened = file_identity(index_path)
        self._keep_vec_table()
        remove_stale_rebuilds(index_path)
        self.readers = ReaderPool(index_path)
        self.buffers: dict[str, str] = {}  # unsaved editor text by workspace path
        self.dirty: set[str] = set()  # changed on disk, not indexed yet
        self.last_sync: SyncReport | None = None
        self.totals = {"cacheHits": 0, "cacheMisses": 0}
        self.vectors = VectorIndex(self._load_vectors, marker=self._log_mark)
        self.reference: np.ndarray | None = None  # the calibration passages' vectors
        self._data_version: int | None = None
        self.ctx = self._make_context()
        self.needs_rebuild = self._meta_changed()

    # -- setup ------------------------------------------------------------------------------
    def _keep_vec_table(self) -> None:
        """sqlite-vec's table exists while it is the vector backend (the caller holds the
        lock; the first time, filling it from the stored vectors takes a while)."""
        wanted = self.settings.store.vector_backend == "sqlite-vec" and not self.keyword_only
        self.writer.keep_vectors_for_sqlite_vec(wanted)

    def _make_context(self) -> IndexContext:
        ctx = index_context(self.settings, self.workspace, self.policy.current, self._own_vectors)
        return replace(ctx, cache_key=None) if self.keyword_only else ctx

    def _expected_meta(self) -> dict[str, str]:
        p = None if self.keyword_only else self.policy.current
        limits = self.ctx.limits
        return {
            "schema": str(SCHEMA_VERSION),
            "provider": p.id if p else "",
            "model": p.model if p else "",
            "providerKey": p.provider_key if p else "",
            "chunking": f"{limits.tokens}/{limits.overlap}/{limits.max_bytes}",
            "ftsText": rules_stamp(),
            "sources": ",".join(sorted(self.settings.sources)),
            "sessionGlobs": "|".join(self.settings.sessions.globs),
            "extraPaths": "|".join(self.settings.extra_paths),
        }

    def _meta_changed(self) -> bool:
        meta = self.writer.get_meta()
        expected = self._expected_meta()
        if "schema" not in meta:
            with self.lock:
                self.writer.set_meta(expected)
            return False
        return any(meta.get(k) != v for k, v in expected.items())

    def _load_vectors(self, float16_from: int) -> tuple[np.ndarray, np.ndarray]:
        with self.readers.borrow() as r:
            return r.all_embeddings(float16_from, room=True)

    def _log_mark(self) -> Mark | None:
        with self.readers.borrow() as r:
            return r.vector_log.mark()

    def _vector_changes(self, mark: Mark | None) -> Changes | None:
        """Other processes' vector writes since ``mark`` (the in-memory rows' place)."""
        try:
            return self.writer.vector_log.since(mark, max(1024, self.vectors.size))
        except DatabaseError as exc:  # the search goes on; its vector side loads them all
            log.warning("changed vectors not read (%s); loading them all", exc)
            return None

    def _own_vectors(self, removed: Sequence[int], added: Sequence[tuple[int, np.ndarray]]) -> None:
        """This process's vector writes, at their commit (under the writer lock). Never
        raises: the commit's later files would go untold, for good."""
        alone = False
        with suppress(DatabaseError):
            alone = self.writer.data_version() == self._data_version
        try:
            self.vectors.update(removed, added, self.writer.committed, alone)
        except (MemoryError, ValueError) as exc:  # half applied: the next search loads them all
            log.warning("in-memory vectors dropped (%s)", exc)
            self.vectors.invalidate()

    @contextmanager
    def reader(self) -> Iterator[Store]:
        with self.readers.borrow() as store:
            yield store

    def index_replaced(self) -> bool:
        return file_identity(self.index_path) != self.opened

    def _follow_index_file(self) -> None:
        """Open the index again if its file was deleted or replaced (it is a cache) under this
        process (the caller holds the lock): the writer kept the deleted file, readers opened
        since took the new one, and searches answered from either (deleted notes too)."""
        if not self.index_replaced():
            return
        log.warning("the index %s was deleted or replaced: opening it again", self.index_path)
        self.readers.drop()
        self.writer.close()
        self.writer = Store.open(self.index_path)
        self.opened = file_identity(self.index_path)
        self._keep_vec_table()
        self._data_version = None
        self.vectors.invalidate()
        self.needs_rebuild = self._meta_changed()

    # -- syncing ----------------------------------------------------------------------------
    def sync(
        self,
        reason: str = "manual",
        force: bool = False,
        progress: Progress | None = None,
        embed: bool = True,
    ) -> SyncReport:
        """Incremental sync (or a safe full rebuild when forced or the meta changed)."""
        t0 = time.perf_counter()
        with self.lock:
            self._follow_index_file()
        if force or self.needs_rebuild:
            report = self._rebuild(reason, progress)
        else:
            report = SyncReport(reason)
            with self.lock:
                self._keep_vec_table()
                self.dirty.clear()
                sync_keyword(self.writer, self.ctx, dict(self.buffers), report, progress)
        if embed:
            self.embed_pending(progress, report)
        if self.policy.current is not None:
            self.vectors.warm()
        report.duration_ms = (time.perf_counter() - t0) * 1000
        self.last_sync = report
        self._account(report)
        return report

    def _account(self, report: SyncReport) -> None:
        """Running totals for status: what the embedding cache saved and what was paid for."""
        self.totals["cacheHits"] += report.cache_hits
        self.totals["cacheMisses"] += report.embedded

    def _rebuild(self, reason: str, progress: Progress | None) -> SyncReport:
        """Build a fresh index beside the old one, then copy it over in one transaction; the
        old one answers meanwhile, and stays as it was if anything fails (the file goes)."""
        report = SyncReport(reason, full=True)
        tmp = self.index_path.with_name(f"{self.index_path.name}.rebuild-{os.getpid()}")
        side_files = (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"))
        for stale in side_files:
            stale.unlink(missing_ok=True)
        new: Store | None = None
        try:
            new = Store(tmp)  # may fail too (a full disk): the finally removes what it made
            new.keep_vec_table = self.writer.keep_vec_table
            self._seed(new.cache.copy_from, "embedding cache")
            new.set_meta(self._expected_meta())
            ctx = IndexContext(**{**self.ctx.__dict__, "on_vectors": None})
            with self.lock:
                buffers = dict(self.buffers)
            sync_keyword(new, ctx, buffers, report, progress)
            self._seed(new.lines.copy_from, "line vectors")  # a temporary file: no transaction
            with self.lock:
                self.writer.replace_with(new)
                self.needs_rebuild = False
                self.dirty.clear()
                self.readers.drop()
                self.vectors.invalidate()
                # Edits made during the rebuild went to the old index: apply them again.
                sync_keyword(self.writer, self.ctx, dict(self.buffers), SyncReport(reason))
        finally:
            if new is not None:
                new.close()
            for f in side_files:
                f.unlink(missing_ok=True)
        return report

    def _seed(self, copy: Callable[[Path], int], what: str) -> None:
        """Copy what the old index holds into the rebuild; a damaged old index gives nothing
        (a rebuild is how a damaged index is repaired, so it must not fail on it)."""
        try:
            copy(self.index_path)
        except DatabaseError as exc:
            if not is_unusable_file(exc):
                raise  # a full disk: the rebuild fails and the old index stays
            log.warning("rebuild: the old index's %s cannot be read (%s); skipped", what, exc)

    def own_target(self) -> EmbedTarget:
        return EmbedTarget(self.writer, self.lock, self.ctx)

    def embed_pending(
        self,
        progress: Progress | None = None,
        report: SyncReport | None = None,
        should_stop: Callable[[], bool] | None = None,
        target: EmbedTarget | None = None,
    ) -> int:
        """Embed chunks that have no vector yet in this index (or in ``target``, the team
        index); returns how many were embedded."""
        own_report = report is None
        report = report or SyncReport("embed")
        provider = self.policy.current
        target = target or self.own_target()
        if provider is None or target.ctx.cache_key is None:
            return 0
        before = report.embedded
        try:
            self._backfill_with_batch_api(target)
            embed_pending(
                target.store,
                provider,
                target.ctx,
                target.lock,
                report,
                progress,
                batch_size=self._batch_size(),
                should_stop=should_stop,
            )
            with target.lock:
                target.store.cache.evict(self.settings.cache.max_entries)
            embed_lines(
                target.store,
                provider,
                target.lock,
                self.line_budget(),
                progress,
                batch_size=self._batch_size(),
                should_stop=should_stop,
                readable=partial(readable, provider),
            )
        except EmbeddingError as exc:
            if self.policy.switch_to_fallback(exc):
                self._provider_changed()
                self.sync("fallback", progress=progress)
            else:
                self.policy.embedding_failed(exc)
        if own_report:
            self._account(report)
        return report.embedded - before

    def _provider_changed(self) -> None:
        # The next sync rebuilds safely; the embedding cache keeps what both providers paid for.
        with self.lock:
            self.ctx = self._make_context()
            self.needs_rebuild = self._meta_changed()
            self.vectors.invalidate()
            self.reference = None

    def reference_vectors(self) -> np.ndarray | None:
        """The calibration passages' vectors for this index's model (calibration_passages.py)."""
        if self.reference is None:
            self.reference = reference_vectors(self.policy.current, self.own_target())
        return self.reference

    def _backfill_with_batch_api(self, target: EmbedTarget) -> None:
        """Large backfills through a provider's batch API (``remote.batchApi``): vectors land
        in the embedding cache as each job's results arrive, then the regular vector phase
        picks them up from there, so a crash loses nothing already paid for."""
        batcher = batch_embedder_for(self.policy.current, self.settings.remote)
        key = target.ctx.cache_key
        store = target.store
        if batcher is None or key is None:
            return
        with target.lock:
            rows = store.pending_chunks(10_000_000)
            texts = {h: t for _, h, t in rows}
            cached = store.cache.get(key, list(texts))
        todo = [h for h in texts if h not in cached]
        if not batcher.should_use(len(todo)):
            return

        def land(start: int, vectors: np.ndarray) -> None:
            items = [(todo[start + i], to_blob(v)) for i, v in enumerate(normalize(vectors))]
            with target.lock, store.transaction():
                store.cache.put(key, items)

        batcher.embed([texts[h] for h in todo], on_vectors=land)

    def line_budget(self) -> int:
        """``query.lines.maxChunks``, or 0 whenever ``remote.batchApi`` is on with a provider
        that has a batch API: line vectors would go through the provider's full-price
        endpoint, and the batch API is there to pay half."""
        if batch_embedder_for(self.policy.current, self.settings.remote) is not None:
            return 0
        return self.settings.query.lines.max_chunks

    def _batch_size(self) -> int:
        provider = self.policy.current
        local = provider is not None and provider.id == "local"
        return max(1, self.settings.local.batch_size if local else self.settings.remote.batch_size)

    # -- files changed on disk, editor buffers ----------------------------------------------
    def mark_dirty(self, paths: list[str]) -> None:
        with self.lock:
            self.dirty.update(self.workspace.relative(p) for p in paths)

    def sync_dirty(self, budget_s: float | None = None) -> SyncReport | None:
        """Keyword-index the dirty files now (within ``budget_s`` seconds of waiting)."""
        if not self.dirty:
            return None
        if not self.lock.acquire(timeout=budget_s if budget_s is not None else -1):
            return None
        try:
            only, self.dirty = set(self.dirty), set()
            report = SyncReport("dirty")
            try:
                sync_keyword(self.writer, self.ctx, dict(self.buffers), report, None, only)
            except BaseException:
                self.dirty |= only  # rolled back: the next sync or search tries them again
                raise
            self._account(report)
            return report
        finally:
            self.lock.release()

    def set_document(self, path: str | Path, text: str) -> bool:
        try:
            mf = self.workspace.resolve(path)
        except PathError:
            return False
        with self.lock:
            self.buffers[mf.path] = text
            report = SyncReport("edit")
            data = text.encode("utf-8", "surrogatepass")
            with self.writer.transaction():
                index_document(self.writer, self.ctx, mf, data, time.time(), report)
            self._account(report)
        return True

    def clear_document(self, path: str | Path) -> None:
        try:
            rel = self.workspace.resolve(path).path
        except PathError:
            # Replaced by a symlink while open: its buffer goes all the same, or its text
            # stayed indexed under the path for good (a buffer is indexed whatever is on disk).
            rel = self.workspace.relative(str(path))
            if rel not in self.buffers:
                return
        with self.lock:
            self.buffers.pop(rel, None)
            # The file as it is on disk now; gone, or no longer memory: out of the index.
            sync_keyword(self.writer, self.ctx, {}, SyncReport("close"), None, {rel})

    def notice_other_writers(self) -> None:
        """Apply to the in-memory vectors what another process (a CLI `index`, an MCP
        server) wrote to this index, and index the buffers again: the writer connection's
        data_version moves only on others' commits. The vectors follow the index's log of
        changed vectors; loading all of them again took 1.1 s at 125,000 chunks."""
        if not self.lock.acquire(blocking=self.index_replaced()):  # waits only for a rare event
            return  # we are writing ourselves; check on the next search
        try:
            self._follow_index_file()
            version = self.writer.data_version()
            # The first time too: the vectors may have loaded (a sync's warm) before another
            # process's commit that this first version already counts (no cost if none).
            if version != self._data_version:
                self.vectors.follow(self._vector_changes)
            if self._data_version is not None and version != self._data_version:
                self.needs_rebuild = self._meta_changed()
                if self.buffers and not self._reapply_buffers():
                    return  # the version stays unseen: the next search tries again
            self._data_version = version
        finally:
            self.lock.release()

    def _reapply_buffers(self) -> bool:
        """The buffers again, over another process's disk text; False when that failed."""
        wait_ms = self.settings.sync.search_budget_ms
        try:
            reindex_buffers(self.writer, self.ctx, dict(self.buffers), wait_ms)
        except (DatabaseError, OSError) as exc:  # a full disk, a lock held too long
            log.warning("open documents not indexed again (%s)", exc)
            return False
        return True

    def close(self) -> None:
        self.readers.close()
        with self.lock:
            self.writer.close()
