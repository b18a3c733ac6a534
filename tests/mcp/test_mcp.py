"""The MCP server, driven by the official SDK's own client over stdio, on a real workspace."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import write

# mcp is a dependency of the package: a missing install must fail here, not skip.
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp_util import params, payload

from memory_ls.engine import MemoryEngine  # noqa: E402
from memory_ls.mcp import REFRESH_SECONDS  # noqa: E402
from memory_ls.settings import Settings  # noqa: E402

TRANSCRIPT = [
    {"type": "session", "id": "s-42"},
    {"type": "message", "message": {"role": "user", "content": "Which queue do we use?"}},
    {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "RabbitMQ with quorum queues for billing."}],
        },
    },
]


@pytest.fixture
def mcp_ws(ws: Path) -> Path:
    write(
        ws,
        ".memory-ls.toml",
        'provider = "none"\nsources = ["memory", "sessions"]\n'
        '[sessions]\nglobs = ["sessions/*.jsonl"]\n',
    )
    write(ws, "sessions/s-42.jsonl", "".join(json.dumps(r) + "\n" for r in TRANSCRIPT))
    return ws


async def test_search_then_get_over_stdio(mcp_ws: Path, tmp_path: Path):
    async with (
        stdio_client(params(mcp_ws, tmp_path / "index.sqlite")) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        init = await session.initialize()
        assert init.server_info.name == "memory-ls"
        assert "memory_search" in (init.instructions or "")

        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"memory_search", "memory_get"} <= set(tools)
        assert "FIRST" in tools["memory_search"].description
        assert "SECOND" in tools["memory_get"].description
        assert tools["memory_search"].input_schema["required"] == ["query"]
        assert {"query", "maxResults", "minScore", "sources", "pathPrefix", "explain"} == set(
            tools["memory_search"].input_schema["properties"]
        )
        assert {"path", "citation", "from", "lines"} == set(
            tools["memory_get"].input_schema["properties"]
        )

        found = payload(await session.call_tool("memory_search", {"query": "token bucket Redis"}))
        assert found["mode"] == "keyword" and found["provider"] is None
        hit = found["results"][0]
        assert hit["path"] == "memory/2026-01-10-api-design.md"
        assert hit["citation"] == f"{hit['path']}#L{hit['startLine']}-L{hit['endLine']}"
        assert hit["uri"].startswith("file://") and hit["range"]["start"]["line"] >= 0

        # The same shape as memory/search: what the engine itself answers, key for key.
        engine = MemoryEngine(mcp_ws, Settings(provider="none"), index_path=tmp_path / "e.sqlite")
        try:
            engine.sync("test")
            direct = engine.search("token bucket Redis").to_json(engine.root)
        finally:
            engine.close()
        assert set(direct) - {"fallbackReason"} <= set(found)
        assert set(direct["results"][0]) == set(hit)

        why = payload(
            await session.call_tool(
                "memory_search", {"query": "token bucket Redis", "explain": True}
            )
        )
        assert why["explain"][0]["plan"]["mode"] == "keyword"
        assert [h["citation"] for h in why["results"]] == [h["citation"] for h in found["results"]]
        assert why["results"][0]["explain"]["keyword"]["rank"] == 1

        got = payload(await session.call_tool("memory_get", {"citation": hit["citation"]}))
        assert got["path"] == hit["path"] and got["from"] == hit["startLine"]
        assert "token bucket" in got["text"]
        assert set(got) == {"uri", "path", "from", "to", "totalLines", "text"}

        part = payload(
            await session.call_tool(
                "memory_get", {"path": "memory/2026-01-10-api-design.md", "from": 3, "lines": 1}
            )
        )
        assert part["text"] == "We chose token bucket rate limiting backed by Redis."

        # Filters pass through; transcripts cite their JSONL lines.
        sess = payload(
            await session.call_tool(
                "memory_search", {"query": "RabbitMQ quorum", "sources": ["sessions"]}
            )
        )
        assert [r["path"] for r in sess["results"]] == ["sessions/s-42.jsonl"]
        assert sess["results"][0]["endLine"] == 3
        line = payload(
            await session.call_tool("memory_get", {"citation": "sessions/s-42.jsonl#L3"})
        )
        assert line["text"] == "Assistant: RabbitMQ with quorum queues for billing."

        # A note an agent writes mid-session is found by the next search.
        time.sleep(REFRESH_SECONDS + 0.1)
        write(mcp_ws, "memory/new-note.md", "# Pager\n\nThe pager rotation is weekly.\n")
        fresh = payload(await session.call_tool("memory_search", {"query": "pager rotation"}))
        assert fresh["results"][0]["path"] == "memory/new-note.md"


async def test_errors_are_tool_errors(mcp_ws: Path, tmp_path: Path):
    async with (
        stdio_client(params(mcp_ws, tmp_path / "index.sqlite")) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        await session.initialize()
        cases = [
            ("memory_get", {"path": "README.md"}, "not a memory file"),
            ("memory_get", {"path": "../outside.md"}, "outside the workspace"),
            ("memory_get", {}, "citation"),
            ("memory_get", {"path": "MEMORY.md", "from": 0}, "from"),
            ("memory_search", {"query": "  "}, "query"),
            ("memory_search", {"query": "x", "maxResults": "many"}, "maxResults"),
            ("memory_search", {"query": "x", "sources": ["web"]}, "sources"),
            ("memory_nope", {}, "unknown tool"),
        ]
        for name, args, expect in cases:
            result = await session.call_tool(name, args)
            assert result.is_error, (name, args)
            assert expect in result.content[0].text, (name, args, result.content[0].text)
        # Still serving after errors.
        ok = payload(await session.call_tool("memory_search", {"query": "dark mode"}))
        assert ok["results"][0]["path"] == "MEMORY.md"
