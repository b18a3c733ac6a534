"""The custom requests and commands (``memory/search``, ``memory/get``, ``memory/status``,
``memory/check``, ``memory.reindex`` / ``memory.sync``, ``memory.saveSession``) and
``workspace/symbol``, over every workspace folder: routed, merged, answered as JSON. Errors
are ``ParamError``s; the handlers in ``app.py`` turn them into InvalidParams."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from .. import __version__
from ..params import CheckParams, FolderParams, GetParams, ParamError, SaveSessionParams
from ..search.citations import citation_problem, parse_citation
from ..search.request import SearchRequest
from ..search.results import TEAM_SCHEME, SearchResponse
from ..sessions.known import Saved, save_new
from ..sessions.writer import load_session
from ..sources import SourceError
from ..workspace import PathError
from . import convert
from .folder import Folder, FolderUnavailable
from .folders import Folders
from .progress import SyncOutcome

log = logging.getLogger(__name__)

SYMBOL_RESULTS = 20
# A search that finds nothing while the folder's first sync runs waits this long for it: in a
# workspace never indexed before, the answer was "no results" until the sync was done.
FIRST_SYNC_WAIT_S = 3.0
INDEXING = "the first sync of this folder is still running: search again in a moment"
TOTALS = ("files", "chunks", "pendingEmbeddings", "pendingLineVectors", "cacheEntries")

Sync = Callable[[Folder, str, bool], Awaitable[SyncOutcome]]


def merge_limit(req: SearchRequest, folders: list[Folder]) -> int:
    """How many hits a multi-root search returns: the request's ``maxResults``, else the
    largest of the folders' own ``query.maxResults`` (each folder already applied its own)."""
    if req.max_results is not None:
        return req.max_results
    return max((f.settings.query.max_results for f in folders), default=1)


