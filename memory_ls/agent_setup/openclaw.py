"""OpenClaw: its MCP client registry, ``mcp.servers.<name>`` in ``~/.openclaw/openclaw.json``
(or ``$OPENCLAW_CONFIG_PATH``).

From OpenClaw's documentation (github.com/openclaw/openclaw): docs/gateway/config-extensions.md
("MCP": ``mcp.servers.<name>`` with ``command`` and ``args`` for a stdio server),
docs/cli/mcp/registry.md (``openclaw mcp set <name> <json>`` writes the same entry), and
docs/gateway/configuration.md (the file is JSON5: comments and trailing commas allowed; the
Gateway refuses unknown keys). A file that is plain JSON is merged here; a JSON5 one (its
comments would be lost) is left to ``openclaw mcp set``.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from .change import Change
from .json_config import server_change
from .server import NAME


def config_file(home: Path) -> Path:
    given = os.environ.get("OPENCLAW_CONFIG_PATH")
    return Path(given).expanduser() if given else home / ".openclaw" / "openclaw.json"


def set_command(server: dict[str, Any]) -> str:
    return shlex.join(["openclaw", "mcp", "set", NAME, json.dumps(server, ensure_ascii=False)])


def plan(
    server: dict[str, Any], hook: list[str], workspace: Path, home: Path
) -> tuple[list[str], list[Change]]:
    path = config_file(home)
    text = [
        f"MCP server (mcp.servers in {path}), for OpenClaw's embedded agents:",
        f"  {set_command(server)}",
        "Session notes: OpenClaw's session hooks are plugins, not shell commands; a memory-ls",
        "  plugin for OpenClaw is separate work. Its transcripts are searchable below.",
    ]
    hint = f": a JSON5 file is OpenClaw's own to edit, run `{set_command(server)}`"
    return text, [server_change(path, ("mcp", "servers"), server, hint)]
