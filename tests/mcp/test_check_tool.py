"""``memory_check`` over the real MCP server (stdio, the SDK's own client): a draft note is
checked against what memory already says before the agent writes it."""

from __future__ import annotations

from pathlib import Path

from conftest import write
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp_util import params, payload


async def test_memory_check_says_what_is_already_known(ws: Path, tmp_path: Path):
    write(ws, ".memory-ls.toml", 'provider = "none"\n')
    index = tmp_path / "index.sqlite"
    async with (
        stdio_client(params(ws, index)) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert tools["memory_check"].input_schema["required"] == ["text"]
        draft = (
            "# Rate limits\n\n"
            "- We chose token bucket rate limiting, backed by Redis.\n"
            "- The new dashboard shows each tenant's error budget.\n"
        )
        got = payload(
            await session.call_tool("memory_check", {"text": draft, "path": "memory/limits.md"})
        )
        assert got["path"] == "memory/limits.md"
        assert got["findings"] == [
            {
                "code": "duplicate",
                "severity": "warning",
                "path": "memory/limits.md",
                "startLine": 3,
                "endLine": 3,
                "message": "already known at memory/2026-01-10-api-design.md#L3",
                "related": [
                    {"path": "memory/2026-01-10-api-design.md", "startLine": 3, "endLine": 3}
                ],
            }
        ]
        fresh = "# Build\n\nThe build cache lives on the shared runner's second disk.\n"
        assert payload(await session.call_tool("memory_check", {"text": fresh}))["findings"] == []
        bad = await session.call_tool("memory_check", {"text": "x", "path": "../out.md"})
        assert bad.is_error and "path" in bad.content[0].text
        bad = await session.call_tool("memory_check", {"path": "memory/x.md"})
        assert bad.is_error and "text" in bad.content[0].text
