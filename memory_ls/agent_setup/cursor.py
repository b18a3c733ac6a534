"""Cursor: ``~/.cursor/mcp.json``, ``{"mcpServers": {name: {"command", "args", "env"}}}``.

Format and location, from Cursor's documentation (https://cursor.com/docs/mcp):
``~/.cursor/mcp.json`` for every project, ``.cursor/mcp.json`` for one. The global file is
written, as memory is not one project's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .change import Change
from .json_config import server_change
from .server import NAME


def config_file(home: Path) -> Path:
    return home / ".cursor" / "mcp.json"


def plan(
    server: dict[str, Any], hook: list[str], workspace: Path, home: Path
) -> tuple[list[str], list[Change]]:
    path = config_file(home)
    text = [
        f"MCP server ({path}; .cursor/mcp.json in a project takes it for that project only):",
        f"  {json.dumps({'mcpServers': {NAME: server}}, ensure_ascii=False)}",
        "Session notes: memory-ls reads no Cursor hook payload or transcript yet.",
    ]
    return text, [server_change(path, ("mcpServers",), server)]
