"""Where engine work runs: ``Lane`` (one thread, calls in order), ``TaskSet`` (background
asyncio tasks kept alive, their failures logged), ``Supersede`` (one call at a time, the
newest waiting one wins) and ``Requests`` (what long background work yields to)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class TaskSet:
    """Background asyncio tasks kept alive until done, their failures logged, cancellable."""

    def __init__(self, name: str, quiet: tuple[type[BaseException], ...] = ()) -> None:
        self.name = name
        self.quiet = quiet  # expected failures, not logged
        self._tasks: set[asyncio.Future[Any]] = set()

    def spawn(self, coro: Any) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        self.log_failure(task)

    def log_failure(self, task: asyncio.Future[Any]) -> None:
        """Log a failed task (also for tasks tracked elsewhere)."""
        exc = None if task.cancelled() else task.exception()
        if exc is not None and not isinstance(exc, self.quiet):
            log.error("%s: background task failed: %s", self.name, exc, exc_info=exc)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()


class Lane:
    """One daemon thread running submitted calls in order.

    Daemon, so an ``exit`` without ``shutdown`` never hangs on a long sync: SQLite commits per
    transaction, and an interrupted transaction is rolled back on the next open.
    """

    def __init__(self, name: str):
        self._q: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        fut: Future[T] = Future()
        self._q.put((fut, partial(fn, *args)))
        return fut

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fut, call = item
            if not fut.set_running_or_notify_cancel():  # cancelled while queued
                continue
            try:
                fut.set_result(call())
            except BaseException as exc:  # handed to the awaiting coroutine
                fut.set_exception(exc)

    def close(self) -> None:
        self._q.put(None)


class Supersede:
    """Calls take turns, one at a time; a call that comes while another waits for its turn
    supersedes it. A search-as-you-type client sends a search per keystroke: only the newest
    of those still waiting is worth an answer.

    A superseded call gets ``CancelledError`` from ``turn()``: its request task ends cancelled,
    and pygls answers it RequestCancelled. A waiting call whose task is cancelled
    (``$/cancelRequest``) leaves its place the same way."""

    def __init__(self) -> None:
        self._busy = False
        self._next: asyncio.Future[None] | None = None  # the call waiting: the newest

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        if self._next is not None:
            self._next.cancel()  # superseded by this call
            self._next = None
        if self._busy:
            self._next = waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter  # done when the running call ends: its turn is handed to this one
            except asyncio.CancelledError:
                if self._next is waiter:
                    self._next = None
                elif waiter.done() and not waiter.cancelled():
                    self._release()  # handed the turn, then cancelled: pass it on
                raise
        self._busy = True
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        waiter, self._next = self._next, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)  # straight to the waiting call: no newcomer overtakes it
        else:
            self._busy = False


YIELD_S = 0.05  # how long background work waits for requests, each time it asks
QUIET_S = 0.02  # after a request: background work waits for the next one of a burst


class Requests:
    """A folder's requests running now (reads, edits) and when the last one ended. Long
    background Python (a check from scratch takes seconds) holds the interpreter: a search
    beside it took up to 20 times as long at p95 (bench/lsp_latency.py --baseline-set
    hygiene.editorMaxFiles=0), so such work calls ``yield_to`` now and then."""

    def __init__(self) -> None:
        self.running = 0  # changed on the event loop only
        self.ended = 0.0  # time.monotonic()

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self.ended = time.monotonic()

    def yield_to(self) -> None:
        """(worker thread) Wait while requests run or one ended in the last ``QUIET_S`` (they
        come in bursts; the next one's JSON is read on the event loop), ``YIELD_S`` at most."""
        now = time.monotonic()
        deadline = now + YIELD_S
        while now < deadline and (self.running or now - self.ended < QUIET_S):
            time.sleep(0.001)
            now = time.monotonic()
