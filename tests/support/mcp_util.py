"""The MCP server as the tests start it: ``memory-ls mcp`` in its own process, over stdio
(the official SDK's parameters) or as a command line, and a tool result's JSON."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp.client.stdio import StdioServerParameters
from repo_root import REPO


def params(root: Path, index: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_ls", "mcp", "-w", str(root), "--index", str(index)],
        env={k: os.environ[k] for k in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME")},
        cwd=str(REPO),
    )


def payload(result) -> dict:
    assert not result.is_error, result.content
    data = json.loads(result.content[0].text)
    assert data == result.structured_content
    return data


def mcp_command(root: Path, index: Path) -> list[str]:
    return [sys.executable, "-m", "memory_ls", "mcp", "-w", str(root), "--index", str(index)]


def server_env(token: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_LS_MCP_TOKEN"}
    return env if token is None else {**env, "MEMORY_LS_MCP_TOKEN": token}
