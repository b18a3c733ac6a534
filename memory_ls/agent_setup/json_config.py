"""JSON config files that hold MCP servers in an object keyed by name (Claude Code's .mcp.json,
Claude Desktop's and Cursor's mcpServers, OpenClaw's mcp.servers): load, merge, dump.

A file whose data would not change is left byte for byte as it is; one that changes is written
back with a 2-space indent, every other key kept in its order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .change import Change, SetupError, read
from .server import NAME


def load(path: Path, hint: str = "") -> tuple[str | None, dict[str, Any]]:
    text = read(path)
    if text is None or not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SetupError(f"{path} is not valid JSON ({exc}); nothing was written{hint}") from exc
    if not isinstance(data, dict):
        raise SetupError(f"{path}: expected a JSON object at the top; nothing was written")
    return text, data


def dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def child(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    """``data[key]`` as an object, created when missing."""
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise SetupError(f"{path}: {key} is not an object; nothing was written")
    return value


def server_change(
    path: Path, keys: tuple[str, ...], entry: dict[str, Any], hint: str = ""
) -> Change:
    """Put ``entry`` under ``keys`` + the server's name. An entry of that name that differs is
    replaced (the diff shows it before anything is written)."""
    before, data = load(path, hint)
    original = json.loads(json.dumps(data))
    servers = data
    for key in keys:
        servers = child(servers, key, path)
    notes: tuple[str, ...] = ()
    old = servers.get(NAME)
    if isinstance(old, dict) and {k: old.get(k) for k in entry} == entry:
        return Change(path, before, before or dump(data))  # extra keys the user added stay
    if old is not None:
        notes = (f"{path}: replaces the existing {'.'.join(keys)}.{NAME} entry (see the diff)",)
        merged = {**old, **entry} if isinstance(old, dict) else dict(entry)
        merged.pop("url", None)  # an HTTP entry becoming stdio: no transport left to contradict
        merged.pop("type", None)
        servers[NAME] = merged
    else:
        servers[NAME] = entry
    if data == original and before is not None:
        return Change(path, before, before)
    return Change(path, before, dump(data), notes)
