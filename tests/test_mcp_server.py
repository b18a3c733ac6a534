"""The fuller MCP server: memory_status, memory files as resources, and the streamable HTTP
transport (bearer token, loopback by default), driven by the official SDK's own clients
against the real server process over stdio and over HTTP on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import write
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from test_mcp import params, payload

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


async def test_status_over_stdio(mcp_ws: Path, tmp_path: Path):
    index = tmp_path / "index.sqlite"
    async with (
        stdio_client(params(mcp_ws, index)) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"memory_search", "memory_get", "memory_status"}
        assert tools["memory_status"].annotations.read_only_hint
        await check_status(session, mcp_ws, index)


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


async def test_resources_over_stdio(mcp_ws: Path, tmp_path: Path):
    async with (
        stdio_client(params(mcp_ws, tmp_path / "index.sqlite")) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        init = await session.initialize()
        assert init.capabilities.resources is not None
        await check_resources(session)
