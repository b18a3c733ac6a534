"""The stdio transport: pygls' message loop fed by one thread that reads whole messages.

pygls reads stdin with an executor call per header line and another for the body, so every
message costs the event loop five thread switches (loop -> reader -> loop, three times over);
on a busy machine each is a scheduling delay. Here one thread blocks on stdin, reads a whole
message (headers and body) and hands it to the loop in one wake-up.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import re
import sys
import threading
from typing import TYPE_CHECKING

from pygls.io_ import StdoutWriter, run_async

if TYPE_CHECKING:
    from pygls.server import JsonRPCServer

log = logging.getLogger(__name__)
CONTENT_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")
READ_SIZE = 1 << 16


class MessageReader:
    """pygls' ``AsyncReader`` (``readline`` / ``readexactly``) over a reading thread.

    The thread reads the file descriptor with ``os.read``: a daemon thread blocked inside a
    ``BufferedReader`` would hold its lock and abort the interpreter's exit."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop):
        self._fd = fd
        self._buf = bytearray()
        self._loop = loop
        self._items: collections.deque[bytes] = collections.deque()
        self._ready = asyncio.Event()
        self._thread = threading.Thread(target=self._read, name="memory-ls-stdin", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                message = self._message()
                self._loop.call_soon_threadsafe(self._add, message)
                if not message[-1]:  # end of input
                    return
        except (OSError, RuntimeError):  # stdin closed, or the loop closed first
            return

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
        self._items.extend(items)
        self._ready.set()

    async def _next(self) -> bytes:
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()

    async def readline(self) -> bytes:
        return await self._next()

    async def readexactly(self, n: int) -> bytes:
        return await self._next()  # the body, read whole by the thread


def serve_stdio(server: JsonRPCServer) -> None:
    """``server.start_io()`` with the one-thread reader (same loop, writer and shutdown)."""
    server._stop_event = stop = threading.Event()
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))

    async def main() -> None:
        reader = MessageReader(sys.stdin.buffer.fileno(), asyncio.get_running_loop())
        await run_async(stop, reader, server.protocol, log, server.report_server_error)

    try:
        asyncio.run(main())
    except BrokenPipeError:
        log.error("the client closed the connection")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
