"""The server's state and lifecycle, between the pygls handlers (app.py) and the engines.

Builds the parts, each with one job, and runs what involves several of them: opening the
folders after ``initialized``, reloading a folder whose settings changed, folders added and
removed, the interval sync, shutdown.

- ``folders``: the workspace folders and routing (``Folders``), their settings (``Configuration``)
- ``documents``: document sync, files changed on disk, diagnostics (``Documents``)
- ``citations``: definition, hover, links and diagnostics of citations (``Citations``)
- ``requests``: the custom requests and commands, ``workspace/symbol`` (``Requests``)
- ``health``: the memory checks' diagnostics and code actions (``Health``)
- ``watch``: who watches the memory files (``Watching``)
- ``progress``, ``messages``: work-done progress, popups said once
- ``workers``: one ``Folder`` (engine + lanes) per workspace folder; nothing slow on the loop
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path

from ..engine import index_path_for
from ..params import ParamError
from ..settings import UNREADABLE, Settings, to_dict
from .citations import Citations
from .documents import Documents, buffer_text
from .folder import Folder, FolderHooks, FolderUnavailable
from .folders import CLIENT_TIMEOUT_S, Configuration, Folders
from .health import Health
from .lanes import TaskSet
from .messages import Messages
from .progress import SyncOutcome, sync_with_progress
from .requests import Requests
from .watch import Watching

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

READ_THREADS = 4
CLOSE_TIMEOUT_S = 10


def _index_file(settings: Settings, root: Path) -> Path | None:
    try:
        return index_path_for(settings, root).resolve()
    except (OSError, RuntimeError, ValueError):  # the engine says why it cannot open it
        return None


class MemoryService:
    def __init__(self, ls: LanguageServer, init_options: Any = None):
        self.ls = ls
        self.reads = ThreadPoolExecutor(
            max_workers=READ_THREADS, thread_name_prefix="memory-ls-read"
        )
        self.folders = Folders()
        self.config = Configuration(ls, init_options)
        self.messages = Messages(ls)
        self.citations = Citations(
            self.folders, partial(buffer_text, ls), ls.workspace.position_codec
        )
        self.documents = Documents(
            ls,
            self.folders,
            self.citations,
            settings_changed=self._settings_file_changed,
            spawn=self.spawn,
        )
        self.health = Health(self.folders, self.documents, ls.workspace.position_codec)
        self.watching = Watching(ls, self.folders, self.documents.fs_changed)
        self.requests = Requests(self.folders, self.sync, lambda: self.watching.mode)
        self._tasks = TaskSet("memory-ls", quiet=(FolderUnavailable,))
        self._interval_tasks: dict[str, asyncio.Task[None]] = {}

    def spawn(self, coro: Any) -> asyncio.Future[Any]:
        return self._tasks.spawn(coro)

    async def sync(self, folder: Folder, reason: str, force: bool) -> SyncOutcome:
        return await sync_with_progress(self.ls, folder, reason, force)

    # -- folders ----------------------------------------------------------------------------
    def _settings_for(self, uri: str, root: Path) -> tuple[Settings, list[str]]:
        """The folder's settings, with an index file of its own: a ``store.path`` set for
        every folder (user config, initializationOptions) made them share one index, where
        each folder's sync dropped the others' files and hits named files of the wrong
        folder. The first folder (in the workspace's order) that names the file keeps it;
        decided from the settings, not from which engine opened first."""
        settings, problems = self.config.settings_for(uri, root)
        if not settings.store.path:
            return settings, problems
        mine = _index_file(settings, root)
        earlier = itertools.takewhile(lambda f: f.uri != uri, self.folders)
        for f in earlier if mine is not None else ():
            if _index_file(self.config.settings_for(f.uri, f.root)[0], f.root) == mine:
                problems.append(
                    f"store.path: {settings.store.path} is the index of {f.name} already; "
                    "this folder keeps its own index file"
                )
                settings.store.path = ""
                break
        return settings, problems

    def _new_folder(self, uri: str) -> Folder | None:
        fs = to_fs_path(uri)
        if not fs:
            log.warning("ignoring workspace folder %s: not a local folder", uri)
            return None
        try:
            root = Path(fs).resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # a NUL byte (%00) in the URI
            log.warning("ignoring workspace folder %s: %s", uri, exc)
            return None
        if same := next((f for f in self.folders if f.root == root), None):
            # The same folder under another URI (`a/`, a symlink): a second engine on the
            # same index would answer every search twice.
            log.info("ignoring workspace folder %s: the same folder as %s", uri, same.uri)
            return None
        settings, problems = self._settings_for(uri, root)
        hooks = FolderHooks(
            get_text=partial(buffer_text, self.ls),
            on_indexed=self._indexed,
            on_synced=self._synced,
            on_degraded=self._embedded,
        )
        return Folder(uri, root, settings, problems, reads=self.reads, hooks=hooks)

    def _indexed(self, folder: Folder, uri: str) -> None:
        self.documents.refresh_diagnostics(folder, exclude=uri)
        self.health.schedule(folder)

    def _synced(self, folder: Folder) -> None:
        self.documents.refresh_diagnostics(folder)
        self.health.schedule(folder)

    def _embedded(self, folder: Folder) -> None:
        self.messages.embedding_degraded(folder)
        self.health.schedule(folder, vectors=True)  # close pairs the line vectors can decide

    def add_initial_folders(
        self, folders: Sequence[types.WorkspaceFolder] | None, root_uri: str | None
    ) -> None:
        uris = [f.uri for f in folders or []] or ([root_uri] if root_uri else [])
        for uri in uris:
            if uri not in self.folders and (folder := self._new_folder(uri)):
                self.folders.add(folder)

    async def start(self) -> None:
        """After ``initialized``: pull settings, open engines, watch, first sync."""
        await self.config.pull(list(self.folders))
        await self.config.register()
        await asyncio.gather(*(self._open(f) for f in self.folders))
        await self.watching.setup()
        for folder in self.folders:
            self._start_folder(folder)

    async def _open(
        self, folder: Folder, settings: Settings | None = None, problems: list[str] | None = None
    ) -> None:
        if settings is None:
            settings, problems = await asyncio.to_thread(
                self._settings_for, folder.uri, folder.root
            )
        await folder.open(settings, problems)
        self._apply_log_level()
        self.messages.folder_opened(folder)
        await self.messages.degradations(folder)

    def _apply_log_level(self) -> None:
        # The first folder's logLevel: the log is the server's, not a folder's.
        setup = getattr(self.ls, "setup_logging", None)
        first = self.folders.first()
        if setup is not None and first is not None:
            setup(first.settings.log_level)

    def _start_folder(self, folder: Folder) -> None:
        folder.spawn(self.sync(folder, "startup", False))
        folder.watch_team()  # a team index back after an outage gets its writes
        self._start_interval(folder)

    def _start_interval(self, folder: Folder) -> None:
        self._stop_interval(folder)
        minutes = folder.settings.sync.interval_minutes
        if minutes <= 0:
            return

        async def tick() -> None:
            while not folder.closed:
                await asyncio.sleep(minutes * 60)
                await folder.sync("interval")

        self._interval_tasks[folder.uri] = asyncio.ensure_future(tick())

    def _stop_interval(self, folder: Folder) -> None:
        task = self._interval_tasks.pop(folder.uri, None)
        if task:
            task.cancel()

    # -- changes ----------------------------------------------------------------------------
    def _settings_file_changed(self, folder: Folder) -> None:
        self.spawn(self.reload(folder))

    async def configuration_changed(self, settings: Any) -> None:
        """``workspace/didChangeConfiguration``: pull (or take) the new settings and reopen
        every engine whose effective settings changed; a changed index meta rebuilds."""
        await self.config.changed(settings, list(self.folders))
        await asyncio.gather(*(self.reload(f) for f in self.folders))

    async def reload(self, folder: Folder) -> None:
        # Compared with what the folder was opened with: VS Code sends didChangeConfiguration
        # the moment the server registers for it, while the folder is still being opened,
        # and without an engine yet the folder was opened (and synced) a second time.
        await folder.opened()
        settings, problems = await asyncio.to_thread(self._settings_for, folder.uri, folder.root)
        if folder.engine is not None and any(UNREADABLE in p for p in problems):
            # A settings file saved half-edited: read as empty, it would put the defaults
            # back (another provider, other chunks) and rebuild the index, and again once
            # fixed. The folder keeps its settings until the file reads again.
            log.warning("%s: a settings file cannot be read; keeping the settings", folder.name)
            settings = folder.settings
        if to_dict(settings) == to_dict(folder.settings) and folder.engine is not None:
            if problems != folder.problems:
                # A bad value is ignored, so the settings stay as they were: the problem (or
                # that it was fixed) must still reach the status and the user.
                folder.problems = problems
                self.messages.folder_opened(folder)
            return
        log.info("%s: settings changed; reopening the index", folder.name)
        await self._open(folder, settings, problems)
        self.documents.reapply(folder)
        await self.watching.setup()  # also when sync.watch was off: it may be on now
        self._start_interval(folder)
        folder.watch_team()
        folder.spawn(self.sync(folder, "settings", False))

    async def folders_changed(
        self, added: Iterable[types.WorkspaceFolder], removed: Iterable[types.WorkspaceFolder]
    ) -> None:
        for f in removed:
            folder = self.folders.pop(f.uri)
            if folder:
                self.watching.unwatch(folder)
                self._stop_interval(folder)
                self.health.forget(folder)
                await folder.close()
        new: list[Folder] = []
        for f in added:  # one by one: an event may name the same folder twice
            if f.uri not in self.folders and (folder := self._new_folder(f.uri)):
                self.folders.add(folder)
                new.append(folder)
        await self.config.pull(new)
        await asyncio.gather(*(self._open(f) for f in new))
        await self.watching.setup()  # also when no folder watched: a new one may want to
        for folder in new:
            self._start_folder(folder)
            self.documents.folder_added(folder)

    async def open_location(self, args: tuple[Any, ...]) -> bool:
        """``memory.open [uri, startLine, endLine]`` (1-based lines): the client shows the
        file with those lines selected (``window/showDocument``); whether it did."""
        try:
            uri, first, last = str(args[0]), int(args[1]), int(args[2])
        except (IndexError, TypeError, ValueError):
            raise ParamError("arguments", "expected [uri, startLine, endLine]") from None
        if not uri.startswith("file:") or first < 1 or last < first:
            raise ParamError("arguments", "expected a file URI and 1-based lines")
        selection = types.Range(
            start=types.Position(line=first - 1, character=0),
            end=types.Position(line=last, character=0),
        )
        try:
            shown = await asyncio.wait_for(
                self.ls.window_show_document_async(
                    types.ShowDocumentParams(uri=uri, take_focus=True, selection=selection)
                ),
                CLIENT_TIMEOUT_S,
            )
        except Exception as exc:  # a client without window/showDocument
            log.info("window/showDocument failed: %s", exc)
            return False
        return bool(shown and shown.success)

    # -- shutdown ---------------------------------------------------------------------------
    async def shutdown(self) -> None:
        self.documents.cancel()
        self.health.cancel()
        for t in list(self._interval_tasks.values()):
            t.cancel()
        self._tasks.cancel()
        self.watching.stop()
        folders = self.folders.clear()
        for f in folders:
            f.cancel_tasks()
        try:
            await asyncio.wait_for(asyncio.gather(*(f.close() for f in folders)), CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning("shutdown: an index did not close within %d s", CLOSE_TIMEOUT_S)
        self.reads.shutdown(wait=False, cancel_futures=True)

    def close_now(self) -> None:
        """Process exit without ``shutdown``: close what can be closed quickly."""
        self.watching.stop()
        for f in self.folders.clear():
            f.close_now()
        self.reads.shutdown(wait=False, cancel_futures=True)
