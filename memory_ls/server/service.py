"""The server's state and operations, between the pygls handlers (app.py) and the engines.

Owns the workspace folders (one ``Folder``, hence one ``MemoryEngine``, per folder), routes
URIs and paths to them, merges multi-root searches, resolves citations, computes diagnostics,
loads settings (initializationOptions + ``workspace/configuration``), watches files and reports
progress and degradations. Handlers stay thin; everything slow runs in ``workers``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import posixpath
import time
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path

from .. import __version__
from ..engine import MemoryEngine
from ..search.citations import Citation, parse_citation
from ..search.request import SearchRequest
from ..search.results import Excerpt, SearchResponse
from ..session_writer import save_session
from ..settings import Settings, to_dict
from ..settings import load as load_settings
from ..sources import SourceError
from ..workspace import PathError
from . import convert
from .protocol import CMD_SAVE_SESSION, GetParams, SaveSessionParams, invalid
from .watch import SETTINGS_FILE, ServerWatcher, memory_globs
from .workers import Folder, FolderHooks, FolderUnavailable, TaskSet

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

SECTION = "memory"
SYMBOL_RESULTS = 20
WATCH_REGISTRATION = "memory-ls-watch"
CONFIG_REGISTRATION = "memory-ls-config"
PROGRESS_INTERVAL_S = 0.1


def settings_section(data: Any) -> dict[str, Any]:
    """Our settings from initializationOptions / didChangeConfiguration: either the
    ``memory`` section of a larger object or the section itself."""
    if not isinstance(data, dict):
        return {}
    inner = data.get(SECTION)
    return inner if isinstance(inner, dict) else data


@dataclass
class CiteCheck:
    citation: Citation
    excerpt: Excerpt | None = None
    root: Path | None = None
    problem: str | None = None  # a diagnostic message, None when the citation is good
    missing: bool = False  # the file does not exist (vs. not memory: no diagnostic)


def check_citation(engine: MemoryEngine, cite: Citation, doc_dir: str | None) -> CiteCheck:
    """Resolve one citation in one engine (worker thread). Paths are workspace-relative;
    a path relative to the citing document's folder is tried second."""
    candidates = [cite.path]
    if doc_dir:
        rel = posixpath.normpath(posixpath.join(doc_dir, cite.path))
        if rel != cite.path and not rel.startswith("../"):
            candidates.append(rel)
    first_error = None
    for path in candidates:
        try:
            ex = engine.get(path, cite.start, cite.end - cite.start + 1)
        except (PathError, SourceError, ValueError) as exc:
            first_error = first_error or str(exc)
            continue
        out = CiteCheck(cite, ex, engine.root)
        if cite.start > ex.total_lines:
            out.problem = f"{cite}: line {cite.start} is past the end ({ex.total_lines} lines)"
        elif cite.end > ex.total_lines:
            out.problem = f"{cite}: lines past the end ({ex.total_lines} lines)"
        return out
    exists = any((engine.root / p).is_file() for p in candidates)
    return CiteCheck(
        cite, problem=None if exists else f"{cite.path}: no such memory file", missing=not exists
    )


