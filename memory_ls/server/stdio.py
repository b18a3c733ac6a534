"""The stdio transport: pygls' message loop fed by one thread that reads whole messages.

pygls reads stdin with an executor call per header line and another for the body, so every
message costs the event loop five thread switches (loop -> reader -> loop, three times over);
on a busy machine each is a scheduling delay. Here one thread blocks on stdin, reads a whole
message (headers and body) and hands it to the loop in one wake-up.

The end of stdin and a write into a closed pipe are the client gone (``Lifeline.lost``), not
errors: the messages not yet handled are dropped with the rest of the queued work, and later
writes go nowhere (pygls logged a traceback for each, and answered every queued request).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO, Protocol

from pygls.io_ import run_async

from .lifeline import Lifeline


class Served(Protocol):
    """What the transport needs of the language server (app.py's MemoryLanguageServer)."""

    _stop_event: threading.Event | None
    lifeline: Lifeline | None
    protocol: Any

    def client_lost(self, why: str, unread: int = 0) -> None: ...
    def report_server_error(self, error: Exception, source: Any) -> None: ...
    def shutdown(self) -> None: ...


log = logging.getLogger(__name__)
CONTENT_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")
READ_SIZE = 1 << 16


class MessageReader:
    """pygls' ``AsyncReader`` (``readline`` / ``readexactly``) over a reading thread.

    The thread reads the file descriptor with ``os.read``: a daemon thread blocked inside a
    ``BufferedReader`` would hold its lock and abort the interpreter's exit."""

    def __init__(
        self, fd: int, loop: asyncio.AbstractEventLoop, on_end: Callable[[str], None]
    ) -> None:
        self._fd = fd
        self._buf = bytearray()
        self._loop = loop
        self._on_end = on_end  # the client is gone (called from the reading thread)
        self._items: collections.deque[bytes] = collections.deque()
        self._ready = asyncio.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._read, name="memory-ls-stdin", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        why = "its input ended"
        try:
            while (message := self._message())[-1]:
                self._loop.call_soon_threadsafe(self._add, message)
        except OSError as exc:
            why = f"its input failed: {exc}"
        except RuntimeError:  # the loop closed first: the server is exiting already
            return
        self._on_end(why)

    def _fill(self) -> bool:
        chunk = os.read(self._fd, READ_SIZE)
        self._buf += chunk
        return bool(chunk)

    def _line(self) -> bytes:
        while (end := self._buf.find(b"\n")) < 0:
            if not self._fill():
                line, self._buf = bytes(self._buf), bytearray()
                return line  # b"" at end of input
        line = bytes(self._buf[: end + 1])
        del self._buf[: end + 1]
        return line

    def _body(self, n: int) -> bytes:
        while len(self._buf) < n and self._fill():
            pass
        body = bytes(self._buf[:n])
        del self._buf[:n]
        return body

    def _message(self) -> list[bytes]:
        """The header lines and the body of the next message; ends with b"" at end of input."""
        lines: list[bytes] = []
        length = 0
        while True:
            line = self._line()
            lines.append(line)
            if not line:
                return lines
            match = CONTENT_LENGTH.fullmatch(line)
            if match and not length:
                length = int(match.group(1))
            if length and not line.strip():
                lines.append(self._body(length))
                return lines

    def _add(self, items: list[bytes]) -> None:
        if not self._stopped:
            self._items.extend(items)
            self._ready.set()

    def stop(self) -> int:
        """End the message loop now, dropping the messages not handled yet (the client is
        gone: whatever they ask, nobody reads the answer); how many were dropped."""
        dropped = sum(1 for item in self._items if item == b"\r\n")  # one blank line each
        self._stopped = True
        self._items.clear()
        self._items.append(b"")  # the message loop ends at an empty header line
        self._ready.set()
        return dropped

    async def _next(self) -> bytes:
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()

    async def readline(self) -> bytes:
        return await self._next()

    async def readexactly(self, n: int) -> bytes:
        return await self._next()  # the body, read whole by the thread


class PipeWriter:
    """pygls' ``StdoutWriter``, but a closed pipe is the client gone, not an error: it is told
    once, and every later write is dropped."""

    def __init__(self, out: BinaryIO, on_closed: Callable[[str], None]) -> None:
        self._out = out
        self._on_closed = on_closed
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            self._out.write(data)
            self._out.flush()
        except (OSError, ValueError) as exc:  # EPIPE, or written after close()
            self.closed = True
            _discard_stdout()
            self._on_closed(f"writing to it failed: {exc}")

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError, ValueError):
            self._out.close()


def _discard_stdout() -> None:
    """Point stdout at the null device: what stays in its buffer would otherwise fail again
    at exit, with "Exception ignored ... BrokenPipeError" on stderr (the recipe of Python's
    ``signal`` documentation for SIGPIPE)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def serve_stdio(server: Served) -> None:
    """``server.start_io()`` with the one-thread reader (same loop and shutdown), and the
    client's end watched (``Lifeline``)."""
    server._stop_event = stop = threading.Event()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        reader: MessageReader | None = None

        def lost(why: str) -> None:
            server.client_lost(why, reader.stop() if reader is not None else 0)

        lifeline = server.lifeline = Lifeline(loop, lost)
        server.protocol.set_writer(PipeWriter(sys.stdout.buffer, lifeline.lost))
        reader = MessageReader(sys.stdin.buffer.fileno(), loop, lifeline.lost)
        await run_async(stop, reader, server.protocol, log, server.report_server_error)

    try:
        asyncio.run(main())
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
