"""MemoryEngine: the one facade the server, the CLI and the MCP tools use.

One engine per workspace folder; every method is safe to call from worker threads. The work
is done by three parts: the ``Indexer`` (the one writer: syncs, rebuilds, editor buffers,
embedding), the ``Searcher`` (query vectors, backend choice, hybrid search on reader
connections, reranking) and the ``ProviderPolicy`` (which model answers, fallback, cooldown);
the ``RerankPolicy`` holds the optional reranker and its cooldown.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import date
from pathlib import Path
from types import TracebackType
from typing import Any

from ..embeddings.base import EmbeddingProvider
from ..hygiene import Checker, Finding, caps_of, check_draft, severities
from ..index.sync import Progress, SyncReport
from ..rerank import Reranker
from ..search.citations import citation_problem, parse_citation
from ..search.request import SearchRequest
from ..search.results import Excerpt, SearchResponse
from ..search.vector import VectorIndex
from ..settings import Settings
from ..settings import load as load_settings
from ..workspace import MEMORY_DIR, PathError, Workspace
from .excerpts import FileLines, excerpt, read_text
from .index_files import index_path_for, remember_folder
from .indexer import Indexer
from .providers import AUTO, ProviderPolicy
from .reranking import RerankPolicy
from .route import IndexStatus, LocalRoute, Route
from .searcher import Searcher


def resolve_paths(settings: Settings, root: Path) -> Settings:
    """A copy of ``settings`` with workspace-relative model paths made absolute; the caller's
    object is never changed (a server compares it with freshly loaded settings to spot
    changes)."""

    def relative(path: str) -> bool:
        return bool(path) and not Path(path).expanduser().is_absolute()

    if not relative(settings.local.model_path) and not relative(settings.rerank.model_path):
        return settings
    out = copy.deepcopy(settings)
    for section in (out.local, out.rerank):
        if relative(section.model_path):
            section.model_path = str(root / section.model_path)
    return out


def provider_status(p: EmbeddingProvider) -> dict[str, Any]:
    out: dict[str, Any] = {"id": p.id, "model": p.model, "dims": p.dims}
    # Only the local model chooses its weights (models/bf16_copy.py). Duck-typed: the
    # factory imports embeddings.local only for engines that run a local model.
    weights = getattr(p, "weights", None)
    if isinstance(weights, Path):
        out["weights"] = "file" if weights == getattr(p, "path", None) else "bf16 copy"
    return out


class MemoryEngine:
    def __init__(
        self,
        root: Path | str,
        settings: Settings | None = None,
        *,
        provider: EmbeddingProvider | None = AUTO,
        index_path: Path | str | None = None,
        reranker: Reranker | None = AUTO,
    ):
        self.root = Path(root).resolve()
        self.problems: list[str] = []
        if settings is None:
            settings, self.problems = load_settings(self.root)
        self.settings = resolve_paths(settings, self.root)
        self.workspace = Workspace(Path(root), self.settings)  # it keeps the path as opened too
        self.policy = ProviderPolicy(self.settings, provider)
        self.index_path = Path(index_path or index_path_for(self.settings, self.root))
        # A team folder's own index is the team index's fallback: keywords only (route.py).
        fallback = self.settings.store.backend == "postgres"
        try:
            self.indexer = Indexer(
                self.settings, self.workspace, self.policy, self.index_path, keyword_only=fallback
            )
        except BaseException:
            self.policy.close()
            raise
        self._remember_folder()
        self.rerank = RerankPolicy(self.settings, reranker)  # never raises
        self.route = self._route()  # chosen once: the engine never asks again
        # The memory checks' cache: files re-read when they change.
        self.checker = Checker(caps_of(self.settings.hygiene.load_cap))
        self.searcher = Searcher(self.indexer, self.policy, self.rerank, self.route)

    def _route(self) -> Route:
        """The folder's route (route.py): its settings' ``store.backend`` decides."""
        if self.settings.store.backend != "postgres":
            return LocalRoute(self.indexer, self.policy)
        from .team.route import TeamRoute  # psycopg is needed only by a team index

        return TeamRoute(self.indexer, self.policy, self.workspace)

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- state the callers read -------------------------------------------------------------
    @property
    def provider(self) -> EmbeddingProvider | None:
        return self.policy.current

    @property
    def provider_reason(self) -> str | None:
        return self.policy.reason

    @property
    def fallback_reason(self) -> str | None:
        return self.policy.fallback_reason

    @property
    def needs_rebuild(self) -> bool:
        return self.indexer.needs_rebuild

    @property
    def vectors(self) -> VectorIndex:
        return self.indexer.vectors

    @property
    def last_sync(self) -> SyncReport | None:
        return self.indexer.last_sync

    # -- indexing ---------------------------------------------------------------------------
    def sync(
        self,
        reason: str = "manual",
        force: bool = False,
        progress: Progress | None = None,
        embed: bool = True,
        budget_s: float = -1,
    ) -> SyncReport:
        """Incremental sync (or a safe full rebuild when forced or the meta changed); with a
        team index, then its catch-up and its vector phase. ``budget_s`` >= 0: someone waits
        (a CLI search), and the catch-up waits that long at most for a lock in the team index
        (a teammate's rebuild, a table an administrator holds): its changes go next time."""
        report = self.route.sync(reason, force, progress, embed, budget_s)
        if report.full:  # a rebuilt index is a new file, without the old one's meta
            self._remember_folder()
        return report

    def _remember_folder(self) -> None:
        with self.indexer.lock:
            remember_folder(self.indexer.writer, self.root)

    def embed_pending(
        self,
        progress: Progress | None = None,
        report: SyncReport | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> int:
        """Embed chunks that have no vector yet; returns how many were embedded."""
        return self.route.embed_pending(progress, report, should_stop)

    def mark_dirty(self, paths: list[str]) -> None:
        """Record files changed outside the editor; the next sync or search picks them up."""
        self.indexer.mark_dirty(paths)

    def sync_dirty(self, budget_s: float | None = None) -> SyncReport | None:
        """Keyword-index the dirty files now (within ``budget_s`` seconds of waiting)."""
        return self.route.sync_dirty(budget_s)

    def set_document(self, path: str | Path, text: str) -> bool:
        """Index an editor buffer's unsaved text (keyword side now, vectors on the next
        ``embed_pending``). Returns False when the path is not memory of this workspace.
        With a team index, a buffer equal to the file on disk (just saved) is pushed to it;
        unsaved text never leaves this machine."""
        return self.route.set_document(path, text)

    def clear_document(self, path: str | Path) -> None:
        """Forget an editor buffer and index the file as it is on disk (or drop it)."""
        self.route.clear_document(path)

    def team_retry_in(self) -> float | None:
        """Seconds until the team index is worth trying again (0: now); None when there is
        nothing to try (a local folder, or the team index answers and is caught up). Reads
        state only, no I/O."""
        return self.route.retry_in()

    def retry_team(self) -> None:
        """Try the team index again and, when it answers, push this folder's writes and
        removals made while it was away (a timer calls it once ``team_retry_in`` is 0)."""
        self.route.retry()

    # -- reading ----------------------------------------------------------------------------
    def search(self, request: SearchRequest | str, **fields: Any) -> SearchResponse:
        """Search this folder. ``request`` is a SearchRequest, or a query string with the
        request's other fields as keywords (``engine.search("redis", max_results=3)``)."""
        if isinstance(request, str):
            request = SearchRequest(query=request, **fields)
        resp = self.searcher.search(request)
        for hit in resp.results:
            hit.file = self.workspace.outside_file(hit.path)
        self.route.place(resp.results)
        return resp

    def read_text(self, path: str | Path) -> tuple[str, list[int] | None]:
        """The rendered text of a memory file (buffer if open) and its line map."""
        return read_text(
            self.workspace, self.indexer.buffers, str(path), self.settings.max_file_bytes
        )

    def get(
        self,
        path_or_citation: str,
        start: int | None = None,
        lines: int | None = None,
        aligned: bool = False,
        reads: dict[str, FileLines | PathError] | None = None,
    ) -> Excerpt:
        """Lines of a memory file: ``path`` with from/lines, or a citation ``path#L3-L9``;
        ``aligned``: a transcript as one line per JSONL line (``excerpts.excerpt``);
        ``reads``: files already read by this batch of gets (each file is read once).

        Raises PathError (outside the roots, missing) or ValueError (bad numbers)."""
        cite = parse_citation(path_or_citation)
        if cite is None and (problem := citation_problem(path_or_citation)):
            raise ValueError(problem)
        path = cite.path if cite else path_or_citation
        if cite and start is None:
            start, lines = cite.start, cite.end - cite.start + 1
        if (start is not None and start < 1) or (lines is not None and lines < 1):
            raise ValueError("from and lines must be positive")
        rel = self.workspace.relative(path)
        source = reads.get(rel) if reads is not None else None
        if source is None:
            try:
                source = self._read_lines(rel, path)
            except PathError as exc:
                source = exc
            if reads is not None:
                reads[rel] = source
        if isinstance(source, PathError):
            raise PathError(str(source))  # a new one: raising one object again grows its traceback
        ex = excerpt(rel, source, start, lines, aligned)
        ex.file = self.workspace.outside_file(ex.path)
        ex.remote = source.remote
        return ex

    def _read_lines(self, rel: str, path: str) -> FileLines:
        try:
            return FileLines.of(*self.read_text(path))
        except PathError:
            # Not on this machine: a team index may have it from the machine that has it.
            elsewhere = self.route.read_elsewhere(rel)
            if elsewhere is None:
                raise
            return elsewhere

    def holds_below(self, folder: str) -> bool:
        """Whether the index holds a file below ``folder`` (workspace-relative): a deleted path
        that is not a memory file is a folder of notes, or an editor's scratch file."""
        prefix = folder.rstrip("/") + "/"
        with self.indexer.reader() as r:
            return any(p.startswith(prefix) for p in r.file_states())

    # -- hygiene ----------------------------------------------------------------------------
    def indexed_files(self) -> int:
        """How many files the index holds."""
        with self.indexer.reader() as r:
            return r.file_count()

    def check(self, today: date | None = None, vectors: bool = False) -> list[Finding]:
        """The memory checks (``hygiene/``) over the memory files as the index holds them;
        only the files changed since the last check are read again (after an edit, only
        those this engine wrote: ``_written``). ``vectors``: ask the line vectors again
        about close pairs that had none (after embedding)."""
        on, day = severities(self.settings.hygiene), today or date.today()
        with self.indexer.reader() as r:
            return self.checker.check(r, on, day, vectors, self._written)

    def _written(self, mark: object) -> tuple[object, set[str] | None]:
        """The files whose index rows this engine wrote since ``mark`` (an earlier answer's),
        with the new mark; None (read every file's hash) when it cannot tell: the first
        time, another process wrote to the index, the index was opened again, the journal
        forgot, or a write is under way (the mark is taken between writes, so the reader
        sees at least what it counts)."""
        ix = self.indexer
        if not ix.lock.acquire(blocking=False):
            return None, None
        try:
            w = ix.writer
            now = (w.written, w.data_version(), w.written.seq)
        finally:
            ix.lock.release()
        if not isinstance(mark, tuple) or mark[:2] != now[:2]:
            return now, None
        return now, w.written.since(mark[2])

    def check_draft(
        self, text: str, path: str | None = None, today: date | None = None
    ) -> tuple[str, list[Finding]]:
        """The findings ``text`` would cause, written to ``path`` (a memory file of this
        workspace; default: a dated note of today), and that path. PathError: not memory."""
        day = today or date.today()
        rel = self.workspace.relative(path) if path else f"{MEMORY_DIR}/{day}-draft.md"
        found = self.workspace.classify(rel)
        if found is None or found.source != "memory":
            raise PathError(f"{path}: not a memory file of this workspace (MEMORY.md, memory/)")
        with self.indexer.reader() as r:
            return rel, check_draft(r, self.settings.hygiene, text, rel, day, self.checker)

    def status(self) -> dict[str, Any]:
        ix = self.indexer
        with ix.reader() as r:
            counts = r.counts()
            vec_reason = r.vec_reason
            vec_table = r.vec_table_ready()
        p = self.provider
        backend = self.settings.store.vector_backend
        if backend != "sqlite-vec" or not vec_table:
            backend = "numpy"
        local = IndexStatus(
            {"backend": "sqlite", "answering": "sqlite"}, counts, backend, self.fallback_reason
        )
        st = self.route.status(local)
        counts, backend, fallback, store = (
            st.counts,
            st.vector_backend,
            st.fallback_reason,
            st.store,
        )
        n = int(counts["chunks"])  # type: ignore[call-overload]
        lines_on = p is not None and 0 < n <= ix.line_budget()
        return {
            "root": str(self.root),
            "indexPath": str(self.index_path),
            **counts,
            # Keyword-only mode embeds nothing, so nothing is waiting for a vector.
            "pendingEmbeddings": counts["pendingEmbeddings"] if p else 0,
            # Chunks whose lines still wait for their vectors (none when the index has
            # outgrown this client's query.lines.maxChunks: they are not embedded then).
            "pendingLineVectors": counts.get("pendingLineVectors", 0) if lines_on else 0,
            "provider": provider_status(p) if p else None,
            "providerStats": p.stats.snapshot() if p and hasattr(p, "stats") else None,
            # Since this engine started: chunks whose vector came from the cache vs were embedded.
            **ix.totals,
            "mode": "hybrid" if p else "keyword",
            "providerReason": self.provider_reason,
            "fallbackReason": fallback,
            **self.rerank.status(),
            "vectorBackend": backend,
            "sqliteVec": vec_reason or "loaded",
            "fts": "fts5",
            "dirty": bool(ix.dirty) or ix.needs_rebuild,
            "needsRebuild": ix.needs_rebuild,
            "openDocuments": sorted(ix.buffers),
            "lastSync": ix.last_sync.to_json() if ix.last_sync else None,
            "settingsProblems": self.problems,
            **{
                field: [
                    {"name": r.name, "path": r.given, "folder": str(r.folder)}
                    for r in self.workspace.roots.values()
                    if r.kind.name == kind
                ]
                for field, kind in (("sessionRoots", "sessions"), ("memoryRoots", "memory"))
            },
            "rootProblems": self.workspace.root_problems(),
            "store": store,
        }

    def close(self) -> None:
        self.route.close()
        self.indexer.close()
        self.policy.close()
        self.rerank.close()
