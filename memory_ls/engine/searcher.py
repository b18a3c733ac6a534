"""The searcher: one search of a folder, from the request to its response. It indexes what
changed on disk (within a budget), asks the folder's route for the pipeline's answer (the local
index, or the team index first: ``route.py``), then reranks the best fused candidates when a
reranker is configured (``reranking.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import time

from ..index.schema import DatabaseError
from ..rerank import MAX_DOCUMENT_CHARS
from ..search.context import Outcome
from ..search.request import SearchRequest
from ..search.results import SearchResponse
from ..settings import QuerySettings
from .indexer import Indexer
from .providers import ProviderPolicy
from .reranking import RerankPolicy, apply_scores
from .route import Route

log = logging.getLogger(__name__)


class Searcher:
    def __init__(
        self, indexer: Indexer, policy: ProviderPolicy, rerank: RerankPolicy, route: Route
    ):
        self.indexer = indexer
        self.policy = policy
        self.rerank = rerank
        self.route = route

    def search(self, request: SearchRequest) -> SearchResponse:
        t0 = time.perf_counter()
        settings = self.indexer.settings
        req = request.resolved(settings.query)
        self.indexer.notice_other_writers()
        changed = set(self.indexer.dirty)
        try:
            self.route.sync_dirty(settings.sync.search_budget_ms / 1000, push=False)
        except (DatabaseError, OSError) as exc:  # a full disk: the index answers as it was
            log.warning("changed files not indexed (%s); searching the index as it is", exc)
        provider = self.policy.current
        fallback = self.policy.fallback_reason if provider else self.policy.reason
        out, why = self._reranked(req, settings.query, changed)
        return SearchResponse(
            results=out.hits,
            mode=out.mode,
            below_min_score=out.below_min_score,
            best_below=out.best_below,
            provider={"id": provider.id, "model": provider.model} if provider else None,
            fallback_reason=why or fallback,
            took_ms=(time.perf_counter() - t0) * 1000,
            explain=[{"folder": str(self.indexer.workspace.root), **out.explain}]
            if out.explain
            else None,
        )

    def _reranked(
        self, req: SearchRequest, qs: QuerySettings, changed: set[str]
    ) -> tuple[Outcome, str | None]:
        """The outcome, reranked when a reranker is configured and ready; else the fused one,
        with why the fused order stands (a degraded search or a failed rerank)."""
        rr = self.rerank
        if rr.current is None or not req.query.strip():
            return self.route.search(req, qs, changed)
        paused = rr.paused()
        if paused:
            out, why = self.route.search(req, qs, changed)
            return out, "; ".join(r for r in (why, paused) if r)
        # The best topN candidates, uncut, with their whole text (snippets shortened later).
        wide = dataclasses.replace(req, max_results=max(rr.top_n, req.limit), min_score=0.0)
        full = dataclasses.replace(
            qs, snippet_max_chars=max(qs.snippet_max_chars, MAX_DOCUMENT_CHARS)
        )
        out, why = self.route.search(wide, full, changed)
        if not out.hits:
            return out, why
        # The words alone, as they were embedded: a cross-encoder reads "-redis" as Redis.
        scores, failed = rr.scores(req.parsed.words, [h.snippet for h in out.hits])
        if scores is None:  # the fused order, exactly as without a reranker
            out, why = self.route.search(req, qs, set())
            return out, "; ".join(r for r in (why, failed) if r)
        return apply_scores(out, scores, req.threshold, req.limit, qs.snippet_max_chars), why
