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


def plugin_folder() -> str:
    """The memory plugin's folder (integrations/openclaw) when this memory-ls runs from a
    checkout; otherwise the guide's path, relative to a checkout (the plugin is not on npm yet)."""
    here = Path(__file__).resolve().parents[2] / "integrations" / "openclaw"
    return str(here) if (here / "openclaw.plugin.json").is_file() else "./integrations/openclaw"


def plugin_lines() -> list[str]:
    """The plugin's install commands from docs/guides/openclaw.md: printed, never run."""
    install = [
        "openclaw",
        "plugins",
        "install",
        plugin_folder(),
        "--force",
        "--accept-capabilities",
    ]
    build = f"cd {shlex.quote(plugin_folder())} && npm ci && npm run build && cd -"
    return [
        "Memory plugin (memory-ls answers OpenClaw's own memory_search / memory_get instead;",
        "  docs/guides/openclaw.md), not run here: build it (TypeScript), install it, then turn",
        "  off the built-in memory:",
        f"  {build}",
        f"  {shlex.join(install)}",
        "  openclaw config set plugins.entries.memory-core.enabled false",
        "  (then restart the gateway; plugins.slots.memory is set by the install)",
    ]


def set_command(server: dict[str, Any]) -> str:
    return shlex.join(["openclaw", "mcp", "set", NAME, json.dumps(server, ensure_ascii=False)])


def plan(
    server: dict[str, Any], hook: list[str], workspace: Path, home: Path
) -> tuple[list[str], list[Change]]:
    path = config_file(home)
    text = [
        f"MCP server (mcp.servers in {path}), for OpenClaw's embedded agents:",
        f"  {set_command(server)}",
        "Session notes: OpenClaw's session hooks are plugins, not shell commands; its",
        "  transcripts are searchable below.",
        *plugin_lines(),
    ]
    hint = f": a JSON5 file is OpenClaw's own to edit, run `{set_command(server)}`"
    return text, [server_change(path, ("mcp", "servers"), server, hint)]
