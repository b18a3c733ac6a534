"""Scheduling engine work off the event loop: lanes, debounces, syncs and background embedding.

Each workspace folder has two single-thread *lanes* (ordered queues of engine writes) and shares
a thread pool for reads:

- the edit lane runs short writes in order: buffer text (``set_document``), ``clear_document``,
  ``mark_dirty`` / ``sync_dirty``. Keeping them apart from syncs means a keystroke is indexed
  while a full rebuild builds its new database beside the old one.
- the background lane runs syncs and embedding. Embedding yields (between batches) to a
  waiting sync, a settings reload or shutdown; nothing embedded is lost, vectors are committed
  per batch. A team index back after an outage is tried and caught up there too
  (``keep_team``).
- reads (search, get, status, citation checks) go to the shared pool: the engine gives each
  reader its own connection, so they never wait for a writer.

Every use of the engine happens inside ``Folder.use()``, which counts the calls in flight, so
a settings reload or a removed folder can close the engine only once nothing is using it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from ..engine import MemoryEngine
from ..engine.route import retry_pause
from ..index.sync import Progress, SyncReport
from ..settings import Settings
from ..workspace import Workspace
from .lanes import Lane, Requests, TaskSet

log = logging.getLogger(__name__)
T = TypeVar("T")


class FolderUnavailable(Exception):
    """The folder was removed, or its engine could not be opened."""


@dataclass
class FolderHooks:
    """What a folder needs from the server, as plain callbacks (all run on the event loop)."""

    get_text: Callable[[str], str | None]  # uri -> open buffer text
    on_indexed: Callable[[Folder, str], None]  # a buffer was indexed
    on_synced: Callable[[Folder], None]  # files changed in the index (sync, watch)
    on_degraded: Callable[[Folder], None]  # embedding may have fallen back


class Folder:
    """One workspace folder: its engine, its lanes, its debounced edits and syncs."""

    def __init__(
        self,
        uri: str,
        root: Path,
        settings: Settings,
        problems: list[str],
        *,
        reads: Executor,
        hooks: FolderHooks,
    ):
        self.uri = uri
        self.root = root
        self.name = root.name or str(root)
        self.settings = settings
        self.problems = problems
        self.workspace = Workspace(root, settings)
        self.engine: MemoryEngine | None = None
        self.error: str | None = None
        self.closed = False
        self.syncing = False
        self._reads = reads
        self._hooks = hooks
        self._edits = Lane(f"memory-ls-edit:{self.name}")
        self._background = Lane(f"memory-ls-sync:{self.name}")
        self._ready = asyncio.Event()
        self.first_sync = asyncio.Event()  # set when the folder's first sync ended (or failed)
        self._idle = asyncio.Event()
        self._idle.set()
        self._in_flight = 0
        self.requests = Requests()  # running now: long background work yields to them
        self._stop = threading.Event()  # read by the lane threads: stop embedding now
        self._timers: dict[str, tuple[asyncio.TimerHandle, str]] = {}
        self._versions: dict[str, int] = {}
        self._edit_tasks: set[asyncio.Future[Any]] = set()
        self._watch_timer: asyncio.TimerHandle | None = None
        self._sync_lock = asyncio.Lock()
        self._sync_requested = 0
        self._sync_completed = 0
        self._sync_waiting = 0
        self._want_force = False
        self._last_report: SyncReport | None = None
        self._embed_task: asyncio.Task[None] | None = None
        self._embed_again = False
        self._tasks = TaskSet(self.name, quiet=(FolderUnavailable,))
        self._team_timer: asyncio.Future[Any] | None = None  # keep_team, for a team folder
        self._open_lock = asyncio.Lock()

    # -- engine lifetime --------------------------------------------------------------------
    async def open(
        self,
        settings: Settings | None = None,
        problems: list[str] | None = None,
        index_path: Path | None = None,
    ) -> None:
        """Open the engine, or replace it after a settings change (the new one rebuilds
        safely if the index meta changed). Waits for every call in flight on the old one."""
        async with self._open_lock:  # two reloads at once would leak an engine
            await self._open(settings, problems, index_path)

    async def _open(
        self, settings: Settings | None, problems: list[str] | None, index_path: Path | None
    ) -> None:
        self._ready.clear()
        self._stop.set()
        while self._in_flight:
            await self._idle.wait()
        if settings is not None:
            self.settings, self.problems = settings, problems or []
            self.workspace = Workspace(self.root, self.settings)
        old, self.engine = self.engine, None
        new_settings = self.settings

        def swap() -> MemoryEngine:
            if old is not None:
                old.close()
            return MemoryEngine(self.root, new_settings, index_path=index_path)

        try:
            self.engine = await asyncio.wrap_future(self._background.submit(swap))
            self.error = None
        except Exception as exc:  # the folder stays, unusable, and says why
            self.error = f"cannot open the index for {self.root}: {exc}"
            log.error("%s", self.error)
        finally:
            self._stop.clear()
            self._ready.set()

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for handle, _ in self._timers.values():
            handle.cancel()
        self._timers.clear()
        if self._watch_timer:
            self._watch_timer.cancel()
        self._ready.clear()
        self._stop.set()
        while self._in_flight:
            await self._idle.wait()
        engine, self.engine = self.engine, None
        self._ready.set()  # waiters wake up and see the folder closed
        if engine is not None:
            await asyncio.wrap_future(self._background.submit(engine.close))
        self._edits.close()
        self._background.close()

    def close_now(self, timeout: float = 5.0) -> None:
        """Best-effort close from outside the event loop (process exit)."""
        self.closed = True
        self._stop.set()
        engine, self.engine = self.engine, None
        if engine is not None:
            with contextlib.suppress(Exception):
                self._background.submit(engine.close).result(timeout)
        self._edits.close()
        self._background.close()

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[MemoryEngine]:
        await self._ready.wait()
        if self.closed:
            raise FolderUnavailable(f"{self.root}: workspace folder closed")
        if self.engine is None:
            raise FolderUnavailable(self.error or f"{self.root}: no index")
        self._in_flight += 1
        self._idle.clear()
        try:
            yield self.engine
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    async def opened(self) -> None:
        """Wait until the folder's engine is open (or failed to open, or the folder closed)."""
        await self._ready.wait()

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and self.engine is not None

    # -- running work -----------------------------------------------------------------------
    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a request's reads on the read pool (background work yields to them)."""
        with self.requests.serving():
            return await self.read_aside(fn, *args)

    async def read_aside(self, fn: Callable[..., T], *args: Any) -> T:
        """Long background reads (the memory checks): on the read pool, not a request."""
        return await asyncio.get_running_loop().run_in_executor(self._reads, partial(fn, *args))

    async def _edit(self, fn: Callable[..., T], *args: Any) -> T:
        with self.requests.serving():  # an edit indexed is a request too
            return await asyncio.wrap_future(self._edits.submit(fn, *args))

    async def _bg(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.wrap_future(self._background.submit(fn, *args))

    def spawn(self, coro: Any) -> asyncio.Future[Any]:
        return self._tasks.spawn(coro)

    # -- editor buffers ---------------------------------------------------------------------
    def is_memory(self, rel: str) -> bool:
        return self.workspace.classify(rel) is not None

    def doc_changed(self, uri: str, rel: str, delay_ms: int | None = None) -> None:
        """Index the buffer after the edit debounce; each new change restarts the wait."""
        delay = self.settings.sync.edit_debounce_ms if delay_ms is None else delay_ms
        old = self._timers.pop(uri, None)
        if old:
            old[0].cancel()
        loop = asyncio.get_running_loop()
        self._timers[uri] = (loop.call_later(delay / 1000, self._fire, uri, rel), rel)

    def doc_saved(self, uri: str, rel: str, text: str | None) -> None:
        old = self._timers.pop(uri, None)
        if old:
            old[0].cancel()
        text = text if text is not None else self._hooks.get_text(uri)
        if text is not None:
            self._doc_op(uri, rel, text)

    def doc_closed(self, uri: str, rel: str) -> None:
        old = self._timers.pop(uri, None)
        if old:
            old[0].cancel()
        self._doc_op(uri, rel, None)

    def _fire(self, uri: str, rel: str) -> None:
        self._timers.pop(uri, None)
        text = self._hooks.get_text(uri)
        if text is not None:
            self._doc_op(uri, rel, text)

    def _doc_op(self, uri: str, rel: str, text: str | None) -> None:
        # A newer op on the same file makes older queued ones moot: the lane skips them, so a
        # burst of edits costs one indexing, and a close is never undone by a late edit.
        version = self._versions[rel] = self._versions.get(rel, 0) + 1
        task = asyncio.ensure_future(self._run_doc_op(uri, rel, text, version))
        self._edit_tasks.add(task)
        task.add_done_callback(self._edit_tasks.discard)
        task.add_done_callback(self._tasks.log_failure)

    async def _run_doc_op(self, uri: str, rel: str, text: str | None, version: int) -> None:
        def work(engine: MemoryEngine) -> bool:
            if self._versions.get(rel) != version:
                return False
            if text is None:
                engine.clear_document(rel)
                return True
            return engine.set_document(rel, text)

        async with self.use() as engine:
            changed = await self._edit(work, engine)
        if changed:
            self.request_embed()
            self._hooks.on_indexed(self, uri)

    async def flush(self, timeout: float | None = None) -> bool:
        """Apply pending debounced edits now and wait for every queued edit, so a search is
        never staler than the last keystroke. An edit can be stuck behind a long sync that
        holds the writer; after ``timeout`` seconds the caller goes ahead without it.
        Returns whether everything was applied."""
        for uri, (handle, rel) in list(self._timers.items()):
            handle.cancel()
            self._fire(uri, rel)
        if not self._edit_tasks:
            return True
        # wait(), not gather(): a cancelled search must not cancel the edits it waits for.
        _, pending = await asyncio.wait(list(self._edit_tasks), timeout=timeout)
        if pending:
            log.info(
                "%s: answering without %d edit(s) still waiting for the index writer",
                self.name,
                len(pending),
            )
        return not pending

    @property
    def flush_budget(self) -> float:
        return max(1.0, self.settings.sync.search_budget_ms / 1000)

    @property
    def pending_edits(self) -> int:
        return len(self._timers) + len(self._edit_tasks)

    # -- files changed outside the editor ---------------------------------------------------
    def files_changed(self, rels: list[str]) -> None:
        """Mark the files dirty now (the next search syncs them within its time budget) and
        sync them after the watch debounce."""

        async def mark() -> None:
            async with self.use() as engine:
                await self._edit(engine.mark_dirty, rels)

        task = asyncio.ensure_future(mark())
        self._edit_tasks.add(task)
        task.add_done_callback(self._edit_tasks.discard)
        task.add_done_callback(self._tasks.log_failure)
        if self._watch_timer:
            self._watch_timer.cancel()
        delay = self.settings.sync.watch_debounce_ms / 1000
        self._watch_timer = asyncio.get_running_loop().call_later(
            delay, lambda: self.spawn(self._sync_dirty())
        )

    async def _sync_dirty(self) -> None:
        self._watch_timer = None
        async with self.use() as engine:
            report = await self._edit(engine.sync_dirty)
        if report and (report.indexed or report.removed):
            self.request_embed()
            self._hooks.on_synced(self)

    # -- syncs ------------------------------------------------------------------------------
    async def sync(
        self, reason: str, force: bool = False, progress: Progress | None = None
    ) -> SyncReport | None:
        """Keyword sync (or safe rebuild), coalesced: a caller whose request was already
        covered by a sync that started after it gets that sync's report."""
        self._sync_requested += 1
        ticket = self._sync_requested
        self._want_force |= force
        self._sync_waiting += 1  # makes a running embedding step aside
        try:
            async with self._sync_lock:
                if self._sync_completed >= ticket:
                    return self._last_report
                covers, force = self._sync_requested, self._want_force
                self._want_force = False
                self.syncing = True
                try:
                    async with self.use() as engine:
                        report = await self._bg(engine.sync, reason, force, progress, False)
                finally:
                    self.syncing = False
                    self.first_sync.set()
                self._sync_completed, self._last_report = covers, report
        finally:
            self._sync_waiting -= 1
        self.request_embed()
        self._hooks.on_synced(self)
        return report

    def _should_stop(self) -> bool:
        return self._stop.is_set() or self._sync_waiting > 0

    async def embed(self, progress: Progress | None = None) -> int:
        """Embed every chunk still without a vector (no-op when keyword-only)."""
        async with self.use() as engine:
            if engine.provider is None:
                return 0
            n = await self._bg(engine.embed_pending, progress, None, self._should_stop)
        self._hooks.on_degraded(self)
        return n

    def request_embed(self) -> None:
        """Embed new chunks in the background; requests made meanwhile coalesce."""
        if self.closed or self.engine is None or self.engine.provider is None:
            return
        if self._embed_task and not self._embed_task.done():
            self._embed_again = True
            return
        self._embed_task = asyncio.ensure_future(self._embed_loop())
        self._embed_task.add_done_callback(self._tasks.log_failure)

    async def _embed_loop(self) -> None:
        while True:
            self._embed_again = False
            await self.embed()
            # A waiting sync re-requests embedding when it is done.
            if self._sync_waiting or not self._embed_again or self.closed:
                return

    # -- the team index after an outage ----------------------------------------------------
    def watch_team(self) -> None:
        """Start ``keep_team`` when the folder keeps a team index (once; again when a settings
        reload makes it one). A folder of its own has nothing to retry: no timer."""
        if self.settings.store.backend != "postgres":
            return
        if self._team_timer is None or self._team_timer.done():
            self._team_timer = self.spawn(self.keep_team())

    async def keep_team(self) -> None:
        """While the team index cools down after a failure: try it again once the cooldown
        is over and, when it answers, push what this folder changed meanwhile (writes and
        removals), without waiting for a search or an edit. The loop only sleeps and asks;
        the try runs on the background lane."""
        await self.first_sync.wait()
        while not self.closed and self.settings.store.backend == "postgres":
            await asyncio.sleep(retry_pause(self._team_wait()))
            if self.closed or self._team_wait() != 0:
                continue
            try:
                async with self.use() as engine:
                    await self._bg(engine.retry_team)
            except FolderUnavailable:
                continue  # closed (the loop ends), or reopening with other settings
            except Exception:
                log.exception("%s: trying the team index again failed", self.name)
                continue
            if self._team_wait() is None:  # back: the chunks pushed meanwhile want vectors
                self.request_embed()

    def _team_wait(self) -> float | None:
        engine = self.engine
        return None if engine is None else engine.team_retry_in()

    def cancel_tasks(self) -> None:
        self._tasks.cancel()
