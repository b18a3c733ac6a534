"""The team route: the team index answers while it can, the folder's own SQLite index (kept
in step, keyword-only) when it cannot, and every answer says why. Files deleted here are
remembered until the team index has heard of them (``removals.py``); an editor's unsaved text
never leaves this machine and is searched beside the team's answer (``unsaved.py``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

from ...index.postgres import PgStore
from ...index.store import Store
from ...index.sync import Progress, SyncReport
from ...search.context import Inputs, Outcome, Rerank
from ...search.pipeline import run as run_search
from ...search.request import SearchRequest
from ...search.results import SearchHit
from ...search.score import line_reader
from ...search.vector import SqliteVecIndex
from ...settings import QuerySettings
from ...workspace import Workspace
from ..excerpts import FileLines
from ..indexer import Indexer
from ..providers import ProviderPolicy
from ..route import Answer, IndexStatus, LocalRoute, query_vector
from . import removals
from .index import TEAM_ERRORS, TeamIndex
from .sources import BothVectors, TeamAndUnsaved
from .unsaved import TeamCounts, UnsavedText

log = logging.getLogger(__name__)


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

    # -- after an outage ---------------------------------------------------------------------
    def retry_in(self) -> float | None:
        """Seconds until the team index is worth trying again (0: now), after it failed or
        while it is connected without having caught up; None when it answers and is caught
        up, or has no URL. Reads state only: a timer may ask on the event loop."""
        team = self.team
        if not team.url or not team.namespace:
            return None
        if team.db is not None:
            return None if team.pushed is not None else 0.0
        return max(0.0, team.retry_at - team.clock())

    def retry(self) -> None:
        """Try the team index again (its cooldown over) and, when it answers, push what this
        folder changed meanwhile, removals included: the catch-up a search runs first."""
        self.team.ready(self.indexer, set())

    # -- reading ----------------------------------------------------------------------------
    def search(
        self, req: SearchRequest, qs: QuerySettings, changed: set[str], rerank: Rerank | None
    ) -> Answer:
        answered = self._team_search(req, qs, changed, rerank)
        if answered is not None:
            return answered
        out, why = self.local.search(req, qs, changed, rerank)
        return out, "; ".join(r for r in (self.team.fallback_reason(), why) if r)

    def _team_search(
        self, req: SearchRequest, qs: QuerySettings, changed: set[str], rerank: Rerank | None
    ) -> Answer | None:
        """The team index's answer, None when it cannot give one (it is then cooling down)."""
        db = self.team.ready(self.indexer, changed)
        if db is None:
            return None
        qvec, why = query_vector(self.policy, req, rebuilding=False, use=True)
        # Before the read: it may wait for a push and embed, which is not the read's budget.
        calibrate = qvec is not None and qs.calibrate != "off"
        reference = self.team.reference_vectors(db) if calibrate else None
        paths = self.unsaved.paths()

        def answer(store: PgStore) -> Outcome:
            team = Inputs(store, SqliteVecIndex(store), qvec, req, qs, reference, rerank)
            return self._answer(team, store, paths)

        out = self.team.read(answer)
        return None if out is None else (out, why)

    def _answer(self, team: Inputs, store: PgStore, paths: frozenset[str]) -> Outcome:
        """One pipeline pass over the team index, with the unsaved files' text in place of
        theirs (``sources.py``). A failure of the unsaved part leaves the team's answer."""
        if not paths:
            return run_search(team)
        try:
            with self.indexer.reader() as local:
                return run_search(self._with_unsaved(team, store, local, paths))
        except TEAM_ERRORS:
            raise  # the team index failed: its cooldown, and the local index answers
        except Exception:
            log.exception("searching unsaved text failed; the team index answers alone")
            return run_search(team)

    def _with_unsaved(
        self, team: Inputs, store: PgStore, local: Store, paths: frozenset[str]
    ) -> Inputs:
        counts = TeamCounts(store.keyword_totals()[1], store.chunk_texts(paths))
        lines = line_reader(store, team.qs.lines) is not None
        mine, vectors = self.unsaved.source(local, paths, counts, team.qvec is not None, lines)
        both = TeamAndUnsaved(store, mine, paths)
        assert team.vectors is not None
        return dataclasses.replace(
            team, store=both, vectors=BothVectors(team.vectors, vectors, vectors.size)
        )

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
