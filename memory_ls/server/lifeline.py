"""The server's tie to its client: once the client is gone, the server exits within seconds.

The client is gone when its input ends (stdin at end of file), when a write to it fails (a
broken pipe), or when the process it named as ``processId`` in ``initialize`` has died: an
editor that crashed while a child it spawned keeps the pipes open, and the LSP specification
asks the server to exit then. pygls stores ``processId`` but does not watch it.

Whichever thread sees it first calls ``Lifeline.lost``; the event loop then drops what is
queued and ends the message loop (``MemoryLanguageServer.client_lost``). A loop that cannot
do that (blocked writing into a pipe nobody reads) is ended by a deadline.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

POLL_S = 1.0  # how often the client's process is checked
EXIT_DEADLINE_S = 2.5  # after the client is gone, an orderly exit gets this long
_MAX_PID = 2**31 - 1  # os.kill takes a C int; 0 and negative ones name process groups


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still exists (when in doubt: yes, it does).

    A zombie (dead, not yet reaped by its parent) still counts until it is reaped. A dead
    client's PID reused by a new process within one poll would hide the death; polling every
    second makes that unlikely."""
    if sys.platform == "win32":
        return _windows_alive(pid)
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:  # ESRCH: no such process
        return False
    except PermissionError:  # EPERM: it exists, but belongs to another user
        return True
    except OSError:  # anything else is no proof of death
        return True
    return True


if sys.platform == "win32":
    import ctypes
    from ctypes import wintypes

    _SYNCHRONIZE = 0x00100000
    _ERROR_ACCESS_DENIED = 5
    _WAIT_TIMEOUT = 0x102
    _kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    _kernel32.OpenProcess.restype = wintypes.HANDLE
    _kernel32.OpenProcess.argtypes = (wintypes.DWORD, wintypes.BOOL, wintypes.DWORD)
    _kernel32.WaitForSingleObject.argtypes = (wintypes.HANDLE, wintypes.DWORD)
    _kernel32.CloseHandle.argtypes = (wintypes.HANDLE,)

    def _windows_alive(pid: int) -> bool:
        # Not os.kill(pid, 0): on Windows that terminates the process. A process handle is
        # signalled once the process has exited (WaitForSingleObject); OpenProcess fails for
        # a process that no longer exists, and with "access denied" for one that does.
        handle = _kernel32.OpenProcess(_SYNCHRONIZE, False, pid)
        if not handle:
            return bool(ctypes.get_last_error() == _ERROR_ACCESS_DENIED)
        try:
            return bool(_kernel32.WaitForSingleObject(handle, 0) == _WAIT_TIMEOUT)
        finally:
            _kernel32.CloseHandle(handle)


class Lifeline:
    """Tells the event loop, once, that the client is gone, from any thread, and makes sure
    the process ends even when the loop cannot act on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_lost: Callable[[str], None]) -> None:
        self._loop = loop
        self._on_lost = on_lost  # runs on the loop: drop the queued work, end the message loop
        self._once = threading.Lock()
        self._gone = False

    def lost(self, why: str) -> None:
        """The client is gone (``why`` says how); callable from any thread, any number of
        times."""
        with self._once:
            if self._gone:
                return
            self._gone = True
        try:
            self._loop.call_soon_threadsafe(self._on_lost, why)
        except RuntimeError:  # the loop is closed: the process is exiting already
            return
        threading.Thread(target=self._deadline, name="memory-ls-exit", daemon=True).start()

    def _deadline(self) -> None:
        # The loop can be stuck in a write into a full pipe that a dead editor's child keeps
        # open; no orderly exit then. Ending the process is as safe as a kill: SQLite rolls
        # back an interrupted transaction. Nothing is logged: the log's lock or a full stderr
        # may be what holds the loop.
        time.sleep(EXIT_DEADLINE_S)
        os._exit(1)

    def watch(self, pid: int | None) -> None:
        """Poll process ``pid`` (the client's ``processId``) from a daemon thread; when it is
        gone, the client is."""
        if pid is None or pid == os.getpid():
            return
        if not 0 < pid <= _MAX_PID:
            log.warning("not watching the client's processId %d: not a process ID", pid)
            return
        thread = threading.Thread(
            target=self._poll, args=(pid,), name="memory-ls-client-watch", daemon=True
        )
        thread.start()

    def _poll(self, pid: int) -> None:
        while process_alive(pid):
            time.sleep(POLL_S)
        self.lost(f"its process {pid} is gone")
