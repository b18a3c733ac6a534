"""The vector phase: embed pending chunks in committed batches, the model outside the lock;
then the lines of those chunks (``line_vectors.py``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import numpy as np

from ..embeddings.base import EmbeddingProvider
from .backend import IndexBackend
from .line_vectors import ChunkLines, segments
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
            # At the commit, inside the lock: told later, another process's delete that the
            # in-memory vectors followed meanwhile would be undone by these, for good.
            vectors_changed(store, ctx, [], [(cid, b) for cid, b in items])
        report.embedded += len(items)
        done += len(rows)
        if progress:
            progress(min(done, total), max(total, done), "embedding")


def embed_lines(
    store: IndexBackend,
    provider: EmbeddingProvider,
    lock: AbstractContextManager[object],
    max_chunks: int,
    progress: Progress | None = None,
    batch_size: int = 64,
    should_stop: Callable[[], bool] | None = None,
    readable: Callable[[str], bool] | None = None,
) -> int:
    """Embed the lines of every chunk that has its vector but not its lines' yet, while the
    index holds at most ``max_chunks`` chunks; past that, drop every line vector (a search
    then scores all chunks alike, by their own vectors), unless other clients share them.
    Lines that ``readable`` refuses get none (an English model's vector of a Chinese line is
    noise). Returns the lines embedded."""
    lines = store.lines
    if lines is None:
        return 0
    with lock:
        if lines.over(max_chunks):
            if lines.any() and not lines.shared:
                with store.transaction():
                    lines.drop_all()
            return 0
        total = lines.count_pending()
    done = embedded = 0
    while not (should_stop and should_stop()):
        with lock:
            rows = lines.pending(max(1, batch_size // 8))  # about 8 lines a chunk
        if not rows:
            break
        parts = {cid: segments(text, readable) for cid, _, text in rows}
        texts = list(dict.fromkeys(t for segs in parts.values() for _, t in segs))
        vecs: dict[str, np.ndarray] = {}
        for i in range(0, len(texts), batch_size):
            batch = texts[i : i + batch_size]
            out = provider.embed_documents(batch)
            if out.shape[0] != len(batch):
                raise ValueError("provider returned the wrong number of vectors")
            vecs.update(zip(batch, np.asarray(out, dtype=np.float32), strict=True))
        found = {
            cid: ChunkLines(np.array([r for r, _ in segs]), np.stack([vecs[t] for _, t in segs]))
            for cid, segs in parts.items()
            if segs
        }
        with lock, store.transaction():
            lines.put([(cid, h) for cid, h, _ in rows], found)
        embedded += len(texts)
        done += len(rows)
        if progress:
            progress(min(done, total), max(total, done), "embedding lines")
    return embedded
