"""The fuller MCP server: memory_status, memory files as resources, and the streamable HTTP
transport (bearer token, loopback by default), driven by the official SDK's own clients
against the real server process over stdio and over HTTP on 127.0.0.1."""

from __future__ import annotations

import contextlib
import queue
import re
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import write
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_util import mcp_command, params, payload, server_env
from repo_root import REPO

from memory_ls.engine import MemoryEngine


@pytest.fixture
def mcp_ws(ws: Path) -> Path:
    write(ws, ".memory-ls.toml", 'provider = "none"\nbogus = 1\n')
    write(ws, "memory/on call.md", "# On call\n\nThe pager rotation is weekly.\n")
    # Things that must stay out of reach: a file outside, and symlinks into and out of memory.
    write(ws.parent, "outside/secret.md", "# Secret\n\nnot memory\n")
    (ws / "memory" / "link.md").symlink_to(ws / "MEMORY.md")
    (ws / "memory" / "linked").symlink_to(ws.parent / "outside")
    return ws


async def poll(
    fetch: Callable[[], Awaitable[dict[str, Any]]],
    done: Callable[[dict[str, Any]], bool],
    timeout: float = 10.0,
) -> tuple[dict[str, Any], float]:
    """Call ``fetch`` until ``done`` holds; the last answer and how long it took."""
    start = time.monotonic()
    while True:
        got = await fetch()
        took = time.monotonic() - start
        if done(got) or took > timeout:
            return got, took
        await anyio.sleep(0.05)


async def check_status(session: ClientSession, root: Path, index: Path) -> None:
    async def status() -> dict[str, Any]:
        return payload(await session.call_tool("memory_status", {}))

    st, _ = await poll(status, lambda s: s["lastSync"] is not None)
    # The same facts as `memory-ls status --json`: the engine's own status, key for key.
    with MemoryEngine(root, index_path=index.with_name("direct.sqlite")) as engine:
        assert set(st) == set(engine.status())
    assert st["mode"] == "keyword" and st["provider"] is None
    assert "none" in st["providerReason"]
    assert st["files"] == 5 and st["chunks"] >= 4 and st["pendingEmbeddings"] == 0
    assert st["indexPath"] == str(index) and st["root"] == str(root.resolve())
    assert any("bogus" in p for p in st["settingsProblems"])
    bad = await session.call_tool("memory_status", {"verbose": True})
    assert bad.is_error and "verbose" in bad.content[0].text


NOTES = [
    "MEMORY.md",
    "memory/2026-01-10-api-design.md",
    "memory/2026-02-01-deploy.md",
    "memory/notes/cjk.md",
    "memory/on call.md",
]


async def check_resources(session: ClientSession) -> None:
    listed = (await session.list_resources()).resources
    assert [r.name for r in listed] == NOTES  # no README.md, no symlinks
    assert all(r.mime_type == "text/markdown" for r in listed)
    by_name = {r.name: r.uri for r in listed}
    assert by_name["MEMORY.md"] == "memory://MEMORY.md"
    assert by_name["memory/on call.md"] == "memory://memory/on%20call.md"

    read = (await session.read_resource("memory://memory/on%20call.md")).contents
    assert len(read) == 1 and read[0].uri == "memory://memory/on%20call.md"
    assert read[0].text == "# On call\n\nThe pager rotation is weekly."
    # The same text memory_get returns for the whole file.
    got = payload(
        await session.call_tool("memory_get", {"path": "MEMORY.md", "from": 1, "lines": 100})
    )
    assert (await session.read_resource("memory://MEMORY.md")).contents[0].text == got["text"]

    refused = {
        "memory://README.md": "not a memory file",
        "memory://../outside/secret.md": "outside the workspace",
        "memory://memory/%2E%2E/%2E%2E/outside/secret.md": "outside the workspace",
        "memory:///etc/passwd": "outside the workspace",
        "memory://memory/link.md": "symlinks",
        "memory://memory/linked/secret.md": "symlinks",
        "memory://memory/gone.md": "no such file",
        "file:///etc/passwd": "not a memory:// URI",
    }
    for uri, why in refused.items():
        with pytest.raises(MCPError) as err:
            await session.read_resource(uri)
        assert why in err.value.error.message, (uri, err.value.error.message)


