"""The vector phase: embed pending chunks in committed batches, the model outside the lock."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from ..embeddings.base import EmbeddingProvider
from .backend import IndexBackend
from .rows import from_blob, to_blob
from .writes import IndexContext, Progress, SyncReport, vectors_changed


def embed_pending(
    store: IndexBackend,
    provider: EmbeddingProvider,
    ctx: IndexContext,
    lock: AbstractContextManager[object],
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
            by_hash = store.cache.get(ctx.cache_key, list(texts))
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
            live = store.still_pending([(cid, h) for cid, h, _ in rows])
            items = [(cid, by_hash[h]) for cid, h, _ in rows if cid in live]
            store.set_embeddings(items, ctx.cache_key[1])
            if ctx.cache_enabled and fresh:  # after: a store may skip what chunks now hold
                store.cache.put(ctx.cache_key, list(fresh.items()))
        vectors_changed(store, ctx, [], [(cid, b) for cid, b in items])
        report.embedded += len(items)
        done += len(rows)
        if progress:
            progress(min(done, total), max(total, done), "embedding")
