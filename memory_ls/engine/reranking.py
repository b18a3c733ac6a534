"""Reranking in a search: whether the reranker is asked, and what a failure means.

The search pipeline's select stage (``search/select.py``) hands the best ``rerank.topN`` fused
candidates (at least ``maxResults``, with no minScore cut), their text up to
``MAX_DOCUMENT_CHARS``, to the reranker a search gets here (``RerankPolicy.for_search``). Its
relevance becomes each hit's score (the fused score is kept as ``fused_score``), then
``minScore`` and ``maxResults`` apply with the pipeline's own rule. A failed rerank, whatever
the cause (timeout, HTTP error, malformed answer, local model error), answers with the fused
order exactly as a search without a reranker would, gives a short reason, and pauses reranking
for a cooldown so a dead endpoint does not cost every search its budget.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..rerank import MAX_DOCUMENT_CHARS, Reranker, RerankError, create_reranker
from ..settings import Settings
from .providers import AUTO

log = logging.getLogger(__name__)
RERANK_FAILURE_COOLDOWN_S = 30.0
REASON_CHARS = 240  # a fallbackReason stays one readable line


class RerankPolicy:
    """The reranker of one engine (or None), its cooldown after failures and its counters."""

    def __init__(
        self,
        settings: Settings,
        reranker: Reranker | None = AUTO,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if reranker is AUTO:
            reranker, self.reason = create_reranker(settings)
            if self.reason:
                log.warning("reranking off: %s", self.reason)
        else:
            self.reason = None
        self.current: Reranker | None = reranker
        self.top_n = max(1, settings.rerank.top_n)
        self._clock = clock
        self._lock = threading.Lock()
        self._retry_at = 0.0
        self._failure: str | None = None
        self._counts = {"reranked": 0, "fallbacks": 0, "paused": 0}

    def for_search(self, query: str, snippet_chars: int) -> tuple[SearchRerank | None, str | None]:
        """The reranker a search gets (None: none, a blank query, or paused after a failure),
        and why it is paused."""
        if self.current is None or not query.strip():
            return None, None
        paused = self.paused()
        if paused:
            return None, paused
        return SearchRerank(self, self.top_n, max(snippet_chars, MAX_DOCUMENT_CHARS)), None

    def paused(self) -> str | None:
        """Why reranking is skipped right now (a recent failure), or None."""
        with self._lock:
            left = self._retry_at - self._clock()
            if self._failure is None or left <= 0:
                return None
            self._counts["paused"] += 1
            return f"reranking paused for {left:.0f} s after a failure ({self._failure})"

    def scores(self, query: str, documents: Sequence[str]) -> tuple[list[float] | None, str | None]:
        """(one relevance per document, None), or (None, why the fused order answers)."""
        reranker = self.current
        assert reranker is not None, "ask only with a reranker"
        try:
            scores = reranker.rerank(query, documents)
            if len(scores) != len(documents):
                raise RerankError(f"{reranker.id}: {len(scores)} scores for {len(documents)}")
        except RerankError as exc:
            failure = _short(str(exc))
            with self._lock:
                self._retry_at = self._clock() + RERANK_FAILURE_COOLDOWN_S
                self._failure = failure
                self._counts["fallbacks"] += 1
            log.warning("rerank failed: %s; answering in fused order", failure)
            return None, f"rerank failed ({failure}); fused order"
        with self._lock:
            self._failure = None
            self._counts["reranked"] += 1
        return scores, None

    def status(self) -> dict[str, Any]:
        r = self.current
        with self._lock:
            counts = dict(self._counts)
            failure = self._failure
        return {
            "reranker": {"id": r.id, "model": r.model, "topN": self.top_n} if r else None,
            "rerankerReason": self.reason,
            "rerankerStats": {**r.stats_snapshot(), **counts, "lastFailure": failure}
            if r
            else None,
        }

    def close(self) -> None:
        if self.current is not None:
            with contextlib.suppress(Exception):  # closing is best effort
                self.current.close()


@dataclasses.dataclass
class SearchRerank:
    """The reranker of one search (``search.context.Rerank``); ``failed``: why it failed."""

    policy: RerankPolicy
    top_n: int
    max_chars: int
    failed: str | None = None

    def __call__(self, query: str, texts: Sequence[str]) -> list[float] | None:
        scores, self.failed = self.policy.scores(query, texts)
        return scores


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3] + "..."
