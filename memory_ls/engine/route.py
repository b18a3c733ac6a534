"""Where a folder's index lives, chosen once when its engine is built: on this machine
(``LocalRoute``), or in a team index with this machine's index as its fallback
(``team.route.TeamRoute``). The engine asks its route and never tests which one it has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..index.sync import Progress, SyncReport
from ..search.context import Inputs, Outcome, Rerank
from ..search.pipeline import run as run_search
from ..search.request import SearchRequest
from ..search.results import SearchHit
from ..search.vector import SqliteVecIndex, VectorIndex
from ..settings import QuerySettings
from .excerpts import FileLines
from .indexer import Indexer
from .providers import ProviderPolicy

Answer = tuple[Outcome, str | None]  # a search's outcome, and why it degraded (or None)
RETRY_POLL_S = 5.0  # how often a timer asks whether the team index failed (no I/O)
RETRY_GAP_S = 1.0  # the least a timer waits between two tries of the team index


def retry_pause(wait: float | None) -> float:
    """How long a timer sleeps before it asks ``Route.retry_in`` again, given its last
    answer: a little past the cooldown's end, ``RETRY_GAP_S`` at least (a cooldown of 0 s
    must not spin), ``RETRY_POLL_S`` at most (a failure may start the cooldown meanwhile)."""
    if wait is None:
        return RETRY_POLL_S
    return min(max(wait + 0.05, RETRY_GAP_S), RETRY_POLL_S)


@dataclass
class IndexStatus:
    """The part of ``memory/status`` a route answers for: which store answers and its counts."""

    store: dict[str, Any]
    counts: dict[str, object]
    vector_backend: str
    fallback_reason: str | None


class Route(Protocol):
    def sync(
        self, reason: str, force: bool, progress: Progress | None, embed: bool, budget_s: float
    ) -> SyncReport: ...
    def embed_pending(
        self,
        progress: Progress | None,
        report: SyncReport | None,
        should_stop: Callable[[], bool] | None,
    ) -> int: ...
    def sync_dirty(self, budget_s: float | None, push: bool = True) -> SyncReport | None: ...
    def set_document(self, path: str | Path, text: str) -> bool: ...
    def clear_document(self, path: str | Path) -> None: ...
    def search(
        self, req: SearchRequest, qs: QuerySettings, changed: set[str], rerank: Rerank | None
    ) -> Answer: ...
    def place(self, hits: list[SearchHit]) -> None: ...
    def read_elsewhere(self, rel: str) -> FileLines | None: ...
    def status(self, local: IndexStatus) -> IndexStatus: ...
    def retry_in(self) -> float | None: ...
    def retry(self) -> None: ...
    def close(self) -> None: ...


class LocalRoute:
    """The folder's own SQLite index does everything."""

    def __init__(self, indexer: Indexer, policy: ProviderPolicy):
        self.indexer = indexer
        self.policy = policy

    def sync(
        self, reason: str, force: bool, progress: Progress | None, embed: bool, budget_s: float
    ) -> SyncReport:
        return self.indexer.sync(reason, force, progress, embed)

    def embed_pending(
        self,
        progress: Progress | None,
        report: SyncReport | None,
        should_stop: Callable[[], bool] | None,
    ) -> int:
        return self.indexer.embed_pending(progress, report, should_stop)

    def sync_dirty(self, budget_s: float | None, push: bool = True) -> SyncReport | None:
        return self.indexer.sync_dirty(budget_s)

    def set_document(self, path: str | Path, text: str) -> bool:
        return self.indexer.set_document(path, text)

    def clear_document(self, path: str | Path) -> None:
        self.indexer.clear_document(path)

    def search(
        self, req: SearchRequest, qs: QuerySettings, changed: set[str], rerank: Rerank | None
    ) -> Answer:
        """The search on a reader connection of the local index (never waiting for the
        writer), with the in-memory matrix or sqlite-vec answering the vector side."""
        ix = self.indexer
        use = not ix.keyword_only
        qvec, why = query_vector(self.policy, req, rebuilding=ix.needs_rebuild, use=use)
        wait = ix.settings.sync.search_budget_ms / 1000
        with ix.reader() as store:
            vectors: VectorIndex | SqliteVecIndex = ix.vectors
            # Until the next sync has built sqlite-vec's table, the matrix answers.
            if ix.settings.store.vector_backend == "sqlite-vec" and store.vec_table_ready():
                vectors = SqliteVecIndex(store)
            elif qvec is not None and req.mode == "auto" and not ix.vectors.ready(wait):
                # A search that asks for no mode does not wait for seconds of loading.
                qvec, why = None, "the vectors are still loading; keyword results meanwhile"
            calibrate = qvec is not None and qs.calibrate != "off"
            reference = ix.reference_vectors() if calibrate else None
            return run_search(Inputs(store, vectors, qvec, req, qs, reference, rerank)), why

    def place(self, hits: list[SearchHit]) -> None:
        """Every hit of a local index is a file of this machine."""

    def read_elsewhere(self, rel: str) -> FileLines | None:
        return None  # a file not on this machine is nowhere else either

    def status(self, local: IndexStatus) -> IndexStatus:
        return local

    def retry_in(self) -> float | None:
        return None  # nothing to try again: this machine's index is always there

    def retry(self) -> None:
        pass

    def close(self) -> None:
        pass


def query_vector(
    policy: ProviderPolicy, req: SearchRequest, *, rebuilding: bool, use: bool
) -> tuple[np.ndarray | None, str | None]:
    """The query's vector, or None and why not (keyword mode, no model, a pending rebuild)."""
    provider = policy.current
    # The words alone: filters (``file:``, ``after:``, ``-excluded``) are no meaning, and
    # an excluded word embedded with them pulled the vector towards what it excludes.
    words = req.parsed.words
    if not use or provider is None or req.mode == "keyword" or not words.strip():
        return None, None
    if rebuilding:
        # The stored vectors belong to the previous model until the rebuild has run.
        return None, "the index is waiting for a rebuild for the new model; keyword results only"
    return policy.query_vector(words)
