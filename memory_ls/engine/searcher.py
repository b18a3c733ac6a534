"""The searcher: one search of a folder, from the request to its response. It indexes what
changed on disk (within a budget) and asks the folder's route for the pipeline's answer (the
local index, or the team index first: ``route.py``), with the reranker when one is configured
(``reranking.py``).
"""

from __future__ import annotations

import logging
import time

from ..index.schema import DatabaseError
from ..search.request import SearchRequest
from ..search.results import SearchResponse
from .indexer import Indexer
from .providers import ProviderPolicy
from .reranking import RerankPolicy
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
        qs = settings.query
        rerank, paused = self.rerank.for_search(req.query, qs.snippet_max_chars)
        out, why = self.route.search(req, qs, changed, rerank)
        failed = rerank.failed if rerank is not None else None
        why = "; ".join(r for r in (why, paused, failed) if r) or None
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