class MemoryService:
    def __init__(self, ls: LanguageServer, init_options: Any = None):
        self.ls = ls
        self.folders: dict[str, Folder] = {}  # by folder URI
        self.reads = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memory-ls-read")
        self.init_overrides = settings_section(init_options)
        self.client_config: dict[str, dict[str, Any]] = {}  # folder URI -> pulled section
        self.watch_mode = "off"  # "client" | "server" | "off"
        self.watcher: ServerWatcher | None = None
        self.shown: set[str] = set()
        self._uri_cache: dict[str, tuple[Folder, str] | None] = {}
        self._diag_timers: dict[str, asyncio.TimerHandle] = {}
        self._published: set[str] = set()
        self._tasks = TaskSet("memory-ls")
        self._interval_tasks: dict[str, asyncio.Task[None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- capabilities -----------------------------------------------------------------------
    def _cap(self, path: str) -> Any:
        obj: Any = self.ls.client_capabilities
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj

    # -- folders ----------------------------------------------------------------------------
    def _new_folder(self, uri: str) -> Folder | None:
        fs = to_fs_path(uri)
        if not fs:
            log.warning("ignoring workspace folder %s: not a local folder", uri)
            return None
        root = Path(fs).resolve()
        settings, problems = self._settings_for(uri, root)
        hooks = FolderHooks(
            get_text=self._buffer_text,
            on_indexed=lambda f, u: self._refresh_diagnostics(f, exclude=u),
            on_synced=lambda f: self._refresh_diagnostics(f),
            on_degraded=self._embedding_degraded,
        )
        return Folder(uri, root, settings, problems, reads=self.reads, hooks=hooks)

    def _embedding_degraded(self, folder: Folder) -> None:
        # After each embedding run: cheap (an attribute), so it can run after every edit.
        reason = folder.engine.fallback_reason if folder.engine is not None else None
        if reason:
            self.show_once(f"memory-ls: {reason}", types.MessageType.Warning)

    def _settings_for(self, uri: str, root: Path) -> tuple[Settings, list[str]]:
        return load_settings(root, self.init_overrides, self.client_config.get(uri, {}))

    def add_initial_folders(
        self, folders: Sequence[types.WorkspaceFolder] | None, root_uri: str | None
    ) -> None:
        self._loop = asyncio.get_running_loop()
        uris = [f.uri for f in folders or []] or ([root_uri] if root_uri else [])
        for uri in uris:
            if uri not in self.folders and (folder := self._new_folder(uri)):
                self.folders[uri] = folder

    async def start(self) -> None:
        """After ``initialized``: pull settings, open engines, watch, first sync."""
        self._loop = asyncio.get_running_loop()
        if self._cap("workspace.configuration"):
            await self._pull_configuration(list(self.folders.values()))
        await self._register_config_notifications()
        await asyncio.gather(*(self._open(f) for f in self.folders.values()))
        await self._setup_watching()
        for folder in list(self.folders.values()):
            self._start_folder(folder)

    async def _open(self, folder: Folder) -> None:
        settings, problems = await asyncio.to_thread(self._settings_for, folder.uri, folder.root)
        await folder.open(settings, problems)
        self._apply_log_level()
        self._show_settings_problems(folder)
        await self._show_degradations(folder)

    def _apply_log_level(self) -> None:
        setup = getattr(self.ls, "setup_logging", None)
        if setup is not None and self.folders:
            setup(next(iter(self.folders.values())).settings.log_level)

    def _start_folder(self, folder: Folder, added: bool = False) -> None:
        folder.spawn(self._sync_with_progress(folder, "startup", False))
        self._start_interval(folder)
        if added:  # documents opened before their folder joined the workspace
            for uri in list(self.ls.workspace.text_documents):
                if (hit := self.locate(uri)) and hit[0] is folder:
                    self.did_open(uri)

    def _reapply_buffers(self, folder: Folder) -> None:
        # A new engine starts without the open buffers: give them back before anything reads.
        for uri in list(self.ls.workspace.text_documents):
            hit = self.locate(uri)
            if hit and hit[0] is folder and folder.is_memory(hit[1]):
                folder.doc_changed(uri, hit[1], delay_ms=0)

    def _start_interval(self, folder: Folder) -> None:
        old = self._interval_tasks.pop(folder.uri, None)
        if old:
            old.cancel()
        minutes = folder.settings.sync.interval_minutes
        if minutes <= 0:
            return

        async def tick() -> None:
            while not folder.closed:
                await asyncio.sleep(minutes * 60)
                await folder.sync("interval")

        self._interval_tasks[folder.uri] = asyncio.ensure_future(tick())

    async def _pull_configuration(self, folders: list[Folder]) -> None:
        if not folders:
            return
        items = [types.ConfigurationItem(scope_uri=f.uri, section=SECTION) for f in folders]
        try:
            result = await asyncio.wait_for(
                self.ls.workspace_configuration_async(types.ConfigurationParams(items=items)), 5
            )
        except Exception as exc:  # a client that claims support but fails: keep going
            log.warning("workspace/configuration failed: %s", exc)
            return
        for folder, value in zip(folders, result or [], strict=False):
            self.client_config[folder.uri] = value if isinstance(value, dict) else {}

    async def _register_config_notifications(self) -> None:
        if not self._cap("workspace.did_change_configuration.dynamic_registration"):
            return
        reg = types.Registration(
            id=CONFIG_REGISTRATION,
            method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
            register_options=types.DidChangeConfigurationRegistrationOptions(section=SECTION),
        )
        try:
            await asyncio.wait_for(
                self.ls.client_register_capability_async(
                    types.RegistrationParams(registrations=[reg])
                ),
                5,
            )
        except Exception as exc:
            log.info("client refused didChangeConfiguration registration: %s", exc)

    async def configuration_changed(self, settings: Any) -> None:
        """``workspace/didChangeConfiguration``: pull (or take) the new settings and reopen
        every engine whose effective settings changed; a changed index meta rebuilds."""
        if self._cap("workspace.configuration"):
            await self._pull_configuration(list(self.folders.values()))
        else:
            section = settings_section(settings)
            for uri in self.folders:
                self.client_config[uri] = section
        await asyncio.gather(*(self.reload(f) for f in list(self.folders.values())))

    async def reload(self, folder: Folder) -> None:
        settings, problems = await asyncio.to_thread(self._settings_for, folder.uri, folder.root)
        if to_dict(settings) == to_dict(folder.settings) and folder.engine is not None:
            return
        log.info("%s: settings changed; reopening the index", folder.name)
        await folder.open(settings, problems)
        self._apply_log_level()
        self._show_settings_problems(folder)
        await self._show_degradations(folder)
        self._reapply_buffers(folder)
        if self.watch_mode != "off":
            await self._setup_watching()
        self._start_interval(folder)
        folder.spawn(self._sync_with_progress(folder, "settings", False))

    async def folders_changed(
        self, added: Iterable[types.WorkspaceFolder], removed: Iterable[types.WorkspaceFolder]
    ) -> None:
        self._uri_cache.clear()
        for f in removed:
            folder = self.folders.pop(f.uri, None)
            if folder:
                if self.watcher:
                    self.watcher.unwatch(folder.root)
                task = self._interval_tasks.pop(folder.uri, None)
                if task:
                    task.cancel()
                await folder.close()
        new = [
            folder
            for f in added
            if f.uri not in self.folders and (folder := self._new_folder(f.uri))
        ]
        for folder in new:
            self.folders[folder.uri] = folder
        if self._cap("workspace.configuration"):
            await self._pull_configuration(new)
        await asyncio.gather(*(self._open(f) for f in new))
        if self.watch_mode != "off":
            await self._setup_watching()
        for folder in new:
            self._start_folder(folder, added=True)

    # -- routing ----------------------------------------------------------------------------
    def locate(self, uri: str) -> tuple[Folder, str] | None:
        """(folder, workspace-relative path) of a file URI, innermost folder first."""
        if uri in self._uri_cache:
            return self._uri_cache[uri]
        found = None
        fs = to_fs_path(uri) if uri.startswith("file:") else None
        if fs:
            found = self.locate_path(Path(fs))
        if len(self._uri_cache) > 10_000:
            self._uri_cache.clear()
        self._uri_cache[uri] = found
        return found

    def locate_path(self, path: Path) -> tuple[Folder, str] | None:
        for p in (path, path.resolve()):
            best: tuple[Folder, str] | None = None
            for folder in self.folders.values():
                try:
                    rel = p.relative_to(folder.root).as_posix()
                except ValueError:
                    continue
                if best is None or len(folder.root.parts) > len(best[0].root.parts):
                    best = (folder, rel)
            if best:
                return best
        return None

    def _select(self, folder_ref: str | None, method: str) -> list[Folder]:
        folders = list(self.folders.values())
        if folder_ref is None:
            return folders
        for f in folders:
            if folder_ref in (f.uri, str(f.root)) or folder_ref.rstrip("/") == f.uri.rstrip("/"):
                return [f]
        raise invalid(method, "folder", f"not a workspace folder: {folder_ref!r}")

    def _buffer_text(self, uri: str) -> str | None:
        doc = self.ls.workspace.text_documents.get(uri)
        return doc.source if doc is not None else None

    def spawn(self, coro: Any) -> asyncio.Future[Any]:
        return self._tasks.spawn(coro)

    # -- document sync ----------------------------------------------------------------------
    def did_open(self, uri: str) -> None:
        hit = self.locate(uri)
        if hit and hit[0].is_memory(hit[1]):
            hit[0].doc_changed(uri, hit[1], delay_ms=0)
        self.schedule_diagnostics(uri, 0)

    def did_change(self, uri: str) -> None:
        hit = self.locate(uri)
        delay = None
        if hit:
            delay = hit[0].settings.sync.edit_debounce_ms
            if hit[0].is_memory(hit[1]):
                hit[0].doc_changed(uri, hit[1])
        self.schedule_diagnostics(uri, delay)

    def did_save(self, uri: str, text: str | None) -> None:
        hit = self.locate(uri)
        if hit and hit[0].is_memory(hit[1]):
            hit[0].doc_saved(uri, hit[1], text)

    def did_close(self, uri: str) -> None:
        hit = self.locate(uri)
        if hit and hit[0].is_memory(hit[1]):
            hit[0].doc_closed(uri, hit[1])
        timer = self._diag_timers.pop(uri, None)
        if timer:
            timer.cancel()
        if uri in self._published:
            self._published.discard(uri)
            self.ls.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
            )

    def watched_files_changed(self, changes: Sequence[types.FileEvent]) -> None:
        for change in changes:
            fs = to_fs_path(change.uri)
            if fs:
                self.fs_changed(Path(fs), False)

    def fs_changed(self, path: Path, is_dir: bool) -> None:
        """A file (or folder) changed on disk, seen by the client or by our watcher."""
        hit = self.locate_path(path)
        if not hit:
            return
        folder, rel = hit
        if rel == SETTINGS_FILE:
            self.spawn(self.reload(folder))
        elif is_dir:
            folder.spawn(folder.sync("watch"))
        elif folder.is_memory(rel):
            folder.files_changed([rel])

    async def _setup_watching(self) -> None:
        if not any(f.settings.sync.watch for f in self.folders.values()):
            return
        client_can = self._cap("workspace.did_change_watched_files.dynamic_registration")
        if client_can and await self._register_watchers():
            self.watch_mode = "client"
            return
        self.watch_mode = "server"
        if self.watcher is None:
            try:
                self.watcher = ServerWatcher(self._fs_event_from_thread)
            except Exception as exc:  # no inotify, etc.: searches still sync dirty files
                log.warning("cannot watch files: %s", exc)
                self.watch_mode = "off"
                return
        for folder in self.folders.values():
            if folder.settings.sync.watch:
                self.watcher.watch(folder.root, folder.settings)

    def _fs_event_from_thread(self, path: Path, is_dir: bool) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.fs_changed, path, is_dir)

    async def _register_watchers(self) -> bool:
        relative = self._cap("workspace.did_change_watched_files.relative_pattern_support")
        watchers: list[types.FileSystemWatcher] = []
        for folder in self.folders.values():
            if not folder.settings.sync.watch:
                continue
            for glob in memory_globs(folder.settings):
                pattern: Any = (
                    types.RelativePattern(base_uri=folder.uri, pattern=glob)
                    if relative
                    else f"**/{glob}"
                )
                watchers.append(types.FileSystemWatcher(glob_pattern=pattern))
        try:
            if self.watch_mode == "client":
                await self.ls.client_unregister_capability_async(
                    types.UnregistrationParams(
                        unregisterations=[
                            types.Unregistration(
                                id=WATCH_REGISTRATION,
                                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            )
                        ]
                    )
                )
            await asyncio.wait_for(
                self.ls.client_register_capability_async(
                    types.RegistrationParams(
                        registrations=[
                            types.Registration(
                                id=WATCH_REGISTRATION,
                                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                register_options=types.DidChangeWatchedFilesRegistrationOptions(
                                    watchers=watchers
                                ),
                            )
                        ]
                    )
                ),
                5,
            )
            return True
        except Exception as exc:
            log.info("client refused file watching (%s); watching files in the server", exc)
            return False

    # -- syncs with progress ----------------------------------------------------------------
    async def _sync_with_progress(self, folder: Folder, reason: str, force: bool) -> Any:
        reporter = await Progress.start(self, f"memory-ls: indexing {folder.name}")
        t0 = time.perf_counter()
        try:
            report = await folder.sync(reason, force, reporter.callback)
            embedded = await folder.embed(reporter.callback)
        except FolderUnavailable as exc:
            reporter.end(str(exc))
            return None
        except asyncio.CancelledError:
            reporter.end("cancelled")
            raise
        except Exception as exc:
            log.error("%s: sync failed: %s", folder.name, exc, exc_info=exc)
            reporter.end(f"sync failed: {exc}")
            return None
        summary = "up to date"
        if report is not None:
            summary = (
                f"{report.files} files: {report.indexed} indexed, {report.removed} "
                f"removed, {embedded} embedded in {time.perf_counter() - t0:.1f}s"
            )
        reporter.end(summary)
        return report

    async def sync_command(self, force: bool, folder_ref: str | None, method: str) -> Any:
        folders = self._select(folder_ref, method)
        reports = await asyncio.gather(
            *(
                self._sync_with_progress(f, "reindex" if force else "command", force)
                for f in folders
            )
        )
        return {
            "folders": [
                {"folder": f.uri, "report": r.to_json() if r is not None else None}
                for f, r in zip(folders, reports, strict=True)
            ]
        }

    async def save_session(self, p: SaveSessionParams) -> dict[str, Any]:
        """Write a session note from a transcript (never overwriting), then index it."""
        folders = self._select(p.folder, CMD_SAVE_SESSION)
        if not folders:
            raise invalid(CMD_SAVE_SESSION, "folder", "no workspace folder is open")
        folder = folders[0]
        transcript = Path(
            to_fs_path(p.transcript) if p.transcript.startswith("file:") else p.transcript
        )
        if not transcript.is_absolute():
            transcript = folder.root / transcript
        if not transcript.is_file():
            raise invalid(CMD_SAVE_SESSION, "transcript", f"no such file: {transcript}")
        async with folder.use() as engine:
            path = await folder.read(
                save_session, engine.root, transcript, p.messages, p.source, engine.settings
            )
        await self._sync_with_progress(folder, "session-save", False)
        rel = path.relative_to(folder.root).as_posix()
        return {"path": rel, "uri": path.as_uri()}

    # -- requests ---------------------------------------------------------------------------
    async def _search_folders(
        self, p: SearchRequest, method: str, max_results: int | None = None
    ) -> tuple[list[tuple[Path, SearchResponse]], int]:
        folders = self._select(p.folder, method)
        if not folders:
            return [], max_results or p.max_results or Settings().query.max_results
        limit = max_results or p.max_results or folders[0].settings.query.max_results
        await asyncio.gather(*(f.flush(f.flush_budget) for f in folders))

        async def one(folder: Folder) -> tuple[Path, SearchResponse] | None:
            try:
                async with folder.use() as engine:
                    req = dataclasses.replace(p, max_results=limit)
                    return folder.root, await folder.read(engine.search, req)
            except FolderUnavailable as exc:
                log.warning("%s", exc)
                return None

        answers = await asyncio.gather(*(one(f) for f in folders))
        return [a for a in answers if a is not None], limit

    async def search(self, p: SearchRequest, method: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        answers, limit = await self._search_folders(p, method)
        return convert.merge_search(answers, limit, (time.perf_counter() - t0) * 1000)

    async def workspace_symbols(self, query: str) -> list[types.WorkspaceSymbol]:
        if not query.strip():
            return []
        p = SearchRequest(query=query)
        answers, limit = await self._search_folders(p, types.WORKSPACE_SYMBOL, SYMBOL_RESULTS)
        return [convert.hit_symbol(root, hit) for root, hit in convert.rank_hits(answers)[:limit]]

    async def get(self, p: GetParams, method: str) -> dict[str, Any]:
        folders = self._select(p.folder, method)
        target = p.target
        if target.startswith("file:"):
            target = to_fs_path(target) or target
        if Path(target).is_absolute():
            hit = self.locate_path(Path(target))
            if hit is None:
                raise invalid(method, "path", f"{target}: outside the workspace folders")
            folders, target = [hit[0]], hit[1]
        if not folders:
            raise invalid(method, "path", "no workspace folder is open")
        await asyncio.gather(*(f.flush(f.flush_budget) for f in folders))
        errors: list[str] = []
        for folder in folders:
            try:
                async with folder.use() as engine:
                    ex = await folder.read(engine.get, target, p.start, p.lines)
                    return ex.to_json(engine.root)
            except (PathError, SourceError) as exc:
                errors.append(str(exc))
            except ValueError as exc:
                raise invalid(method, "from", str(exc)) from exc
            except FolderUnavailable as exc:
                errors.append(str(exc))
        field = "citation" if parse_citation(target) else "path"
        # The first folder's reason: with one folder it is the only one.
        raise invalid(method, field, errors[0] if errors else "not found")

    async def status(self, folder_ref: str | None, method: str) -> dict[str, Any]:
        folders = self._select(folder_ref, method)

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
            for key in ("files", "chunks", "pendingEmbeddings", "cacheEntries"):
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
        out["watch"] = self.watch_mode
        out["version"] = __version__
        return out

    # -- citations --------------------------------------------------------------------------
    def _doc_dir(self, doc_uri: str) -> tuple[Folder | None, str | None]:
        hit = self.locate(doc_uri)
        if not hit:
            return None, None
        return hit[0], posixpath.dirname(hit[1])

    async def check_citations(self, doc_uri: str, cites: list[Citation]) -> list[CiteCheck]:
        """Resolve citations: in the citing document's folder first, then in the others."""
        home, doc_dir = self._doc_dir(doc_uri)
        order = ([home] if home else []) + [f for f in self.folders.values() if f is not home]
        results: dict[int, CiteCheck] = {}
        todo = list(range(len(cites)))
        for folder in order:
            if not todo:
                break
            ddir = doc_dir if folder is home else None

            def batch(
                engine: MemoryEngine, idx: list[int], ddir: str | None = ddir
            ) -> list[tuple[int, CiteCheck]]:
                memo: dict[Citation, CiteCheck] = {}
                out = []
                for i in idx:
                    c = cites[i]
                    if c not in memo:
                        memo[c] = check_citation(engine, c, ddir)
                    out.append((i, memo[c]))
                return out

            try:
                async with folder.use() as engine:
                    checked = await folder.read(batch, engine, todo)
            except FolderUnavailable:
                continue
            left = []
            for i, chk in checked:
                if chk.excerpt is not None or i not in results:
                    results[i] = chk
                if chk.excerpt is None and chk.missing:
                    left.append(i)
            todo = left
        return [
            results.get(i) or CiteCheck(c, problem=f"{c.path}: no workspace folder", missing=True)
            for i, c in enumerate(cites)
        ]

    def _doc_lines(self, uri: str) -> list[str] | None:
        text = self._buffer_text(uri)
        return None if text is None else text.split("\n")

    def _codec(self) -> Any:
        return self.ls.workspace.position_codec

    async def citation_at(
        self, uri: str, pos: types.Position
    ) -> tuple[types.Range, CiteCheck] | None:
        lines = self._doc_lines(uri)
        if lines is None or pos.line >= len(lines):
            return None
        line = lines[pos.line]
        col = self._codec().position_from_client_units(lines, pos).character
        found = convert.citation_at(line, col)
        if not found:
            return None
        start, end, cite = found
        (chk,) = await self.check_citations(uri, [cite])
        rng = convert.span_range(lines, pos.line, start, end, self._codec())
        return rng, chk

    async def definition(self, uri: str, pos: types.Position) -> list[types.Location] | None:
        found = await self.citation_at(uri, pos)
        if not found or found[1].excerpt is None or found[1].root is None:
            return None
        chk = found[1]
        assert chk.excerpt is not None and chk.root is not None
        return [convert.excerpt_location(chk.root, chk.excerpt)]

    async def hover(self, uri: str, pos: types.Position) -> types.Hover | None:
        found = await self.citation_at(uri, pos)
        if not found:
            return None
        rng, chk = found
        if chk.excerpt is None:
            if chk.problem is None:
                return None
            return types.Hover(
                contents=types.MarkupContent(
                    kind=types.MarkupKind.Markdown, value=f"memory-ls: {chk.problem}"
                ),
                range=rng,
            )
        return convert.excerpt_hover(chk.excerpt, rng)

    async def document_links(self, uri: str) -> list[types.DocumentLink]:
        lines = self._doc_lines(uri)
        if not lines:
            return []
        spans = list(convert.citation_spans(lines))
        if not spans:
            return []
        checks = await self.check_citations(uri, [s.citation for s in spans])
        codec = self._codec()
        return [
            convert.citation_link(lines, s, convert.file_uri(chk.root, chk.excerpt.path), codec)
            for s, chk in zip(spans, checks, strict=True)
            if chk.excerpt is not None and chk.root is not None
        ]

    def document_symbols(self, uri: str) -> list[types.DocumentSymbol]:
        lines = self._doc_lines(uri)
        return convert.heading_symbols(lines, self._codec()) if lines else []

    # -- diagnostics ------------------------------------------------------------------------
    def schedule_diagnostics(self, uri: str, delay_ms: int | None) -> None:
        if uri.endswith(".jsonl") or self._loop is None:
            return
        old = self._diag_timers.pop(uri, None)
        if old:
            old.cancel()
        delay = (delay_ms if delay_ms is not None else 300) / 1000
        self._diag_timers[uri] = self._loop.call_later(
            delay, lambda: self.spawn(self.publish_diagnostics(uri))
        )

    def _refresh_diagnostics(self, folder: Folder, exclude: str | None = None) -> None:
        # An indexed edit or a sync may fix or break citations in other open documents.
        for uri in list(self.ls.workspace.text_documents):
            if uri != exclude and (
                uri in self._published or "#L" in (self._buffer_text(uri) or "")
            ):
                self.schedule_diagnostics(uri, 500)

    async def publish_diagnostics(self, uri: str) -> None:
        self._diag_timers.pop(uri, None)
        doc = self.ls.workspace.text_documents.get(uri)
        if doc is None:
            return
        lines = doc.source.split("\n")
        version = doc.version
        spans = list(convert.citation_spans(lines))
        checks = await self.check_citations(uri, [s.citation for s in spans]) if spans else []
        codec = self._codec()
        diags = [
            convert.citation_diagnostic(lines, s, chk.problem, codec)
            for s, chk in zip(spans, checks, strict=True)
            if chk.problem
        ]
        cur = self.ls.workspace.text_documents.get(uri)
        if cur is None or cur.version != version:
            return  # edited meanwhile: a newer run is scheduled
        if diags or uri in self._published:
            self.ls.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version)
            )
            if diags:
                self._published.add(uri)
            else:
                self._published.discard(uri)

    # -- messages ---------------------------------------------------------------------------
    def show_once(self, message: str, kind: types.MessageType) -> None:
        if message in self.shown:
            return
        self.shown.add(message)
        self.ls.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def _show_settings_problems(self, folder: Folder) -> None:
        if folder.problems:
            self.show_once(
                f"memory-ls: settings of {folder.name}: " + "; ".join(folder.problems),
                types.MessageType.Warning,
            )
        if folder.error:
            self.show_once(f"memory-ls: {folder.error}", types.MessageType.Error)

    async def _show_degradations(self, folder: Folder) -> None:
        """No model, a fallback, no sqlite-vec: each said once, not on every request."""
        try:
            async with folder.use() as engine:
                st = await folder.read(engine.status)
        except FolderUnavailable:
            return
        if st.get("provider") is None:
            if folder.settings.provider != "none" and st.get("providerReason"):
                self.show_once(
                    f"memory-ls: keyword-only search: {st['providerReason']}",
                    types.MessageType.Info,
                )
        else:
            if st.get("sqliteVec") not in (None, "loaded"):
                self.show_once(f"memory-ls: {st['sqliteVec']}", types.MessageType.Info)
        if st.get("fallbackReason"):
            self.show_once(f"memory-ls: {st['fallbackReason']}", types.MessageType.Warning)

    # -- shutdown ---------------------------------------------------------------------------
    async def shutdown(self) -> None:
        for t in self._diag_timers.values():
            t.cancel()
        for t in list(self._interval_tasks.values()):
            t.cancel()
        self._tasks.cancel()
        if self.watcher:
            self.watcher.stop()
        folders, self.folders = list(self.folders.values()), {}
        for f in folders:
            f.cancel_tasks()
        try:
            await asyncio.wait_for(asyncio.gather(*(f.close() for f in folders)), 10)
        except TimeoutError:
            log.warning("shutdown: an index did not close within 10 s")
        self.reads.shutdown(wait=False, cancel_futures=True)

    def close_now(self) -> None:
        """Process exit without ``shutdown``: close what can be closed quickly."""
        if self.watcher:
            self.watcher.stop()
        for f in list(self.folders.values()):
            f.close_now()
        self.folders = {}
        self.reads.shutdown(wait=False, cancel_futures=True)


