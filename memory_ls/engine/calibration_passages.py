"""The calibration passages (search/calibrate.py) as the current model embeds them.

From the embedding cache, else embedded once (outside the writer lock) and cached. Asked for by
the first search with a query vector, not by syncs: a backfill through a batch API must not
send synchronous requests.
"""

from __future__ import annotations

import logging

import numpy as np

from ..chunking import text_hash
from ..embeddings.base import EmbeddingError, EmbeddingProvider, normalize
from ..index.rows import from_blob, to_blob
from ..search.calibrate import REFERENCE_PASSAGES
from .embed_target import EmbedTarget

log = logging.getLogger(__name__)


def reference_vectors(provider: EmbeddingProvider | None, target: EmbedTarget) -> np.ndarray | None:
    key, store = target.ctx.cache_key, target.store
    if provider is None or key is None:
        return None
    hashes = [text_hash(t) for t in REFERENCE_PASSAGES]
    with target.lock:
        known = store.cache.get(key, hashes)
    missing = [(h, t) for h, t in zip(hashes, REFERENCE_PASSAGES, strict=True) if h not in known]
    if missing:
        try:
            vecs = normalize(provider.embed_documents([t for _, t in missing]))
        except EmbeddingError as exc:
            log.warning(
                "calibration passages not embedded (%s); the corpus alone is the background", exc
            )
            return None
        fresh = [(h, to_blob(v)) for (h, _), v in zip(missing, vecs, strict=True)]
        with target.lock, store.transaction():
            store.cache.put(key, fresh)
        known.update(fresh)
    return np.stack([from_blob(known[h]) for h in hashes])
