"""Keeping the store in step with the files: the keyword phase and the vector phase.

The keyword phase (chunk, FTS5, vectors reused from the file's old chunks and from the cache)
is fast and makes the text searchable at once. The vector phase embeds whatever is still
pending in batches, one committed transaction a batch, so it can be interrupted anywhere
(a kill -9, an edit, a shutdown) and resumed without losing what was paid for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..chunking import ChunkLimits, chunk_text, split_lines
from ..embeddings.base import EmbeddingProvider
from ..sources import SourceError, render
from ..sources.dates import file_date
from ..sources.markdown import content_hash, read_bytes
from ..sources.sessions import sync_action as session_sync_action
from ..workspace import MemoryFile, Workspace
from .store import CacheKey, Store, from_blob, to_blob

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]  # (done, total, message)
VectorUpdate = Callable[[Sequence[int], Sequence[tuple[int, np.ndarray]]], None]
FILES_PER_TRANSACTION = 200


@dataclass
class SyncReport:
    reason: str
    full: bool = False
    started_at: float = field(default_factory=time.time)
    duration_ms: float = 0.0
    files: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    embedded: int = 0
    cache_hits: int = 0
    skipped: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "reason": self.reason,
            "full": self.full,
            "startedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "durationMs": round(self.duration_ms, 1),
            "files": self.files,
            "indexed": self.indexed,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "embedded": self.embedded,
            "cacheHits": self.cache_hits,
            "skipped": self.skipped,
        }


@dataclass
class IndexContext:
    workspace: Workspace
    limits: ChunkLimits
    cache_key: CacheKey | None  # None: no provider, keyword-only
    cache_enabled: bool
    max_file_bytes: int
    on_vectors: VectorUpdate | None = None


def index_text(
    store: Store, ctx: IndexContext, mf: MemoryFile, data: bytes, mtime: float, report: SyncReport
) -> None:
    """Index one file's bytes (from disk or an editor buffer); call inside a transaction."""
    try:
        src = render(mf, data)
    except SourceError as exc:
        log.warning("%s", exc)
        report.skipped.append(str(exc))
        _drop(store, ctx, mf.path)
        return
    lines = split_lines(src.text)
    chunks = chunk_text(src.text, ctx.limits, list(src.line_map) if src.line_map else None)
    known = store.chunk_embeddings(mf.path)
    if ctx.cache_key and ctx.cache_enabled:
        wanted = [c.hash for c in chunks if c.hash not in known]
        if wanted:
            hits = store.cache_get(ctx.cache_key, wanted)
            report.cache_hits += len(hits)
            known.update(hits)
    if not ctx.cache_key:
        known = {}
    model = ctx.cache_key[1] if ctx.cache_key else ""
    removed, added = store.replace_chunks(mf.path, mf.source, chunks, known, model)
    d = file_date(mf.path, mtime)
    store.upsert_file(
        mf.path,
        mf.source,
        content_hash(data),
        mtime,
        len(data),
        d.isoformat() if d else None,
        len(lines),
        src.line_map,
    )
    report.indexed += 1
    if ctx.on_vectors:
        ctx.on_vectors(removed, [(cid, from_blob(b)) for cid, b in added if b is not None])


def _drop(store: Store, ctx: IndexContext, path: str) -> None:
    removed = store.delete_file(path)
    if ctx.on_vectors and removed:
        ctx.on_vectors(removed, [])


def remove_file(store: Store, ctx: IndexContext, path: str) -> None:
    _drop(store, ctx, path)


def sync_keyword(
    store: Store,
    ctx: IndexContext,
    overlays: dict[str, str],
    report: SyncReport,
    progress: Progress | None = None,
    only: set[str] | None = None,
) -> None:
    """Bring files, chunks and FTS in line with the disk (and open buffers)."""
    ws = ctx.workspace
    if only is None:
        found = {mf.path: mf for mf in ws.discover()}
        candidates = overlays.keys() - found.keys()
    else:
        found, candidates = {}, set(only)  # a few known paths: no need to walk the tree
    for path in candidates:
        mf = ws.classify(path)
        if mf and (path in overlays or ws.is_memory_file(mf)):
            found[path] = mf
    states = store.file_states()
    if only is not None:
        states = {p: s for p, s in states.items() if p in only}
    report.files = len(found)
    todo = sorted(found)
    done = 0
    for i in range(0, len(todo), FILES_PER_TRANSACTION):
        with store.transaction():
            for path in todo[i : i + FILES_PER_TRANSACTION]:
                _sync_one(store, ctx, found[path], states.get(path), overlays.get(path), report)
                done += 1
        if progress:
            progress(done, len(todo), "indexing")
    gone = [p for p in states if p not in found]
    if gone:
        with store.transaction():
            for path in gone:
                _drop(store, ctx, path)
                report.removed += 1


