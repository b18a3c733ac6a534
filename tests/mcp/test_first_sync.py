"""A search while the MCP server's first sync of a big workspace runs: answered within a couple
of seconds from the files indexed so far, saying the sync is running (``indexing`` and
``fallbackReason``), instead of waiting for the whole sync (it waited up to 30 s, past OpenClaw's
15 s tool budget). The real server process over stdio, a workspace whose first sync takes
several seconds."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from conftest import write
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp_util import params, payload

from memory_ls.mcp.tools import FIRST_SYNC_WAIT_SECONDS

NOTES = 30000  # a first sync of about 12 s on an idle 2-core machine, 4 times the wait
WORDS = ["alpha", "beta", "gamma", "delta", "ledger", "payments", "zeta", "theta"]


def big_workspace(root: Path) -> None:
    write(root, ".memory-ls.toml", 'provider = "none"\n')
    memory = root / "memory"
    memory.mkdir(parents=True)
    for i in range(NOTES):
        text = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(200))
        (memory / f"n{i:05d}.md").write_text(f"# note {i}\n\n{text}\n", encoding="utf-8")
    # The first file indexed (paths are indexed in order, 200 a transaction) and the last.
    write(root, "memory/n00000.md", "# note 0\n\nThe quillwort audit is due in May.\n")
    write(root, f"memory/n{NOTES - 1:05d}.md", "# last\n\nThe zeppelin hangar lease renews.\n")


async def test_a_search_during_the_first_sync_answers_at_once(tmp_path: Path):
    root = tmp_path / "big"
    big_workspace(root)
    async with (
        stdio_client(params(root, tmp_path / "index.sqlite")) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        await session.initialize()

        async def search(query: str) -> tuple[dict, float]:
            t0 = time.monotonic()
            got = payload(await session.call_tool("memory_search", {"query": query}))
            return got, time.monotonic() - t0

        first, took = await search("zeppelin hangar lease")
        status = payload(await session.call_tool("memory_status", {}))
        # Answered after the short wait, not after the sync (which is still running).
        assert took < FIRST_SYNC_WAIT_SECONDS + 3, took
        assert status["lastSync"] is None, status
        assert first["indexing"] is True, first
        assert "first sync" in first["fallbackReason"], first
        assert "still running" in first["fallbackReason"], first
        assert first["mode"] == "keyword" and "none" in first["fallbackReason"], first
        # The last file is not indexed yet.
        assert first["results"] == [], first

        # While the sync runs, what it has committed is searched: the first note is found
        # before the last one is indexed.
        partial = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            got, took = await search("quillwort audit")
            assert took < FIRST_SYNC_WAIT_SECONDS + 3, took
            if not got.get("indexing"):
                break
            if got["results"]:
                partial = got
                break
            await anyio.sleep(0.2)
        assert partial is not None, "no search found the first note while the sync ran"
        assert partial["results"][0]["path"] == "memory/n00000.md", partial

        # Once the sync is done: the whole workspace, and no indexing flag or reason.
        done = None
        while time.monotonic() < deadline:
            got, _ = await search("zeppelin hangar lease")
            if not got.get("indexing"):
                done = got
                break
            await anyio.sleep(0.2)
        assert done is not None, "the first sync did not finish in 120 s"
        assert done["results"][0]["path"] == f"memory/n{NOTES - 1:05d}.md", done
        assert "first sync" not in done.get("fallbackReason", ""), done
        status = payload(await session.call_tool("memory_status", {}))
        assert status["lastSync"] is not None and status["files"] == NOTES, status
