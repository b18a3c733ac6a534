"""The searcher: decides whether a query gets a vector and which vector backend answers,
then runs hybrid search on a reader connection (never waiting for the writer)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from ..search.hybrid import run as run_search
from ..search.request import SearchRequest
from ..search.results import SearchResponse
from ..search.vector import SqliteVecIndex, VectorIndex
from .indexer import Indexer
from .providers import ProviderPolicy


class Searcher:
    def __init__(self, indexer: Indexer, policy: ProviderPolicy):
        self.indexer = indexer
        self.policy = policy

    def search(self, request: SearchRequest) -> SearchResponse:
        t0 = time.perf_counter()
        settings = self.indexer.settings
        req = request.resolved(settings.query)
        self.indexer.notice_other_writers()
        self.indexer.sync_dirty(settings.sync.search_budget_ms / 1000)
        provider = self.policy.current
        fallback = self.policy.fallback_reason if provider else self.policy.reason
        qvec = None
        if provider is not None and req.mode != "keyword" and req.query.strip():
            if self.indexer.needs_rebuild:
                # The stored vectors belong to the previous model until the rebuild has run.
                fallback = (
                    "the index is waiting for a rebuild for the new model; keyword results only"
                )
            else:
                qvec, why = self.policy.query_vector(req.query)
                fallback = why or fallback
        with self.indexer.reader() as store:
            vectors: VectorIndex | SqliteVecIndex = self.indexer.vectors
            if settings.store.vector_backend == "sqlite-vec" and store.vec_reason is None:
                vectors = SqliteVecIndex(store)
            reference = (
                self.indexer.reference_vectors()
                if qvec is not None and settings.query.calibrate
                else None
            )
            out = run_search(
                store, vectors, qvec, req, settings.query, datetime.now(UTC).date(), reference
            )
        return SearchResponse(
            results=out.hits,
            mode=out.mode,
            below_min_score=out.below_min_score,
            best_below=out.best_below,
            provider={"id": provider.id, "model": provider.model} if provider else None,
            fallback_reason=fallback,
            took_ms=(time.perf_counter() - t0) * 1000,
        )