def _sync_one(store, ctx, mf: MemoryFile, state, overlay: str | None, report: SyncReport) -> None:
    if overlay is not None:
        data = overlay.encode("utf-8", "surrogatepass")
        if state and state.hash == content_hash(data):
            report.unchanged += 1
            return
        index_text(store, ctx, mf, data, time.time(), report)
        return
    try:
        st = mf.abs_path.stat()
    except FileNotFoundError:  # deleted while we looked
        if state:
            _drop(store, ctx, mf.path)
            report.removed += 1
        return
    if mf.source == "sessions":
        s = ctx.workspace.settings
        action = session_sync_action(
            mf.abs_path,
            st.st_size,
            st.st_mtime,
            state.size if state else None,
            s.sync.sessions.delta_bytes,
            s.sync.sessions.delta_messages,
            s.sessions.retention_days,
        )
        if action == "drop":  # past sessions.retentionDays: out of the index, not off disk
            if state:
                _drop(store, ctx, mf.path)
                report.removed += 1
            return
        if action == "wait":  # a live transcript below both delta thresholds
            report.unchanged += 1
            return
    if state and state.mtime == st.st_mtime and state.size == st.st_size:
        report.unchanged += 1
        return
    try:
        data = read_bytes(mf.abs_path, ctx.max_file_bytes)
    except FileNotFoundError:
        return
    except SourceError as exc:
        log.warning("%s", exc)
        report.skipped.append(str(exc))
        if state:
            _drop(store, ctx, mf.path)
        return
    if state and state.hash == content_hash(data):
        store.touch_file(mf.path, st.st_mtime, st.st_size)
        report.unchanged += 1
        return
    index_text(store, ctx, mf, data, st.st_mtime, report)


def embed_pending(
    store: Store,
    provider: EmbeddingProvider,
    ctx: IndexContext,
    lock,
    report: SyncReport,
    progress: Progress | None = None,
    batch_size: int = 64,
    should_stop: Callable[[], bool] | None = None,
) -> None:
    """Embed every chunk without a vector. The model runs outside ``lock``; writes inside it."""
    assert ctx.cache_key is not None
    with lock:
        total = store.count_pending()
    done = 0
    while not (should_stop and should_stop()):
        with lock:
            rows = store.pending_chunks(batch_size)
        if not rows:
            break
        texts = {h: t for _, h, t in rows}
        with lock:
            # A batch-API backfill (or another process) may have paid for these already.
            by_hash = store.cache_get(ctx.cache_key, list(texts))
        report.cache_hits += len(by_hash)
        todo = [h for h in texts if h not in by_hash]
        dims = 0
        if todo:
            vecs = provider.embed_documents([texts[h] for h in todo])
            if vecs.shape[0] != len(todo):
                raise ValueError("provider returned the wrong number of vectors")
            fresh = {h: to_blob(v) for h, v in zip(todo, vecs, strict=True)}
            by_hash.update(fresh)
            dims = int(vecs.shape[1])
        else:
            fresh = {}
            dims = len(from_blob(next(iter(by_hash.values()))))
        with lock, store.transaction():
            store.ensure_vec_table(dims)
            if ctx.cache_enabled and fresh:
                store.cache_put(ctx.cache_key, list(fresh.items()))
            live = store.still_pending([cid for cid, _, _ in rows])
            items = [(cid, by_hash[h]) for cid, h, _ in rows if cid in live]
            store.set_embeddings(items, ctx.cache_key[1])
        if ctx.on_vectors:
            ctx.on_vectors([], [(cid, from_blob(b)) for cid, b in items])
        report.embedded += len(items)
        done += len(rows)
        if progress:
            progress(min(done, total), max(total, done), "embedding")
