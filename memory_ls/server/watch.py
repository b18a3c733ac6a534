"""Which files to watch, and who watches them: the client, or the server's own watcher for
clients that cannot watch files.

The globs are what the server registers with the client (``workspace/didChangeWatchedFiles``).
The watchdog fallback watches only the folders that can hold memory (the root itself, not
recursively, plus ``memory/``, extra paths and transcript folders), never the whole tree: a
recursive watch of a big repository costs one inotify watch per folder, ``node_modules``
included. The folders of ``sessions.roots`` and ``memory.roots`` are watched too (recursively,
each one named by the user).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.capabilities import get_capability

from .. import roots
from ..settings import Settings
from ..workspace import MEMORY_DIR

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from .folder import Folder
    from .folders import Folders

log = logging.getLogger(__name__)

SETTINGS_FILE = ".memory-ls.toml"
WATCH_REGISTRATION = "memory-ls-watch"
REGISTER_TIMEOUT_S = 5
_WILDCARDS = set("*?[{")


def memory_globs(settings: Settings) -> list[str]:
    """Globs relative to a workspace folder that match its memory files and its settings."""
    globs = ["MEMORY.md", "memory.md", f"{MEMORY_DIR}/**/*.md", SETTINGS_FILE]
    for extra in settings.extra_paths:
        e = extra.strip().strip("/").removeprefix("./")
        if e:
            globs += [e] if e.endswith(".md") else [f"{e}/**/*.md"]
    if "sessions" in settings.sources:
        globs += [g.removeprefix("./") for g in settings.sessions.globs]
    return list(dict.fromkeys(globs))


def folder_globs(globs: list[str]) -> list[str]:
    """The folders that hold memory files by a ``**`` glob, themselves and every folder below
    them, watched for being made and deleted: a client reports a deleted folder by one event
    for the folder (VS Code may send none for the files in it, which match the file globs),
    and misses a note written into a folder the moment it is made."""
    out: list[str] = []
    for glob in globs:
        prefix = _static_prefix(glob)
        if prefix and "**" in glob:
            out += [prefix, f"{prefix}/**"]
    return list(dict.fromkeys(out))


def _static_prefix(glob: str) -> str:
    """The folder part of a glob before its first wildcard (``a/b/*.jsonl`` -> ``a/b``)."""
    fixed: list[str] = []
    for part in glob.split("/"):
        if _WILDCARDS & set(part):
            break
        fixed.append(part)
    else:
        fixed = fixed[:-1]  # no wildcard: a file; watch its folder
    return "/".join(fixed)


def watch_dirs(root: Path, settings: Settings) -> list[tuple[Path, bool]]:
    """(folder, recursive) pairs the fallback watcher needs for one workspace folder."""
    dirs: list[tuple[Path, bool]] = [(root, False), (root / MEMORY_DIR, True)]
    for extra in settings.extra_paths:
        p = root / extra.strip().removeprefix("./")
        dirs.append((p, True) if not extra.endswith(".md") else (p.parent, False))
    if "sessions" in settings.sources:
        for g in settings.sessions.globs:
            dirs.append((root / _static_prefix(g.removeprefix("./")), True))
    dirs += [(r.folder, True) for r in roots.configured(settings, root)[0].values()]
    seen: dict[Path, bool] = {}
    for d, rec in dirs:
        seen[d] = seen.get(d, False) or rec
    return list(seen.items())


class ServerWatcher:
    """watchdog observers over the memory folders; calls ``on_change(path, is_dir)`` from the
    watchdog thread for every created / changed / deleted / moved file or new folder."""

    def __init__(self, on_change: Callable[[Path, bool], None]):
        from watchdog.observers import Observer

        self._on_change = on_change
        self._observer = Observer()
        self._observer.daemon = True
        self._observer.start()
        self._watches: dict[Path, list[object]] = {}
        self._handlers: dict[Path, object] = {}
        self._lock = threading.Lock()

    def watch(self, root: Path, settings: Settings) -> None:
        from watchdog.events import FileSystemEvent, FileSystemEventHandler

        watcher = self
        wanted = watch_dirs(root, settings)

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                if event.event_type in ("opened", "closed_no_write", "attrib"):
                    return
                for raw in (event.src_path, getattr(event, "dest_path", "")):
                    if not raw:
                        continue
                    p = Path(raw if isinstance(raw, str) else raw.decode())
                    if event.is_directory:
                        if event.event_type in ("created", "moved"):
                            watcher._new_dir(root, p, wanted)
                            watcher._on_change(p, True)
                        elif event.event_type == "deleted":
                            # A folder moved out of the watched tree comes as this one event,
                            # none for its files: they stayed in the index.
                            watcher._on_change(p, True)
                    elif p.suffix in (".md", ".jsonl", ".toml"):
                        watcher._on_change(p, False)

        handler = Handler()
        with self._lock:
            self.unwatch(root)
            watches: list[object] = []
            self._watches[root] = watches
            self._handlers[root] = handler
            for d, rec in wanted:
                self._schedule(root, d, rec)

    def _schedule(self, root: Path, d: Path, recursive: bool) -> None:
        if not d.is_dir() or d.is_symlink():
            return
        try:
            self._watches[root].append(
                self._observer.schedule(
                    self._handlers[root],  # type: ignore[arg-type]
                    str(d),
                    recursive=recursive,
                )
            )
        except OSError as exc:  # e.g. out of inotify watches: degrade to no watching
            log.warning("cannot watch %s: %s", d, exc)

    def _new_dir(self, root: Path, p: Path, wanted: list[tuple[Path, bool]]) -> None:
        # memory/ (or an extra folder) created after start, or made again after it was deleted
        # or moved away: start watching it now. watchdog keeps the old folder's watch under
        # its path (its emitter ended with that folder, or follows it where it went) and
        # scheduling the same path again starts nothing: drop it first.
        for d, rec in wanted:
            if rec and d == p and root in self._watches:
                with self._lock:
                    watches = self._watches[root]
                    for w in [w for w in watches if getattr(w, "path", None) == str(d)]:
                        watches.remove(w)
                        with contextlib.suppress(Exception):  # already gone with its folder
                            self._observer.unschedule(w)  # type: ignore[arg-type]
                    self._schedule(root, d, True)

    def unwatch(self, root: Path) -> None:
        self._handlers.pop(root, None)
        for w in self._watches.pop(root, []):
            with contextlib.suppress(Exception):  # already gone with its folder
                self._observer.unschedule(w)  # type: ignore[arg-type]

    def stop(self) -> None:
        with contextlib.suppress(Exception):  # stopping twice or after a failed start
            self._observer.stop()


class Watching:
    """Who watches the memory files: the client (``mode`` "client", registered for the memory
    globs of every folder that wants watching), else our watcher ("server"), else nobody
    ("off": searches still sync dirty files). ``on_change(path, is_dir)`` runs on the loop."""

    def __init__(
        self, ls: LanguageServer, folders: Folders, on_change: Callable[[Path, bool], None]
    ):
        self.ls = ls
        self.folders = folders
        self.on_change = on_change
        self.mode = "off"  # "client" | "server" | "off"
        self.watcher: ServerWatcher | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def setup(self) -> None:
        """(Re)start watching every folder; after start, settings and folder changes."""
        self._loop = asyncio.get_running_loop()
        if not any(f.settings.sync.watch for f in self.folders):
            await self._stop_watching()  # sync.watch turned off at runtime
            return
        caps = self.ls.client_capabilities
        if (
            get_capability(caps, "workspace.did_change_watched_files.dynamic_registration", False)
            and await self._register()
        ):
            self.mode = "client"
            return
        self.mode = "server"
        if self.watcher is None:
            try:
                self.watcher = ServerWatcher(self._from_thread)
            except Exception as exc:  # no inotify, etc.: searches still sync dirty files
                log.warning("cannot watch files: %s", exc)
                self.mode = "off"
                return
        for folder in self.folders:
            if folder.settings.sync.watch:
                self.watcher.watch(folder.root, folder.settings)
            else:
                self.watcher.unwatch(folder.root)

    async def _stop_watching(self) -> None:
        if self.mode == "client":
            try:
                await self._unregister()
            except Exception as exc:  # its events still come: indexing them does no harm
                log.info("client refused to stop watching files (%s)", exc)
        elif self.watcher is not None:
            for folder in self.folders:
                self.watcher.unwatch(folder.root)
        self.mode = "off"

    async def _unregister(self) -> None:
        await asyncio.wait_for(
            self.ls.client_unregister_capability_async(
                types.UnregistrationParams(
                    unregisterations=[
                        types.Unregistration(
                            id=WATCH_REGISTRATION, method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES
                        )
                    ]
                )
            ),
            REGISTER_TIMEOUT_S,
        )

    def _from_thread(self, path: Path, is_dir: bool) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.on_change, path, is_dir)

    async def _register(self) -> bool:
        relative = get_capability(
            self.ls.client_capabilities,
            "workspace.did_change_watched_files.relative_pattern_support",
            False,
        )
        watchers: list[types.FileSystemWatcher] = []
        for folder in self.folders:
            if not folder.settings.sync.watch:
                continue
            globs = memory_globs(folder.settings)
            made_or_gone = types.WatchKind.Create | types.WatchKind.Delete
            for glob, kind in [(g, None) for g in globs] + [
                (g, made_or_gone) for g in folder_globs(globs)
            ]:
                pattern: Any = (
                    types.RelativePattern(base_uri=folder.uri, pattern=glob)
                    if relative
                    else f"**/{glob}"
                )
                watchers.append(types.FileSystemWatcher(glob_pattern=pattern, kind=kind))
            if relative:  # the roots lie outside the folder: only a base URI reaches them
                for r in folder.workspace.roots.values():
                    base = r.folder.as_uri()
                    watchers += [
                        types.FileSystemWatcher(
                            glob_pattern=types.RelativePattern(base_uri=base, pattern=g)
                        )
                        for g in r.globs
                    ]
        try:
            if self.mode == "client":  # the globs changed: replace the registration
                await self._unregister()
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
                REGISTER_TIMEOUT_S,
            )
            return True
        except Exception as exc:
            log.info("client refused file watching (%s); watching files in the server", exc)
            return False

    def unwatch(self, folder: Folder) -> None:
        if self.watcher:
            self.watcher.unwatch(folder.root)

    def stop(self) -> None:
        if self.watcher:
            self.watcher.stop()
