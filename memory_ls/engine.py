"""MemoryEngine: the one facade the server, the CLI and the MCP tools use.

One engine per workspace folder; every method is safe to call from worker threads. Writes go
through one writer connection under ``_lock``; searches borrow reader connections (WAL), so a
search never waits for an embedding batch or a rebuild. The embedding model is never called
while the writer lock is held.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np

from .chunking import ChunkLimits, split_lines
from .embeddings.base import EmbeddingError, EmbeddingProvider, normalize
from .embeddings.batch import batch_embedder_for
from .embeddings.factory import create_fallback, create_provider
from .index.schema import SCHEMA_VERSION
from .index.store import Store, to_blob
from .index.sync import (
    IndexContext,
    Progress,
    SyncReport,
    embed_pending,
    index_text,
    remove_file,
    sync_keyword,
)
from .search.citations import parse_citation
from .search.hybrid import run as run_search
from .search.request import SearchRequest
from .search.results import Excerpt, SearchResponse
from .search.vector import SqliteVecIndex, VectorIndex
from .settings import Settings, cache_dir
from .settings import load as load_settings
from .sources import SourceError, render
from .sources.markdown import read_bytes
from .workspace import PathError, Workspace

log = logging.getLogger(__name__)
_AUTO: Any = object()
QUERY_FAILURE_COOLDOWN_S = 30.0
# Above this share of [UNK] tokens a query's vector is noise (an English model, a Chinese query).
MAX_UNKNOWN_QUERY_TOKENS = 0.25


def default_index_path(root: Path) -> Path:
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    return cache_dir() / "index" / f"{root.resolve().name or 'root'}-{digest}.sqlite"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_rebuilds(index_path: Path) -> None:
    """Delete temporary rebuild files left by a process that died (kill -9, power loss)."""
    for f in index_path.parent.glob(f"{index_path.name}.rebuild-*"):
        pid = f.name.rsplit(".rebuild-", 1)[1].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            log.info("removing %s left by a rebuild that did not finish", f.name)
            f.unlink(missing_ok=True)


class MemoryEngine:
    def __init__(
        self,
        root: Path | str,
        settings: Settings | None = None,
        *,
        provider: EmbeddingProvider | None = _AUTO,
        index_path: Path | str | None = None,
    ):
        self.root = Path(root).resolve()
        self.problems: list[str] = []
        if settings is None:
            settings, self.problems = load_settings(self.root)
        self.settings = settings
        mp = settings.local.model_path
        if mp and not Path(mp).expanduser().is_absolute():
            settings.local.model_path = str(self.root / mp)  # relative to the workspace
        self.workspace = Workspace(self.root, settings)
        if provider is _AUTO:
            provider, self.provider_reason = create_provider(settings)
        else:
            self.provider_reason = None if provider else "no embedding provider: keyword-only"
        self.provider: EmbeddingProvider | None = provider
        self.fallback_reason: str | None = None
        self._on_fallback = False
        self._totals = {"cacheHits": 0, "cacheMisses": 0}
        self._data_version: int | None = None
        self._query_retry_at = 0.0
        self._query_failure: str | None = None
        path = index_path or (settings.store.path and Path(settings.store.path).expanduser())
        self.index_path = Path(path) if path else default_index_path(self.root)

        self._lock = threading.RLock()
        self._writer = Store.open(self.index_path)
        remove_stale_rebuilds(self.index_path)
        self._readers: queue.LifoQueue[Store] = queue.LifoQueue()
        self._overlays: dict[str, str] = {}
        self._dirty: set[str] = set()
        self._closed = False
        self.last_sync: SyncReport | None = None
        self.vectors = VectorIndex(self._load_vectors)
        self._ctx = self._make_context()
        self.needs_rebuild = self._meta_changed()

    # -- setup ------------------------------------------------------------------------------
    def _make_context(self) -> IndexContext:
        p = self.provider
        s = self.settings
        limits = ChunkLimits.for_model(
            s.chunking.tokens,
            s.chunking.overlap,
            p.max_input_tokens if p else 0,
            p.max_input_bytes if p else 0,
        )
        return IndexContext(
            workspace=self.workspace,
            limits=limits,
            cache_key=(p.id, p.model, p.provider_key) if p else None,
            cache_enabled=s.cache.enabled,
            max_file_bytes=s.max_file_bytes,
            on_vectors=self.vectors.update,
        )

    def _expected_meta(self) -> dict[str, str]:
        p = self.provider
        return {
            "schema": str(SCHEMA_VERSION),
            "provider": p.id if p else "",
            "model": p.model if p else "",
            "providerKey": p.provider_key if p else "",
            "chunking": f"{self._ctx.limits.tokens}/{self._ctx.limits.overlap}/"
            f"{self._ctx.limits.max_bytes}",
            "sources": ",".join(sorted(self.settings.sources)),
            "sessionGlobs": "|".join(self.settings.sessions.globs),
            "extraPaths": "|".join(self.settings.extra_paths),
        }

    def _meta_changed(self) -> bool:
        meta = self._writer.get_meta()
        expected = self._expected_meta()
        if "schema" not in meta:
            with self._lock:
                self._writer.set_meta(expected)
            return False
        return any(meta.get(k) != v for k, v in expected.items())

    def _load_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        with self._reader() as r:
            return r.all_embeddings()

    @contextmanager
    def _reader(self) -> Iterator[Store]:
        try:
            store = self._readers.get_nowait()
        except queue.Empty:
            store = Store(self.index_path, create=False)
        try:
            yield store
        finally:
            if self._closed:
                store.close()
            else:
                self._readers.put(store)

    # -- indexing ---------------------------------------------------------------------------
    def sync(
        self,
        reason: str = "manual",
        force: bool = False,
        progress: Progress | None = None,
        embed: bool = True,
    ) -> SyncReport:
        """Incremental sync (or a safe full rebuild when forced or the meta changed)."""
        t0 = time.perf_counter()
        if force or self.needs_rebuild:
            report = self._rebuild(reason, progress)
        else:
            report = SyncReport(reason)
            with self._lock:
                self._dirty.clear()
                sync_keyword(self._writer, self._ctx, dict(self._overlays), report, progress)
        if embed:
            self.embed_pending(progress, report)
        if self.provider is not None:
            self.vectors.warm()
        report.duration_ms = (time.perf_counter() - t0) * 1000
        self.last_sync = report
        self._account(report)
        return report

    def _account(self, report: SyncReport) -> None:
        """Running totals for status: what the embedding cache saved and what was paid for."""
        self._totals["cacheHits"] += report.cache_hits
        self._totals["cacheMisses"] += report.embedded

    def _rebuild(self, reason: str, progress: Progress | None) -> SyncReport:
        """Build a fresh index beside the old one, then copy it over in one transaction.

        The old index keeps answering searches meanwhile; if anything fails, the temporary
        file is removed and the old index stays as it was.
        """
        report = SyncReport(reason, full=True)
        tmp = self.index_path.with_name(f"{self.index_path.name}.rebuild-{os.getpid()}")
        for stale in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            stale.unlink(missing_ok=True)
        new = Store(tmp)
        try:
            new.copy_cache_from(self.index_path)
            new.set_meta(self._expected_meta())
            ctx = IndexContext(**{**self._ctx.__dict__, "on_vectors": None})
            with self._lock:
                overlays = dict(self._overlays)
            sync_keyword(new, ctx, overlays, report, progress)
            with self._lock:
                # The SQLite backup API copies every page inside one write transaction of the
                # destination: readers see the old index or the new one, never a mix.
                new.conn.backup(self._writer.conn)
                self._writer.dims = new.dims
                self._writer.has_vec_table = new.has_vec_table
                self.needs_rebuild = False
                self._dirty.clear()
                self._drop_readers()
                self.vectors.invalidate()
                # Edits made during the rebuild went to the old index: apply them again.
                sync_keyword(self._writer, self._ctx, dict(self._overlays), SyncReport(reason))
        finally:
            new.close()
            for f in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                f.unlink(missing_ok=True)
        return report

    def _drop_readers(self) -> None:
        while True:
            try:
                self._readers.get_nowait().close()
            except queue.Empty:
                return

    def embed_pending(
        self, progress: Progress | None = None, report: SyncReport | None = None, should_stop=None
    ) -> int:
        """Embed chunks that have no vector yet; returns how many were embedded."""
        own_report = report is None
        report = report or SyncReport("embed")
        if self.provider is None or self._ctx.cache_key is None:
            return 0
        before = report.embedded
        try:
            self._backfill_with_batch_api()
            embed_pending(
                self._writer,
                self.provider,
                self._ctx,
                self._lock,
                report,
                progress,
                batch_size=self._batch_size(),
                should_stop=should_stop,
            )
            with self._lock:
                self._writer.cache_evict(self.settings.cache.max_entries)
        except EmbeddingError as exc:
            if self._activate_fallback(exc):
                self.sync("fallback", progress=progress)
            else:
                self.fallback_reason = f"embedding failed: {exc}"
                log.warning("%s; keyword search still works", self.fallback_reason)
        if own_report:
            self._account(report)
        return report.embedded - before

    def _backfill_with_batch_api(self) -> None:
        """Large backfills through a provider's batch API (``remote.batchApi``): vectors land
        in the embedding cache as each job's results arrive, then the regular vector phase
        picks them up from there, so a crash loses nothing already paid for."""
        batcher = batch_embedder_for(self.provider, self.settings.remote)
        key = self._ctx.cache_key
        if batcher is None or key is None:
            return
        with self._lock:
            rows = self._writer.pending_chunks(10_000_000)
            texts = {h: t for _, h, t in rows}
            cached = self._writer.cache_get(key, list(texts))
        todo = [h for h in texts if h not in cached]
        if not batcher.should_use(len(todo)):
            return

        def land(start: int, vectors: np.ndarray) -> None:
            items = [(todo[start + i], to_blob(v)) for i, v in enumerate(normalize(vectors))]
            with self._lock, self._writer.transaction():
                self._writer.cache_put(key, items)

        batcher.embed([texts[h] for h in todo], on_vectors=land)

    def _batch_size(self) -> int:
        local = self.provider is not None and self.provider.id == "local"
        return max(1, self.settings.local.batch_size if local else self.settings.remote.batch_size)

    def _activate_fallback(self, exc: Exception) -> bool:
        """Switch to ``settings.fallback`` after the primary failed; the next sync rebuilds
        the index safely with it (the embedding cache keeps what both already paid for)."""
        if self._on_fallback:
            return False
        fallback = create_fallback(self.settings, self.provider)
        if fallback is None:
            return False
        old = self.provider
        self.fallback_reason = (
            f"{old.id if old else 'primary'} failed ({exc}); switched to fallback {fallback.id}"
        )
        log.warning("%s", self.fallback_reason)
        with self._lock:
            self.provider = fallback
            self._on_fallback = True
            self._ctx = self._make_context()
            self.needs_rebuild = self._meta_changed()
            self.vectors.invalidate()
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()
        return True

    def mark_dirty(self, paths: list[str]) -> None:
        """Record files changed outside the editor; the next sync or search picks them up."""
        with self._lock:
            self._dirty.update(self._rel(p) for p in paths)

    def sync_dirty(self, budget_s: float | None = None) -> SyncReport | None:
        """Keyword-index the dirty files now (within ``budget_s`` seconds of waiting)."""
        if not self._dirty:
            return None
        if not self._lock.acquire(timeout=budget_s if budget_s is not None else -1):
            return None
        try:
            only, self._dirty = set(self._dirty), set()
            report = SyncReport("dirty")
            sync_keyword(self._writer, self._ctx, dict(self._overlays), report, None, only)
            self._account(report)
            return report
        finally:
            self._lock.release()

    def set_document(self, path: str | Path, text: str) -> bool:
        """Index an editor buffer's unsaved text (keyword side now, vectors on the next
        ``embed_pending``). Returns False when the path is not memory of this workspace."""
        try:
            mf = self.workspace.resolve(path)
        except PathError:
            return False
        with self._lock:
            self._overlays[mf.path] = text
            report = SyncReport("edit")
            with self._writer.transaction():
                index_text(
                    self._writer,
                    self._ctx,
                    mf,
                    text.encode("utf-8", "surrogatepass"),
                    time.time(),
                    report,
                )
            self._account(report)
        return True

    def clear_document(self, path: str | Path) -> None:
        """Forget an editor buffer and index the file as it is on disk (or drop it)."""
        try:
            mf = self.workspace.resolve(path)
        except PathError:
            return
        with self._lock:
            self._overlays.pop(mf.path, None)
            report = SyncReport("close")
            sync_keyword(self._writer, self._ctx, {}, report, None, {mf.path})
            if not mf.abs_path.exists():
                with self._writer.transaction():
                    remove_file(self._writer, self._ctx, mf.path)

    # -- reading ----------------------------------------------------------------------------
    def search(self, request: SearchRequest | str, **fields: Any) -> SearchResponse:
        """Search this folder. ``request`` is a SearchRequest, or a query string with the
        request's other fields as keywords (``engine.search("redis", max_results=3)``)."""
        t0 = time.perf_counter()
        if isinstance(request, str):
            request = SearchRequest(query=request, **fields)
        qs = self.settings.query
        req = request.resolved(qs)
        mode = req.mode
        self._notice_other_writers()
        self.sync_dirty(self.settings.sync.search_budget_ms / 1000)
        fallback = self.fallback_reason
        qvec = None
        wants_vec = self.provider is not None and mode != "keyword" and bool(req.query.strip())
        if wants_vec and self.needs_rebuild:
            # The stored vectors belong to the previous model until the rebuild has run.
            wants_vec = False
            fallback = "the index is waiting for a rebuild for the new model; keyword results only"
        unknown = self._unknown_ratio(req.query) if wants_vec else 0.0
        if unknown > MAX_UNKNOWN_QUERY_TOKENS:
            wants_vec = False
            fallback = (
                f"the embedding model does not know {unknown:.0%} of this query's tokens; "
                "keyword results only"
            )
        if wants_vec and time.monotonic() >= self._query_retry_at:
            try:
                qvec = self.provider.embed_query(req.query)
                self._query_failure = None
            except EmbeddingError as exc:
                # Do not spend the query timeout on every search against a dead endpoint.
                self._query_retry_at = time.monotonic() + QUERY_FAILURE_COOLDOWN_S
                self._query_failure = f"query embedding failed ({exc}); keyword results only"
                log.warning("%s", self._query_failure)
        if wants_vec and qvec is None and self._query_failure:
            fallback = self._query_failure
        elif self.provider is None:
            fallback = self.provider_reason
        with self._reader() as store:
            vectors = self.vectors
            if self.settings.store.vector_backend == "sqlite-vec" and store.vec_reason is None:
                vectors = SqliteVecIndex(store)
            hits, used = run_search(store, vectors, qvec, req, qs, datetime.now(UTC).date())
        return SearchResponse(
            results=hits,
            mode=used,
            provider={"id": self.provider.id, "model": self.provider.model}
            if self.provider
            else None,
            fallback_reason=fallback,
            took_ms=(time.perf_counter() - t0) * 1000,
        )

    def _notice_other_writers(self) -> None:
        """Drop the in-memory vectors when another process (a CLI `index`, an MCP server)
        committed to this index: they follow only this engine's own writes. The writer
        connection's data_version moves only on other connections' commits."""
        if not self._lock.acquire(blocking=False):
            return  # we are writing ourselves; check on the next search
        try:
            version = self._writer.conn.execute("PRAGMA data_version").fetchone()[0]
            if self._data_version is not None and version != self._data_version:
                log.info("the index was changed by another process; reloading vectors")
                self.vectors.invalidate()
                self.needs_rebuild = self._meta_changed()
            self._data_version = version
        finally:
            self._lock.release()

    def _unknown_ratio(self, query: str) -> float:
        check = getattr(self.provider, "unknown_ratio", None)
        if check is None:
            return 0.0
        try:
            return float(check(query))
        except EmbeddingError:
            return 0.0

    def _rel(self, path: str | Path) -> str:
        p = Path(path)
        if p.is_absolute():
            try:
                return p.resolve().relative_to(self.root).as_posix()
            except ValueError:
                return str(p)
        return p.as_posix().removeprefix("./")

    def read_text(self, path: str | Path) -> tuple[str, list[int] | None]:
        """The rendered text of a memory file (buffer if open) and its line map."""
        mf = self.workspace.resolve(path)
        if mf.path in self._overlays:
            data = self._overlays[mf.path].encode("utf-8", "surrogatepass")
        else:
            if not mf.abs_path.exists():
                raise PathError(f"{mf.path}: no such file")
            if not self.workspace.is_memory_file(mf):  # a FIFO would block the reader forever
                raise PathError(f"{mf.path}: not a regular file")
            try:
                data = read_bytes(mf.abs_path, self.settings.max_file_bytes)
            except FileNotFoundError:
                raise PathError(f"{mf.path}: no such file") from None
        src = render(mf, data)
        return src.text, list(src.line_map) if src.line_map else None

    def get(
        self, path_or_citation: str, start: int | None = None, lines: int | None = None
    ) -> Excerpt:
        """Lines of a memory file: ``path`` with from/lines, or a citation ``path#L3-L9``.

        Raises PathError (outside the roots, missing) or ValueError (bad numbers)."""
        cite = parse_citation(path_or_citation)
        path = cite.path if cite else path_or_citation
        if cite and start is None:
            start, lines = cite.start, cite.end - cite.start + 1
        if (start is not None and start < 1) or (lines is not None and lines < 1):
            raise ValueError("from and lines must be positive")
        try:
            text, line_map = self.read_text(path)
        except SourceError as exc:
            raise PathError(str(exc)) from exc
        rendered = split_lines(text)
        if line_map:  # a transcript: cite and return original JSONL line numbers
            total = max(line_map) if line_map else 0
            first = start or 1
            last = total if lines is None else first + lines - 1
            picked = [
                ln for ln, orig in zip(rendered, line_map, strict=False) if first <= orig <= last
            ]
            return Excerpt(self._rel(path), first, min(last, total), total, "\n".join(picked))
        total = len(rendered)
        first = start or 1
        last = total if lines is None else min(total, first + lines - 1)
        return Excerpt(
            self._rel(path),
            first,
            max(first - 1, last),
            total,
            "\n".join(rendered[first - 1 : last]),
        )

    def status(self) -> dict[str, Any]:
        with self._reader() as r:
            counts = r.counts()
            vec_reason = r.vec_reason
        p = self.provider
        backend = self.settings.store.vector_backend
        if backend != "sqlite-vec" or vec_reason:
            backend = "numpy"
        return {
            "root": str(self.root),
            "indexPath": str(self.index_path),
            **counts,
            # Keyword-only mode embeds nothing, so nothing is waiting for a vector.
            "pendingEmbeddings": counts["pendingEmbeddings"] if p else 0,
            "provider": {"id": p.id, "model": p.model, "dims": p.dims} if p else None,
            "providerStats": p.stats.snapshot() if p and hasattr(p, "stats") else None,
            # Since this engine started: chunks whose vector came from the cache vs were embedded.
            **self._totals,
            "mode": "hybrid" if p else "keyword",
            "providerReason": self.provider_reason,
            "fallbackReason": self.fallback_reason,
            "vectorBackend": backend,
            "sqliteVec": vec_reason or "loaded",
            "fts": "fts5",
            "dirty": bool(self._dirty) or self.needs_rebuild,
            "needsRebuild": self.needs_rebuild,
            "openDocuments": sorted(self._overlays),
            "lastSync": self.last_sync.to_json() if self.last_sync else None,
            "settingsProblems": self.problems,
        }

    def close(self) -> None:
        self._closed = True
        with self._lock:
            self._drop_readers()
            self._writer.close()
            if self.provider is not None:
                with contextlib.suppress(Exception):  # closing is best effort
                    self.provider.close()


def today() -> date:
    return datetime.now(UTC).date()
