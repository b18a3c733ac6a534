"""Claude Desktop: ``claude_desktop_config.json``, ``{"mcpServers": {name: {"command",
"args"}}}``.

Format and location, from the MCP documentation's Claude Desktop guide
(https://modelcontextprotocol.io/quickstart/user): macOS
``~/Library/Application Support/Claude/claude_desktop_config.json``, Windows
``%APPDATA%\\Claude\\claude_desktop_config.json``. There is no official Linux build; the Linux
path here (``$XDG_CONFIG_HOME/Claude``, as Electron apps keep their config there) is what
unofficial builds use, not a documented one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from .change import Change
from .json_config import server_change
from .server import NAME

FILE = "claude_desktop_config.json"


def config_file(home: Path) -> Path:
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / FILE
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming") / "Claude" / FILE
    return Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "Claude" / FILE


def plan(
    server: dict[str, Any], hook: list[str], workspace: Path, home: Path
) -> tuple[list[str], list[Change]]:
    path = config_file(home)
    linux = sys.platform not in ("darwin", "win32")
    unofficial = ", not an official path: Claude Desktop has no Linux build" if linux else ""
    text = [
        f"MCP server ({path}{unofficial}):",
        f"  {json.dumps({'mcpServers': {NAME: server}}, ensure_ascii=False)}",
        "  Quit and reopen Claude Desktop to load it.",
        "Session notes: Claude Desktop runs no command when a conversation ends, and keeps no",
        "  transcripts memory-ls can read.",
    ]
    return text, [server_change(path, ("mcpServers",), server)]
