"""Claude Code: the project's ``.mcp.json`` and a SessionEnd hook in the project's
``.claude/settings.local.json``.

Formats, from Claude Code's documentation:
- MCP servers: https://code.claude.com/docs/en/mcp ("project scope": ``.mcp.json`` at the
  project root, ``{"mcpServers": {name: {"command", "args", "env"}}}``; ``claude mcp add
  --scope project <name> -- <command> [args...]`` writes the same entry).
- Settings files: https://code.claude.com/docs/en/settings (``.claude/settings.local.json``: the
  project's settings that are not checked in).
- Hooks: https://code.claude.com/docs/en/hooks (``{"hooks": {"SessionEnd": [{"hooks":
  [{"type": "command", "command": ...}]}]}}``).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from .change import Change, SetupError
from .json_config import child, dump, load, server_change
from .server import NAME, is_ours

EVENT = "SessionEnd"


def mcp_file(workspace: Path) -> Path:
    return workspace / ".mcp.json"


def settings_file(workspace: Path) -> Path:
    # settings.local.json, not settings.json: the hook names this machine's memory-ls by its
    # absolute path, which a teammate's checkout would not have.
    return workspace / ".claude" / "settings.local.json"


def add_command(server: dict[str, Any]) -> str:
    argv = ["claude", "mcp", "add", "--scope", "project", NAME, "--", server["command"]]
    return shlex.join(argv + server["args"])


def hook_change(path: Path, hook: list[str]) -> Change:
    """Add the SessionEnd command hook; a memory-ls hook already there that differs (another
    install, another workspace) is replaced rather than run twice."""
    before, data = load(path)
    command = shlex.join(hook)
    groups = child(data, "hooks", path).setdefault(EVENT, [])
    if not isinstance(groups, list):
        raise SetupError(f"{path}: hooks.{EVENT} is not a list; nothing was written")
    mine = [
        h
        for g in groups
        if isinstance(g, dict) and isinstance(g.get("hooks"), list)
        for h in g["hooks"]
        if isinstance(h, dict) and h.get("type") == "command" and is_ours(h.get("command", ""))
    ]
    if any(h.get("command") == command for h in mine):
        return Change(path, before, before or dump(data))
    if mine:
        mine[0]["command"] = command
        note = f"{path}: replaces the existing memory-ls {EVENT} hook (see the diff)"
        return Change(path, before, dump(data), (note,))
    groups.append({"hooks": [{"type": "command", "command": command}]})
    return Change(path, before, dump(data))


def plan(
    server: dict[str, Any], hook: list[str], workspace: Path, home: Path
) -> tuple[list[str], list[Change]]:
    mcp, settings = mcp_file(workspace), settings_file(workspace)
    snippet = {"mcpServers": {NAME: server}}
    hook_json = {EVENT: [{"hooks": [{"type": "command", "command": shlex.join(hook)}]}]}
    text = [
        f"MCP server (project scope, {mcp}); Claude Code asks once to approve it:",
        f"  {add_command(server)}",
        "  or in .mcp.json:",
        f"  {json.dumps(snippet, ensure_ascii=False)}",
        f"Session notes: a {EVENT} hook in {settings} (hooks):",
        f"  {json.dumps(hook_json, ensure_ascii=False)}",
    ]
    changes = [server_change(mcp, ("mcpServers",), server), hook_change(settings, hook)]
    return text, changes
