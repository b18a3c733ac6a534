"""A server that outlives its editor (issue 38, part 1), over real pipes against the real
``python -m memory_ls serve``: it exits when the client's process dies, it stops at once when
the client's pipes close (however much is queued), and a newer ``memory/search`` supersedes the
queued ones."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lsp_harness import (  # the harness of the server tests
    Start,
    make_workspace,
    open_doc,
    paths,
    replace_all,
    request,
    start,  # noqa: F401  (a fixture)
    status,
    uri,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from memory_ls.server.lanes import Supersede

REQUEST_CANCELLED = -32800
HOLD_WRITE_LOCK = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(60)
"""


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawServer:
    """``memory-ls serve`` spoken to as raw JSON-RPC: unlike a client library, it can stop
    reading and close its pipes with requests still queued. stderr goes to a file, to be
    measured."""

    def __init__(self, tmp_path: Path) -> None:
        self.stderr = tmp_path / "server-stderr.log"
        with self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memory_ls", "serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self._buf = b""
        self._ids = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame(message))
        self.proc.stdin.flush()

    def request(self, method: str, params: Any) -> int:
        self._ids += 1
        self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return self._ids

    def _message(self, deadline: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            head, sep, rest = self._buf.partition(b"\r\n\r\n")
            if sep:
                length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                if len(rest) >= length:
                    self._buf = rest[length:]
                    return dict(json.loads(rest[:length]))
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError("no answer from the server in time")
            chunk = os.read(fd, 1 << 16)
            assert chunk, "the server closed its output"
            self._buf += chunk

    def answer(self, msg_id: int, timeout: float = 30) -> dict[str, Any]:
        """The answer to request ``msg_id`` (requests from the server are answered null)."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self._message(deadline)
            if "method" in msg and "id" in msg:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif msg.get("id") == msg_id:
                return msg

    def call(self, method: str, params: Any) -> Any:
        msg = self.answer(self.request(method, params))
        assert "error" not in msg, msg
        return msg["result"]

    def initialize(self, ws: Path, process_id: int) -> None:
        """initialize (no client capabilities: the server asks the client nothing), then
        wait for the first sync."""
        self.call(
            "initialize",
            {
                "processId": process_id,
                "capabilities": {},
                "workspaceFolders": [{"uri": uri(ws), "name": ws.name}],
            },
        )
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        deadline = time.monotonic() + 30
        while not self.call("memory/status", {}).get("lastSync"):
            assert time.monotonic() < deadline, "the first sync never ended"
            time.sleep(0.05)

    def exit_time(self, since: float, timeout: float = 15) -> float:
        """Seconds from ``since`` until the server exited (fails if it still runs)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the server still runs after {timeout} s") from None
        return time.monotonic() - since

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(BrokenPipeError):
                    pipe.close()


@pytest.fixture
def raw(tmp_path: Path):  # type: ignore[no-untyped-def]
    servers: list[RawServer] = []

    def _start() -> RawServer:
        servers.append(RawServer(tmp_path))
        return servers[-1]

    yield _start
    for server in servers:
        server.close()


def searches(n: int) -> bytes:
    return b"".join(
        frame(
            {
                "jsonrpc": "2.0",
                "id": 1000 + i,
                "method": "memory/search",
                "params": {"query": f"PostgreSQL ledger {i}"},
            }
        )
        for i in range(n)
    )


@pytest.mark.parametrize("stuck", [False, True], ids=["idle", "output-full"])
def test_the_server_exits_when_the_client_process_dies(
    raw: Any, tmp_path: Path, stuck: bool
) -> None:
    # An editor that crashed while a child it spawned keeps the server's pipes open: only its
    # processId says it is gone. The server ran on indefinitely. With its output full (nobody
    # reads it) the server is stuck in a write and cannot wind down: it is ended all the same.
    ws = make_workspace(tmp_path / "ws")
    editor = subprocess.Popen(["sleep", "30"])
    try:
        server = raw()
        server.initialize(ws, editor.pid)
        if stuck:
            assert server.proc.stdin is not None
            server.proc.stdin.write(searches(5000))
            server.proc.stdin.flush()
        time.sleep(1.5)  # the watch has polled the live process: it is not mistaken for dead
        assert server.proc.poll() is None
    finally:
        editor.kill()
        editor.wait()  # reaped: a zombie would still answer kill(pid, 0)
    took = server.exit_time(time.monotonic())
    print(f"exited {took:.2f} s after the client process died (stuck: {stuck})")
    assert took < 5
    assert server.proc.returncode == 1  # no shutdown request: the LSP exit code
    log = server.stderr.read_text()
    assert log.count("\n") <= 1, log
    assert stuck or f"process {editor.pid} is gone" in log, log


@pytest.mark.parametrize("close_input", [True, False], ids=["both-pipes", "output-only"])
def test_closed_pipes_with_thousands_of_searches_queued_exit_at_once(
    raw: Any, tmp_path: Path, close_input: bool
) -> None:
    # A client that queued 5,000 searches without reading and went away: the server answered
    # each one into the closed pipe, logging a traceback per failed write (22 MB, 10-11 s).
    # With its input left open, the failed write alone says the client is gone.
    ws = make_workspace(tmp_path / "ws")
    server = raw()
    server.initialize(ws, os.getpid())
    assert server.proc.stdin is not None and server.proc.stdout is not None
    server.proc.stdin.write(searches(5000))  # the server reads on while its output is full
    server.proc.stdin.flush()
    time.sleep(0.5)  # answers pile up in the full output pipe; the rest wait in the server
    assert server.proc.poll() is None
    server.proc.stdout.close()
    if close_input:
        server.proc.stdin.close()
    took = server.exit_time(time.monotonic())
    log = server.stderr.read_text()
    print(f"exited {took:.2f} s after the pipes closed; {len(log)} bytes on stderr: {log}")
    assert took < 3
    assert len(log) < 1_000_000
    assert log.count("\n") == 1 and "the client is gone" in log, log


async def test_a_newer_search_supersedes_the_queued_ones(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    # Search-as-you-type sends one search per keystroke; each waited its turn and was answered.
    # A search held up by another process's write lock keeps the one search slot busy (its
    # pending edit cannot be indexed), so the two sent after it are certainly queued.
    ws = make_workspace(tmp_path / "ws")
    index = tmp_path / "index.sqlite"
    options = {"store": {"path": str(index)}, "sync": {"searchBudgetMs": 5000}}
    client = await start(ws, init_options=options)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(index)], stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        path = ws / "memory/projects/rate-limits.md"
        u = open_doc(client, path)
        replace_all(client, u, path.read_text(), "# Rate limits\n\nquasar\n", version=2)
        send = client.protocol.send_request_async
        running = asyncio.ensure_future(send("memory/search", {"query": "quasar"}))
        await status(client)  # answered after the search above started: it holds the slot
        older = asyncio.ensure_future(send("memory/search", {"query": "qua"}, msg_id="older"))
        newer = asyncio.ensure_future(send("memory/search", {"query": "quas"}, msg_id="newer"))
        with pytest.raises(JsonRpcException) as superseded:
            await asyncio.wait_for(older, 10)
        assert superseded.value.code == REQUEST_CANCELLED
        # $/cancelRequest of a queued search: answered at once, and it frees its place.
        client.protocol.notify("$/cancelRequest", types.CancelParams(id="newer"))
        with pytest.raises(JsonRpcException) as cancelled:
            await asyncio.wait_for(newer, 10)
        assert cancelled.value.code == REQUEST_CANCELLED
        assert not running.done(), "the first search ended: the others were not queued"
        last = asyncio.ensure_future(send("memory/search", {"query": "quasar"}))
    finally:
        holder.kill()
        holder.wait()
    # The started search and the newest one are answered, with the edit they waited for.
    for answer in (await asyncio.wait_for(running, 30), await asyncio.wait_for(last, 30)):
        assert paths(answer) == ["memory/projects/rate-limits.md"]
    assert paths(await request(client, "memory/search", {"query": "PostgreSQL"}))


async def test_a_turn_handed_to_a_cancelled_search_goes_on() -> None:
    # The turn goes to the waiting search the moment the running one ends; cancelled before it
    # resumes, that search must pass the turn on, or every later search waits forever.
    turns = Supersede()
    release = asyncio.Event()
    ran: list[str] = []

    async def call(name: str, hold: asyncio.Event | None = None) -> None:
        async with turns.turn():
            ran.append(name)
            if hold is not None:
                await hold.wait()

    async def first_then_cancel_second() -> None:
        await call("first", release)
        second.cancel()  # handed the turn a moment ago, not resumed yet

    first = asyncio.ensure_future(first_then_cancel_second())
    await asyncio.sleep(0)
    second = asyncio.ensure_future(call("second"))
    await asyncio.sleep(0)
    release.set()
    await first
    with pytest.raises(asyncio.CancelledError):
        await second
    await asyncio.wait_for(call("third"), 1)
    assert ran == ["first", "third"]