class Requests:
    def __init__(self, folders: Folders, sync: Sync, watch_mode: Callable[[], str]):
        self.folders = folders
        self.sync = sync  # a sync with progress
        self.watch_mode = watch_mode  # who watches the files: "client" | "server" | "off"

    # -- search -----------------------------------------------------------------------------
    async def _search(self, req: SearchRequest) -> tuple[list[tuple[Path, SearchResponse]], int]:
        folders = self.folders.select(req.folder)
        await asyncio.gather(*(f.flush(f.flush_budget) for f in folders))

        async def one(folder: Folder) -> tuple[Path, SearchResponse] | None:
            try:
                async with folder.use() as engine:
                    answer = await folder.read(engine.search, req)
                if answer.results or folder.first_sync.is_set():
                    return folder.root, answer
                try:
                    await asyncio.wait_for(folder.first_sync.wait(), FIRST_SYNC_WAIT_S)
                except TimeoutError:
                    why = "; ".join(filter(None, (answer.fallback_reason, INDEXING)))
                    return folder.root, replace(answer, fallback_reason=why)
                async with folder.use() as engine:
                    return folder.root, await folder.read(engine.search, req)
            except FolderUnavailable as exc:
                log.warning("%s", exc)
                return None

        answers = await asyncio.gather(*(one(f) for f in folders))
        return [a for a in answers if a is not None], merge_limit(req, folders)

    async def search(self, req: SearchRequest) -> dict[str, Any]:
        t0 = time.perf_counter()
        answers, limit = await self._search(req)
        return convert.merge_search(answers, limit, (time.perf_counter() - t0) * 1000)

    async def workspace_symbols(self, query: str) -> list[types.WorkspaceSymbol]:
        if not query.strip():
            return []
        answers, limit = await self._search(SearchRequest(query=query, max_results=SYMBOL_RESULTS))
        return [convert.hit_symbol(root, hit) for root, hit in convert.rank_hits(answers)[:limit]]

    # -- get --------------------------------------------------------------------------------
    async def get(self, p: GetParams) -> dict[str, Any]:
        folders = self.folders.select(p.folder)
        target = p.target
        # A file only the team index has, opened by an editor in place of the file: a
        # transcript comes as one line per JSONL line, where the hits' line numbers point.
        document = target.startswith(TEAM_SCHEME + ":")
        if document:
            target = "file" + target.removeprefix(TEAM_SCHEME)
        if target.startswith("file:"):
            target = to_fs_path(target) or target
        if Path(target).is_absolute():
            hit = self.folders.locate_path(Path(target))
            if hit is None:
                raise ParamError("path", f"{target}: outside the workspace folders")
            folders, target = [hit[0]], hit[1]
        if not folders:
            raise ParamError("path", "no workspace folder is open")
        await asyncio.gather(*(f.flush(f.flush_budget) for f in folders))
        errors: list[str] = []
        for folder in folders:
            try:
                async with folder.use() as engine:
                    ex = await folder.read(engine.get, target, p.start, p.lines, document)
                    return ex.to_json(engine.root)
            except (PathError, SourceError, FolderUnavailable) as exc:
                errors.append(str(exc))
            except ValueError as exc:
                field = "citation" if citation_problem(target) else "from"
                raise ParamError(field, str(exc)) from exc
        field = "citation" if parse_citation(target) else "path"
        # The first folder's reason: with one folder it is the only one.
        raise ParamError(field, errors[0] if errors else "not found")

    # -- status -----------------------------------------------------------------------------
    async def status(self, p: FolderParams) -> dict[str, Any]:
        folders = self.folders.select(p.folder)

        async def one(folder: Folder) -> dict[str, Any]:
            extra = {
                "folder": folder.uri,
                "syncing": folder.syncing,
                "pendingEdits": folder.pending_edits,
            }
            try:
                async with folder.use() as engine:
                    st = await folder.read(engine.status)
            except FolderUnavailable as exc:
                return {**extra, "root": str(folder.root), "error": str(exc)}
            return {**st, **extra, "settingsProblems": folder.problems}

        per = await asyncio.gather(*(one(f) for f in folders))
        out: dict[str, Any] = dict(per[0]) if per else {}
        if len(per) > 1:  # totals on top, each folder's own status below
            for key in TOTALS:
                out[key] = sum(int(s.get(key) or 0) for s in per)
            by: dict[str, int] = {}
            for s in per:
                for src, n in (s.get("chunksBySource") or {}).items():
                    by[src] = by.get(src, 0) + n
            out["chunksBySource"] = by
            out["dirty"] = any(s.get("dirty") for s in per)
            out["syncing"] = any(s.get("syncing") for s in per)
            out["pendingEdits"] = sum(s.get("pendingEdits", 0) for s in per)
        out["folders"] = per
        out["watch"] = self.watch_mode()
        out["version"] = __version__
        return out

    # -- check ------------------------------------------------------------------------------
    async def check(self, p: CheckParams) -> dict[str, Any]:
        """The findings a draft note would cause, in its folder (the first one by default)."""
        folders = self.folders.select(p.folder)
        if not folders:
            raise ParamError("folder", "no workspace folder is open")
        folder = folders[0]
        await folder.flush(folder.flush_budget)
        try:
            async with folder.use() as engine:
                path, found = await folder.read(engine.check_draft, p.text, p.path)
        except PathError as exc:
            raise ParamError("path", str(exc)) from None
        except FolderUnavailable as exc:
            raise ParamError("folder", str(exc)) from None
        return {"path": path, "findings": [f.to_json() for f in found]}

    # -- commands ---------------------------------------------------------------------------
    async def sync_command(self, force: bool, folder_ref: str | None) -> dict[str, Any]:
        folders = self.folders.select(folder_ref)
        outcomes = await asyncio.gather(
            *(self.sync(f, "reindex" if force else "command", force) for f in folders)
        )
        return {
            "folders": [
                {"folder": f.uri, **o.to_json()} for f, o in zip(folders, outcomes, strict=True)
            ]
        }

    async def save_session(self, p: SaveSessionParams) -> dict[str, Any]:
        """Write a session note from a transcript (never overwriting), then index it."""
        folders = self.folders.select(p.folder)
        if not folders:
            raise ParamError("folder", "no workspace folder is open")
        folder = folders[0]
        transcript = Path(
            (to_fs_path(p.transcript) if p.transcript.startswith("file:") else None) or p.transcript
        )
        if not transcript.is_absolute():
            transcript = folder.root / transcript
        if not transcript.is_file():
            raise ParamError("transcript", f"no such file: {transcript}")
        async with folder.use() as engine:

            def save() -> Saved:
                session = load_session(transcript, p.messages, p.source)
                check = (lambda text: engine.check_draft(text)[1]) if p.skip_known else None
                return save_new(engine.root, engine.settings, session, check)

            saved = await folder.read(save)
        if saved.path is None:
            return saved.to_json(folder.root)
        await self.sync(folder, "session-save", False)
        return saved.to_json(folder.root)
