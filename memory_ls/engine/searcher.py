"""The searcher: decides whether a query gets a vector and which backend answers, runs hybrid
search on a reader connection (never waiting for the writer), then reranks the best fused
candidates when a reranker is configured (``reranking.py``).

With a team index (``store.backend = "postgres"``) PostgreSQL answers, its vectors searched by
pgvector, with the editor's unsaved text searched beside it (``unsaved.py``); when it cannot,
the folder's local index answers and the response says why.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

import numpy as np

from ..index.schema import DatabaseError
from ..rerank import MAX_DOCUMENT_CHARS
from ..search.context import Inputs, Outcome, Scale
from ..search.pipeline import run as run_search
from ..search.request import SearchRequest
from ..search.results import SearchResponse
from ..search.vector import SqliteVecIndex, VectorIndex
from ..settings import QuerySettings
from . import removals
from .indexer import Indexer
from .providers import ProviderPolicy
from .reranking import RerankPolicy, apply_scores
from .unsaved import UnsavedText, merge, moved

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..index.postgres import PgStore
    from .primary import Primary


class Searcher:
    def __init__(
        self,
        indexer: Indexer,
        policy: ProviderPolicy,
        rerank: RerankPolicy,
        primary: Primary | None = None,
    ):
        self.indexer = indexer
        self.policy = policy
        self.rerank = rerank
        self.primary = primary
        self.unsaved = UnsavedText(indexer, primary) if primary is not None else None

    def search(self, request: SearchRequest) -> SearchResponse:
        t0 = time.perf_counter()
        settings = self.indexer.settings
        req = request.resolved(settings.query)
        self.indexer.notice_other_writers()
        changed = set(self.indexer.dirty)
        team = self.primary is not None and bool(changed)
        try:
            before = removals.held(self.indexer, changed) if team else {}
            self.indexer.sync_dirty(settings.sync.search_budget_ms / 1000)
            removals.record(self.indexer, before)
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
            return self._fused(req, qs, changed)
        paused = rr.paused()
        if paused:
            out, why = self._fused(req, qs, changed)
            return out, "; ".join(r for r in (why, paused) if r)
        # The best topN candidates, uncut, with their whole text (snippets shortened later).
        wide = dataclasses.replace(req, max_results=max(rr.top_n, req.limit), min_score=0.0)
        full = dataclasses.replace(
            qs, snippet_max_chars=max(qs.snippet_max_chars, MAX_DOCUMENT_CHARS)
        )
        out, why = self._fused(wide, full, changed)
        if not out.hits:
            return out, why
        # The words alone, as they were embedded: a cross-encoder reads "-redis" as Redis.
        scores, failed = rr.scores(req.parsed.words, [h.snippet for h in out.hits])
        if scores is None:  # the fused order, exactly as without a reranker
            out, why = self._fused(req, qs, set())
            return out, "; ".join(r for r in (why, failed) if r)
        return apply_scores(out, scores, req.threshold, req.limit, qs.snippet_max_chars), why

    def _fused(
        self, req: SearchRequest, qs: QuerySettings, changed: set[str]
    ) -> tuple[Outcome, str | None]:
        """Hybrid search on the team index when there is one and it answers, else locally."""
        if self.primary is not None:
            answered = self._on_primary(req, qs, changed)
            if answered is not None:
                return answered
        check = not self.indexer.keyword_only
        qvec, why = self._query_vector(req, rebuilding=self.indexer.needs_rebuild, use=check)
        wait = self.indexer.settings.sync.search_budget_ms / 1000
        with self.indexer.reader() as store:
            vectors: VectorIndex | SqliteVecIndex = self.indexer.vectors
            # Until the next sync has built sqlite-vec's table, the matrix answers.
            if self.indexer.settings.store.vector_backend == "sqlite-vec" and (
                store.vec_table_ready()
            ):
                vectors = SqliteVecIndex(store)
            elif qvec is not None and req.mode == "auto" and not self.indexer.vectors.ready(wait):
                # A search that asks for no mode does not wait for seconds of loading.
                qvec, why = None, "the vectors are still loading; keyword results meanwhile"
            calibrate = qvec is not None and qs.calibrate != "off"
            reference = self.indexer.reference_vectors() if calibrate else None
            out = run_search(Inputs(store, vectors, qvec, req, qs, reference))
        if self.primary is not None:
            why = "; ".join(r for r in (self.primary.fallback_reason(), why) if r)
        return out, why

    def _on_primary(
        self, req: SearchRequest, qs: QuerySettings, changed: set[str]
    ) -> tuple[Outcome, str | None] | None:
        """The team index's answer, None when it cannot give one (it is then cooling down)."""
        primary = self.primary
        assert primary is not None
        db = primary.ready(self.indexer, changed)
        if db is None:
            return None
        qvec, why = self._query_vector(req, rebuilding=False, use=True)
        # Before the read: it may wait for a push and embed, which is not the read's budget.
        calibrate = qvec is not None and qs.calibrate != "off"
        reference = primary.reference_vectors(db) if calibrate else None

        unsaved = self.unsaved.paths() if self.unsaved is not None else frozenset()

        # For the unsaved text's BM25: the team's average chunk length, and its chunks of the
        # unsaved files (their words are in the team's counts, to be taken out).
        avgdl: list[float] = []
        saved: list[str] = []
        asked: list[Inputs] = []  # the team search's inputs, for the unsaved text's

        def answer(store: PgStore, scale: Scale | None = None) -> Outcome:
            if unsaved and not avgdl:
                avgdl.append(store.keyword_totals()[1])
                saved.extend(store.chunk_texts(unsaved))
            # ``exclude``: the unsaved files, searched beside: ``merge`` gates both lists as one.
            vectors = SqliteVecIndex(store)
            ask = Inputs(store, vectors, qvec, req, qs, reference, scale, unsaved, gate=not unsaved)
            asked.append(ask)
            return run_search(ask)

        out = primary.read(answer)
        if out is None:
            return None
        if self.unsaved is not None and unsaved:
            team = dataclasses.replace(out.scale, avgdl=avgdl[0] if avgdl else 1.0)
            mine = self.unsaved.search(dataclasses.replace(asked[0], scale=team), saved, unsaved)
            if moved(out.scale, mine.scale):  # the team's hits scored again against them
                again = primary.read(lambda store: answer(store, mine.scale), cooldown=False)
                out = again or out
            out = merge(out, mine, req.limit, req.threshold, qs.source_balance)
        return out, why

    def _query_vector(
        self, req: SearchRequest, *, rebuilding: bool, use: bool
    ) -> tuple[np.ndarray | None, str | None]:
        provider = self.policy.current
        # The words alone: filters (``file:``, ``after:``, ``-excluded``) are no meaning, and
        # an excluded word embedded with them pulled the vector towards what it excludes.
        words = req.parsed.words
        if not use or provider is None or req.mode == "keyword" or not words.strip():
            return None, None
        if rebuilding:
            # The stored vectors belong to the previous model until the rebuild has run.
            return (
                None,
                "the index is waiting for a rebuild for the new model; keyword results only",
            )
        return self.policy.query_vector(words)
