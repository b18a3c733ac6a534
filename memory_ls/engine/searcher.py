"""The searcher: decides whether a query gets a vector and which backend answers, then runs
hybrid search on a reader connection (never waiting for the writer).

With a team index (``store.backend = "postgres"``) PostgreSQL answers, its vectors searched by
pgvector; when it cannot, the folder's local index answers and the response says why.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from ..index.backend import IndexBackend
from ..search.hybrid import Outcome
from ..search.hybrid import run as run_search
from ..search.request import SearchRequest
from ..search.results import SearchResponse
from ..search.vector import SqliteVecIndex, VectorIndex
from .indexer import Indexer
from .providers import ProviderPolicy

if TYPE_CHECKING:
    from .primary import Primary


class Searcher:
    def __init__(self, indexer: Indexer, policy: ProviderPolicy, primary: Primary | None = None):
        self.indexer = indexer
        self.policy = policy
        self.primary = primary

    def search(self, request: SearchRequest) -> SearchResponse:
        t0 = time.perf_counter()
        settings = self.indexer.settings
        req = request.resolved(settings.query)
        self.indexer.notice_other_writers()
        changed = set(self.indexer.dirty)
        self.indexer.sync_dirty(settings.sync.search_budget_ms / 1000)
        provider = self.policy.current
        fallback = self.policy.fallback_reason if provider else self.policy.reason
        out = self._on_primary(req, changed) if self.primary is not None else None
        if out is not None:
            out, why = out
        else:
            check = not self.indexer.keyword_only
            qvec, why = self._query_vector(req, rebuilding=self.indexer.needs_rebuild, use=check)
            with self.indexer.reader() as store:
                vectors: VectorIndex | SqliteVecIndex = self.indexer.vectors
                if settings.store.vector_backend == "sqlite-vec" and store.vec_reason is None:
                    vectors = SqliteVecIndex(store)
                reference = self.indexer.reference_vectors() if qvec is not None else None
                out = self._run(store, vectors, qvec, req, reference)
            if self.primary is not None:
                why = "; ".join(r for r in (self.primary.fallback_reason(), why) if r)
        return SearchResponse(
            results=out.hits,
            mode=out.mode,
            below_min_score=out.below_min_score,
            best_below=out.best_below,
            provider={"id": provider.id, "model": provider.model} if provider else None,
            fallback_reason=why or fallback,
            took_ms=(time.perf_counter() - t0) * 1000,
        )

    def _on_primary(
        self, req: SearchRequest, changed: set[str]
    ) -> tuple[Outcome, str | None] | None:
        """The team index's answer, None when it cannot give one (it is then cooling down)."""
        primary = self.primary
        assert primary is not None
        db = primary.ready(self.indexer, changed)
        if db is None:
            return None
        qvec, why = self._query_vector(req, rebuilding=False, use=True)

        def answer(store: IndexBackend) -> Outcome:
            reference = primary.reference_vectors(db) if qvec is not None else None
            return self._run(store, SqliteVecIndex(store), qvec, req, reference)

        out = primary.read(answer)
        return (out, why) if out is not None else None

    def _query_vector(
        self, req: SearchRequest, *, rebuilding: bool, use: bool
    ) -> tuple[np.ndarray | None, str | None]:
        provider = self.policy.current
        if not use or provider is None or req.mode == "keyword" or not req.query.strip():
            return None, None
        if rebuilding:
            # The stored vectors belong to the previous model until the rebuild has run.
            return (
                None,
                "the index is waiting for a rebuild for the new model; keyword results only",
            )
        return self.policy.query_vector(req.query)

    def _run(
        self,
        store: IndexBackend,
        vectors: VectorIndex | SqliteVecIndex,
        qvec: np.ndarray | None,
        req: SearchRequest,
        reference: np.ndarray | None,
    ) -> Outcome:
        settings = self.indexer.settings
        today = datetime.now(UTC).date()
        return run_search(store, vectors, qvec, req, settings.query, today, reference)