@contextlib.contextmanager
def http_server(root: Path, index: Path, token: str | None = None) -> Iterator[str]:
    """A real ``memory-ls mcp --transport http`` on 127.0.0.1 (any free port); its URL."""
    args = [*mcp_command(root, index), "--transport", "http", "--port", "0"]
    proc = subprocess.Popen(
        args, env=server_env(token), cwd=REPO, stderr=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()
    try:
        seen: list[str] = []
        while (line := lines.get(timeout=60)) is not None:
            seen.append(line)
            if found := re.search(r"MCP over HTTP at (http://127\.0\.0\.1:\d+/mcp)", line):
                break
        assert found, "".join(seen)
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def connect(transport: str, root: Path, index: Path) -> AsyncIterator[ClientSession]:
    if transport == "http":
        with http_server(root, index) as url:
            async with http_session(url) as session:
                yield session
        return
    async with (
        stdio_client(params(root, index)) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        await session.initialize()
        yield session


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_status_and_resources(transport: str, mcp_ws: Path, tmp_path: Path):
    index = tmp_path / "index.sqlite"
    async with connect(transport, mcp_ws, index) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"memory_search", "memory_get", "memory_status", "memory_check"}
        assert tools["memory_status"].annotations.read_only_hint
        await check_status(session, mcp_ws, index)
        await check_resources(session)


async def test_http_token_is_required_on_every_request(mcp_ws: Path, tmp_path: Path):
    with http_server(mcp_ws, tmp_path / "index.sqlite", token="s3cret-token") as url:
        base = url.removesuffix("/mcp")
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        async with httpx2.AsyncClient(timeout=30) as http:
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": "Bearer s3cret-token-and-more"},
                {"Authorization": "Basic s3cret-token"},
                {"Authorization": "s3cret-token"},
            ):
                for method, target in (("POST", url), ("GET", url), ("GET", f"{base}/other")):
                    r = await http.request(method, target, headers=headers, json=init)
                    assert r.status_code == 401, (method, target, headers)
                    assert r.headers["www-authenticate"] == "Bearer"
        async with http_session(url, token="s3cret-token") as session:
            st = payload(await session.call_tool("memory_status", {}))
            assert st["root"] == str(mcp_ws.resolve())


async def test_agents_loop_over_http(mcp_ws: Path, tmp_path: Path):
    """Two agents share one server: one searches, reads the cited lines and writes a note;
    the other's next search finds that note within 2 s."""
    with http_server(mcp_ws, tmp_path / "index.sqlite") as url:
        async with http_session(url) as agent, http_session(url) as other:
            found = payload(await agent.call_tool("memory_search", {"query": "rate limiting"}))
            hit = found["results"][0]
            assert hit["path"] == "memory/2026-01-10-api-design.md"
            got = payload(await agent.call_tool("memory_get", {"citation": hit["citation"]}))
            assert "token bucket" in got["text"] and got["from"] == hit["startLine"]

            note = "memory/2026-03-01-queues.md"
            write(mcp_ws, note, "# Queues\n\nBilling moved to RabbitMQ quorum queues.\n")

            async def search() -> dict[str, Any]:
                return payload(await other.call_tool("memory_search", {"query": "RabbitMQ"}))

            fresh, took = await poll(search, lambda f: bool(f["results"]), timeout=5.0)
            assert [r["path"] for r in fresh["results"]] == [note], fresh
            assert took < 2.0, took
            cited = fresh["results"][0]["citation"]
            read = payload(await agent.call_tool("memory_get", {"citation": cited}))
            assert "RabbitMQ quorum queues" in read["text"]


def refused(root: Path, index: Path, *args: str, token: str | None = None) -> str:
    """Run ``memory-ls mcp`` with ``args``; it must exit 2 at once. Its stderr."""
    done = subprocess.run(
        [*mcp_command(root, index), *args],
        env=server_env(token),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert not index.exists()  # refused before anything was loaded
    return done.stderr


@pytest.mark.parametrize("token", [None, ""])
def test_http_refuses_other_addresses_without_a_token(
    token: str | None, mcp_ws: Path, tmp_path: Path
):
    err = refused(
        mcp_ws, tmp_path / "i.sqlite", "--transport", "http", "--host", "0.0.0.0", token=token
    )
    assert err.count("\n") == 1, err
    assert "refusing to serve MCP on 0.0.0.0 without a bearer token" in err
    assert "MEMORY_LS_MCP_TOKEN" in err


def test_http_options_need_the_http_transport(mcp_ws: Path, tmp_path: Path):
    err = refused(mcp_ws, tmp_path / "i.sqlite", "--token", "s3cret")
    assert "--host, --port and --token need --transport http" in err


def test_http_busy_port_is_a_clear_error(mcp_ws: Path, tmp_path: Path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        err = refused(mcp_ws, tmp_path / "i.sqlite", "--transport", "http", "--port", str(port))
    assert f"cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err, err
