"""A search's time budget kept by the client, for when the server side cannot keep it.

``statement_timeout`` bounds a statement once the server runs it. It cannot bound the wait
before that: a pooler in transaction mode that has lost its server holds every statement
(PgBouncer's ``query_wait_timeout`` is two minutes), and a pooler has no session to carry the
setting anyway. So one daemon thread watches the connections of running reads: past its
deadline a read's statement is cancelled, and if no answer comes within a short grace the
socket is shut down, which wakes the waiting thread with an error at once (the pool then drops
the connection).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg

log = logging.getLogger(__name__)
GRACE_S = 0.5  # after a cancel: long enough for a server's QueryCanceled to arrive


@dataclass
class _Watch:
    conn: psycopg.Connection[Any]
    fd: int  # our own duplicate of the socket: libpq may close its number and it be reused
    lock: threading.Lock = field(default_factory=threading.Lock)
    active: bool = True  # the read is still running (under ``lock``)
    fired: bool = False  # the budget ran out and the statement was cancelled
    shut: bool = False  # ... and then the socket was shut down

    def shut_down(self) -> None:
        """Wake the reading thread with an error at once (the caller holds ``lock``)."""
        if self.fd >= 0 and not self.shut:
            self.shut = True
            with (
                contextlib.suppress(OSError),
                socket.fromfd(self.fd, socket.AF_INET, socket.SOCK_STREAM) as sock,
            ):
                sock.shutdown(socket.SHUT_RDWR)


class Expired(Exception):
    """A read ran past its budget and was cut off."""


class Deadlines:
    """One watcher thread for every guarded connection of a database."""

    def __init__(self, grace_s: float = GRACE_S):
        self.grace_s = grace_s
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Watch]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextmanager
    def guard(self, conn: psycopg.Connection[Any], seconds: float) -> Iterator[None]:
        """Cut off whatever ``conn`` runs in this block once ``seconds`` have passed;
        a statement cut off raises ``Expired``."""
        try:
            fd = os.dup(conn.pgconn.socket)
        except (OSError, psycopg.Error):
            fd = -1
        watch = _Watch(conn, fd)
        self._push(time.monotonic() + seconds, watch)
        try:
            yield
        except psycopg.Error as exc:
            if watch.fired:
                raise Expired(f"no answer within {seconds * 1000:.0f} ms") from exc
            raise
        finally:
            with watch.lock:  # waits for a cut-off in progress: never one on a reused connection
                watch.active = False
                if fd >= 0:
                    os.close(fd)
                watch.fd = -1
            if watch.shut:  # never back into the pool, even if nothing read from it since
                with contextlib.suppress(Exception):
                    conn.close()

    def close(self) -> None:
        """Stop watching; reads still running are cut off now rather than never."""
        with self._cond:
            self._closed = True
            watches, self._heap = [w for _, _, w in self._heap], []
            self._cond.notify()
        for watch in watches:
            with watch.lock:
                if watch.active:
                    watch.fired = True
                    watch.shut_down()

    def _push(self, when: float, watch: _Watch) -> None:
        with self._cond:
            heapq.heappush(self._heap, (when, next(self._seq), watch))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="memory-ls-pg-deadlines", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    while self._heap and not self._heap[0][2].active:
                        heapq.heappop(self._heap)  # finished in time
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._closed:
                    return
                _, _, watch = heapq.heappop(self._heap)
            if self._cut(watch):
                self._push(time.monotonic() + self.grace_s, watch)

    def _cut(self, watch: _Watch) -> bool:
        """Cancel on the first expiry, shut the socket on the second; True to come back."""
        with watch.lock:
            if not watch.active:
                return False
            if not watch.fired:
                watch.fired = True
                try:
                    watch.conn.cancel_safe(timeout=self.grace_s)
                except Exception as exc:  # the pooler or server may not take cancel requests
                    log.debug("cancel request failed: %s", exc)
                return True
            watch.shut_down()
            return False
