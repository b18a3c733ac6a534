"""The team route: the team index answers while it can, the folder's own SQLite index (kept
in step, keyword-only) when it cannot, and every answer says why. Files deleted here are
remembered until the team index has heard of them (``removals.py``); an editor's unsaved text
never leaves this machine and is searched beside the team's answer (``unsaved.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...index.postgres import PgStore
from ...index.sync import Progress, SyncReport
from ...search.context import Inputs, Outcome, Scale
from ...search.pipeline import run as run_search
from ...search.request import SearchRequest
from ...search.results import SearchHit
from ...search.vector import SqliteVecIndex
from ...settings import QuerySettings
from ...workspace import Workspace
from ..excerpts import FileLines
from ..indexer import Indexer
from ..providers import ProviderPolicy
from ..route import Answer, IndexStatus, LocalRoute, query_vector
from . import removals
from .index import TeamIndex
from .unsaved import UnsavedText, merge, moved


class TeamRoute:
    def __init__(self, indexer: Indexer, policy: ProviderPolicy, workspace: Workspace):
        self.indexer = indexer
        self.policy = policy
        self.workspace = workspace
        self.local = LocalRoute(indexer, policy)  # the fallback
        self.team = TeamIndex(indexer.settings, workspace, policy)
        self.unsaved = UnsavedText(indexer, self.team)

    # -- indexing ---------------------------------------------------------------------------
    def sync(
        self, reason: str, force: bool, progress: Progress | None, embed: bool, budget_s: float
    ) -> SyncReport:
        """The local sync, then the team index's catch-up (waiting ``budget_s`` at most for a
        lock there when someone waits) and its vector phase."""
        before = removals.before_sync(self.indexer)
        report = self.indexer.sync(reason, force, progress, embed)
        removals.record(self.indexer, before)
        self.team.catch_up(self.indexer, None, force, budget_s)
        self.team.send_texts()
        if embed:
            self.team.embed(self.indexer, progress, report, None)
        return report

    def embed_pending(
        self,
        progress: Progress | None,
        report: SyncReport | None,
        should_stop: Callable[[], bool] | None,
    ) -> int:
        self.unsaved.prepare(should_stop)  # a few chunks: before the team's backlog
        return self.team.embed(self.indexer, progress, report, should_stop)

    def sync_dirty(self, budget_s: float | None, push: bool = True) -> SyncReport | None:
        """``push=False``: a search pushes the changes itself, right after."""
        changed = set(self.indexer.dirty)
        before = removals.held(self.indexer, changed) if changed else {}
        report = self.indexer.sync_dirty(budget_s)
        if changed:
            removals.record(self.indexer, before)
            if push:
                self.team.ready(self.indexer, changed)
        return report

    def set_document(self, path: str | Path, text: str) -> bool:
        """A buffer equal to the file on disk (just saved) is pushed to the team index."""
        if not self.indexer.set_document(path, text):
            return False
        self.team.buffer_changed(self.indexer, str(path), text, self.unsaved.share)
        return True

    def clear_document(self, path: str | Path) -> None:
        rel = self.workspace.relative(str(path))
        before = removals.held(self.indexer, {rel})
        self.indexer.clear_document(path)
        removals.record(self.indexer, before)
        self.team.unsaved.discard(rel)
        self.team.ready(self.indexer, {rel})

    # -- reading ----------------------------------------------------------------------------
    def search(self, req: SearchRequest, qs: QuerySettings, changed: set[str]) -> Answer:
        answered = self._team_search(req, qs, changed)
        if answered is not None:
            return answered
        out, why = self.local.search(req, qs, changed)
        return out, "; ".join(r for r in (self.team.fallback_reason(), why) if r)

    def _team_search(
        self, req: SearchRequest, qs: QuerySettings, changed: set[str]
    ) -> Answer | None:
        """The team index's answer, None when it cannot give one (it is then cooling down)."""
        db = self.team.ready(self.indexer, changed)
        if db is None:
            return None
        qvec, why = query_vector(self.policy, req, rebuilding=False, use=True)
        # Before the read: it may wait for a push and embed, which is not the read's budget.
        calibrate = qvec is not None and qs.calibrate != "off"
        reference = self.team.reference_vectors(db) if calibrate else None
        team = _TeamSearch(qvec, req, qs, reference, self.unsaved.paths())
        out = self.team.read(team.answer)
        if out is None:
            return None
        if team.unsaved:
            out = self._with_unsaved(out, team, req, qs)
        return out, why

    def _with_unsaved(
        self, out: Outcome, team: _TeamSearch, req: SearchRequest, qs: QuerySettings
    ) -> Outcome:
        """The unsaved text's hits merged into the team's, scored on the team's scale (the
        team's scored again when the unsaved text moved it)."""
        assert team.asked is not None
        avgdl = team.avgdl if team.avgdl is not None else 1.0
        scale = dataclasses.replace(out.scale, avgdl=avgdl)
        ask = dataclasses.replace(team.asked, scale=scale)
        mine = self.unsaved.search(ask, team.saved, team.unsaved)
        if moved(out.scale, mine.scale):
            again = self.team.read(lambda store: team.answer(store, mine.scale), cooldown=False)
            out = again or out
        return merge(out, mine, req.limit, req.threshold, qs.source_balance)

    def place(self, hits: list[SearchHit]) -> None:
        """A team index finds files of other machines too: editors open those read-only."""
        for hit in hits:
            here = hit.file or self.workspace.root / hit.path
            hit.remote = hit.path not in self.indexer.buffers and not here.exists()

    def read_elsewhere(self, rel: str) -> FileLines | None:
        """A file not on this machine, from the machine that has it through the team index."""
        if self.workspace.file_path(rel).exists():
            return None
        found = self.team.file_text(rel)
        return FileLines.of(*found, remote=True) if found is not None else None

    def status(self, local: IndexStatus) -> IndexStatus:
        store, counts = self.team.status()
        if counts is not None:
            return IndexStatus(store, counts, "pgvector", local.fallback_reason)
        why = "; ".join(r for r in (self.team.fallback_reason(), local.fallback_reason) if r)
        return IndexStatus(store, local.counts, local.vector_backend, why)

    def close(self) -> None:
        self.team.close()


@dataclasses.dataclass
class _TeamSearch:
    """One search on the team index, and what the unsaved text's BM25 needs of it: the team's
    average chunk length, and its chunks of the unsaved files (their words are in the team's
    counts, to be taken out)."""

    qvec: np.ndarray | None
    req: SearchRequest
    qs: QuerySettings
    reference: np.ndarray | None
    unsaved: frozenset[str]
    avgdl: float | None = None
    saved: list[str] = dataclasses.field(default_factory=list)
    asked: Inputs | None = None  # the pipeline's inputs, for the unsaved text's search

    def answer(self, store: PgStore, scale: Scale | None = None) -> Outcome:
        if self.unsaved and self.avgdl is None:
            self.avgdl = store.keyword_totals()[1]
            self.saved.extend(store.chunk_texts(self.unsaved))
        vectors = SqliteVecIndex(store)
        # ``exclude``: the unsaved files, searched beside: ``merge`` gates both lists as one.
        self.asked = Inputs(
            store,
            vectors,
            self.qvec,
            self.req,
            self.qs,
            self.reference,
            scale,
            self.unsaved,
            gate=not self.unsaved,
        )
        return run_search(self.asked)