class Progress:
    """Work-done progress for one sync: begin, report (files done / total), end.

    The engine calls ``callback`` from a worker thread; reports are throttled and handed to
    the event loop, which sends them in order.
    """

    def __init__(self, service: MemoryService, token: str | None, title: str):
        self.service = service
        self.token = token
        self.title = title
        self.loop = asyncio.get_running_loop()
        self._last = 0.0
        self._last_pct = 0
        self._ending = False

    @classmethod
    async def start(cls, service: MemoryService, title: str) -> Progress:
        token: str | None = None
        if service._cap("window.work_done_progress"):
            token = f"memory-ls-{uuid.uuid4().hex[:12]}"
            try:
                await asyncio.wait_for(service.ls.work_done_progress.create_async(token), 5)
            except Exception as exc:
                log.info("client refused work done progress: %s", exc)
                token = None
        self = cls(service, token, title)
        if token:
            service.ls.work_done_progress.begin(
                token,
                types.WorkDoneProgressBegin(
                    title=title, cancellable=False, percentage=0, message="starting"
                ),
            )
        return self

    def callback(self, done: int, total: int, what: str) -> None:
        if self.token is None or self._ending:
            return
        now = time.monotonic()
        if done < total and now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now
        self.loop.call_soon_threadsafe(self._report, done, total, what)

    def _report(self, done: int, total: int, what: str) -> None:
        if self.token is None:
            return
        pct = int(100 * done / total) if total else 100
        # Percentages may not go backwards; the embedding phase reports as its own 0-100
        # in the message only.
        self._last_pct = max(self._last_pct, pct if what == "indexing" else self._last_pct)
        self.service.ls.work_done_progress.report(
            self.token,
            types.WorkDoneProgressReport(
                message=f"{what} {done}/{total}", percentage=max(0, self._last_pct)
            ),
        )

    def end(self, message: str) -> None:
        if self.token is None or self._ending:
            return
        self._ending = True
        # Reports the worker thread queued before run first: the loop keeps FIFO order.
        self.loop.call_soon(self._end, message)

    def _end(self, message: str) -> None:
        token, self.token = self.token, None
        if token is not None:
            self.service.ls.work_done_progress.end(
                token, types.WorkDoneProgressEnd(message=message)
            )
