"""A note written while the team index is down reaches teammates once it is back, with the
writer left idle: the language server and the MCP server try the team index again when its
cooldown is over and push what the folder changed meanwhile (issue 38, part 2). Real
``memory-ls serve`` and ``memory-ls mcp`` processes over stdio, on a PostgreSQL of the test's
own, stopped and started under them."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest
from lsp_harness import (
    Start,
    make_workspace,
    paths,
    search,
    start,  # noqa: F401  (a fixture)
    status,
    uri,
    write,
)
from lsprotocol import types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from pg_util import PgServer, require_server_binaries, unique
from team_util import team

from memory_ls.engine import MemoryEngine
from memory_ls.index.postgres import URL_ENV
from memory_ls.mcp.tools import REFRESH_SECONDS

RETRY_AFTER_S = 1.0
NOTE = "# Outage\n\nThe walrus rota changed while the database was down.\n"


async def test_a_note_written_during_an_outage_reaches_a_teammate_with_the_writer_idle(
    start: Start,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_server_binaries()
    server = PgServer()  # its own: stopped and started without disturbing other tests
    try:
        monkeypatch.setenv(URL_ENV, server.up())  # the servers inherit it
        toml = (
            f'[store]\nbackend = "postgres"\n\n[store.postgres]\nnamespace = "{unique("retry")}"\n'
            f"retryAfterS = {RETRY_AFTER_S}\n\n[sync]\nwatchDebounceMs = 100\n"
        )
        a = make_workspace(tmp_path / "a")
        b = write(tmp_path / "b", "MEMORY.md", "# Memory of b\n\nNothing shared yet.\n").parent
        for root in (a, b):
            (root / ".memory-ls.toml").write_text(toml)
        ca, cb = await start(a), await start(b)
        assert "memory/projects/rate-limits.md" in paths(await search(cb, "token bucket burst"))
        before = (await status(ca))["files"]

        server.down()
        note = write(a, "memory/outage.md", NOTE)
        ca.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=uri(note), type=types.FileChangeType.Created)]
            )
        )
        # A indexed the note in its own index and could not push it.
        deadline = time.monotonic() + 20
        while True:
            st = await status(ca)
            if st["files"] == before + 1 and not st["dirty"]:
                break
            assert time.monotonic() < deadline, st
            await asyncio.sleep(0.2)
        assert st["store"]["answering"] == "sqlite", st["store"]
        await asyncio.sleep(2 * RETRY_AFTER_S)  # its push tried (and failed) meanwhile

        server.up()  # A is left idle from here on: no request, no edit
        t0 = time.monotonic()
        while "memory/outage.md" not in paths(await search(cb, "walrus rota")):
            assert time.monotonic() - t0 < RETRY_AFTER_S + 10, "the note never reached b"
            await asyncio.sleep(0.2)
        print(f"b found the note {time.monotonic() - t0:.1f} s after the server came back")
    finally:
        server.remove()


async def test_a_note_an_agent_wrote_during_an_outage_reaches_a_teammate(tmp_path: Path) -> None:
    """The same through ``memory-ls mcp``: the agent wrote and searched during the outage
    (its own index answered), then stopped calling tools."""
    require_server_binaries()
    server = PgServer()
    try:
        url, ns = server.up(), unique("retry_mcp")
        a = make_workspace(tmp_path / "a")
        (a / ".memory-ls.toml").write_text(
            f'provider = "none"\n\n[store]\nbackend = "postgres"\n\n[store.postgres]\n'
            f'namespace = "{ns}"\nretryAfterS = {RETRY_AFTER_S}\n'
        )
        b = write(tmp_path / "b", "MEMORY.md", "# Memory of b\n\nNothing shared yet.\n").parent
        agent = StdioServerParameters(
            command=sys.executable,
            args=["-m", "memory_ls", "mcp", "-w", str(a), "--index", str(tmp_path / "a.sqlite")],
            env={k: os.environ[k] for k in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME")} | {URL_ENV: url},
        )
        settings = team(url, ns, retry_after_s=RETRY_AFTER_S)
        with MemoryEngine(b, settings, index_path=tmp_path / "b.sqlite") as eb:
            async with stdio_client(agent) as (read, write_), ClientSession(read, write_) as s:
                await s.initialize()

                async def agent_search(query: str) -> dict:
                    got = await s.call_tool("memory_search", {"query": query, "minScore": 0})
                    return json.loads(got.content[0].text)

                assert (
                    "team index" not in (await agent_search("token bucket burst"))["fallbackReason"]
                )
                server.down()
                write(a, "memory/outage.md", NOTE)
                await asyncio.sleep(REFRESH_SECONDS)  # the agent's next search walks the disk
                found = await agent_search("walrus rota")
                assert [h["path"] for h in found["results"]] == ["memory/outage.md"]
                assert "team index unavailable" in found["fallbackReason"]

                server.up()  # the agent is idle from here on
                t0 = time.monotonic()
                while "memory/outage.md" not in [
                    h.path for h in (await asyncio.to_thread(eb.search, "walrus rota")).results
                ]:
                    assert time.monotonic() - t0 < RETRY_AFTER_S + 10, "the note never arrived"
                    await asyncio.sleep(0.2)
                print(f"b found the agent's note {time.monotonic() - t0:.1f} s after the restart")
    finally:
        server.remove()
