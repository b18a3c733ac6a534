"""Which files to watch, and the server's own watcher for clients that cannot watch files.

The globs are what the server registers with the client (``workspace/didChangeWatchedFiles``).
The watchdog fallback watches only the folders that can hold memory (the root itself, not
recursively, plus ``memory/``, extra paths and transcript folders), never the whole tree: a
recursive watch of a big repository costs one inotify watch per folder, ``node_modules``
included.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from ..settings import Settings
from ..workspace import MEMORY_DIR

log = logging.getLogger(__name__)

SETTINGS_FILE = ".memory-ls.toml"
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
                    self._handlers[root],
                    str(d),
                    recursive=recursive,  # type: ignore[arg-type]
                )
            )
        except OSError as exc:  # e.g. out of inotify watches: degrade to no watching
            log.warning("cannot watch %s: %s", d, exc)

    def _new_dir(self, root: Path, p: Path, wanted: list[tuple[Path, bool]]) -> None:
        # memory/ (or an extra folder) created after start: start watching it now.
        for d, rec in wanted:
            if rec and d == p and root in self._watches:
                with self._lock:
                    self._schedule(root, d, True)

    def unwatch(self, root: Path) -> None:
        self._handlers.pop(root, None)
        for w in self._watches.pop(root, []):
            with contextlib.suppress(Exception):  # already gone with its folder
                self._observer.unschedule(w)  # type: ignore[arg-type]

    def stop(self) -> None:
        with contextlib.suppress(Exception):  # stopping twice or after a failed start
            self._observer.stop()
