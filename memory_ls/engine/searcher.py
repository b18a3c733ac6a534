"""The searcher: decides whether a query gets a vector and which vector backend answers,
runs hybrid search on a reader connection (never waiting for the writer), then reranks the
best fused candidates when a reranker is configured (``reranking.py``)."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime

import numpy as np

from ..rerank import MAX_DOCUMENT_CHARS
from ..search.hybrid import Outcome
from ..search.hybrid import run as run_search
from ..search.request import SearchRequest
from ..search.results import SearchResponse
from ..search.vector import SqliteVecIndex, VectorIndex
from ..settings import QuerySettings
from .indexer import Indexer
from .providers import ProviderPolicy
from .reranking import RerankPolicy, apply_scores


class Searcher:
    def __init__(self, indexer: Indexer, policy: ProviderPolicy, rerank: RerankPolicy):
        self.indexer = indexer
        self.policy = policy
        self.rerank = rerank

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
        out, why_fused = self._reranked(req, qvec, settings.query)
        if why_fused:
            fallback = f"{fallback}; {why_fused}" if fallback else why_fused
        return SearchResponse(
            results=out.hits,
            mode=out.mode,
            below_min_score=out.below_min_score,
            best_below=out.best_below,
            provider={"id": provider.id, "model": provider.model} if provider else None,
            fallback_reason=fallback,
            took_ms=(time.perf_counter() - t0) * 1000,
        )

    def _reranked(
        self, req: SearchRequest, qvec: np.ndarray | None, qs: QuerySettings
    ) -> tuple[Outcome, str | None]:
        """The outcome, reranked when a reranker is configured and ready; else the fused one
        and why the reranker did not order it (None when there is no reranker)."""
        rr = self.rerank
        if rr.current is None or not req.query.strip():
            return self._fused(req, qvec, qs), None
        paused = rr.paused()
        if paused:
            return self._fused(req, qvec, qs), paused
        # The best topN candidates, uncut, with their whole text (snippets shortened later).
        wide = dataclasses.replace(req, max_results=max(rr.top_n, req.limit), min_score=0.0)
        full = dataclasses.replace(
            qs, snippet_max_chars=max(qs.snippet_max_chars, MAX_DOCUMENT_CHARS)
        )
        out = self._fused(wide, qvec, full)
        if not out.hits:
            return out, None
        scores, why = rr.scores(req.query, [h.snippet for h in out.hits])
        if scores is None:  # the fused order, exactly as without a reranker
            return self._fused(req, qvec, qs), why
        return apply_scores(out, scores, req.threshold, req.limit, qs.snippet_max_chars), None

    def _fused(self, req: SearchRequest, qvec: np.ndarray | None, qs: QuerySettings) -> Outcome:
        settings = self.indexer.settings
        with self.indexer.reader() as store:
            vectors: VectorIndex | SqliteVecIndex = self.indexer.vectors
            if settings.store.vector_backend == "sqlite-vec" and store.vec_reason is None:
                vectors = SqliteVecIndex(store)
            reference = (
                self.indexer.reference_vectors()
                if qvec is not None and settings.query.calibrate
                else None
            )
            return run_search(store, vectors, qvec, req, qs, datetime.now(UTC).date(), reference)
