"""Codex: ``[mcp_servers.<name>]`` and the top-level ``notify`` in ``~/.codex/config.toml``
(``$CODEX_HOME/config.toml`` when set).

Formats, from Codex's configuration reference (https://developers.openai.com/codex/config-reference,
and docs/config.md in github.com/openai/codex): ``[mcp_servers.<name>]`` with ``command`` and
``args`` for a stdio server (``codex mcp add <name> -- <command> [args...]`` writes it);
``notify``, a top-level array, the program Codex runs after every turn with one JSON argument.
Codex reads ``notify`` only from the user's config.toml, not a project's.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

from .change import Change, SetupError, read
from .server import NAME, is_ours
from .toml_text import (
    append_table,
    array,
    first_header,
    statement_end,
    statements,
    string,
    top_level_insert,
    verify,
)

TABLE = re.compile(rf'^\s*\[\s*mcp_servers\s*\.\s*"?{NAME}"?\s*\]\s*(#.*)?$')
NOTIFY = re.compile(r"^\s*notify\s*=")


def config_file(home: Path) -> Path:
    given = os.environ.get("CODEX_HOME")
    return (Path(given).expanduser() if given else home / ".codex") / "config.toml"


def server_lines(server: dict[str, Any]) -> list[str]:
    return [f"command = {string(server['command'])}\n", f"args = {array(server['args'])}\n"]


def put_server(lines: list[str], data: dict[str, Any], server: dict[str, Any]) -> list[str]:
    """Add or replace ``[mcp_servers.memory]``'s command and args; its other keys and its
    sub-tables (env, tools) stay."""
    tables = data.get("mcp_servers", {})
    old = tables.get(NAME) if isinstance(tables, dict) else None
    if isinstance(old, dict) and {k: old.get(k) for k in server} == server:
        return []
    if old is None:
        append_table(lines, f"[mcp_servers.{NAME}]", server_lines(server))
        data.setdefault("mcp_servers", {})[NAME] = dict(server)
        return []
    start = next((i for i, line in enumerate(lines) if TABLE.match(line)), None)
    if start is None or not isinstance(old, dict):
        raise SetupError(f"mcp_servers.{NAME} is not a [mcp_servers.{NAME}] table")
    end = first_header(lines, start + 1)
    kept = [x for key, part in statements(lines, start + 1, end) if key not in server for x in part]
    lines[start + 1 : end] = server_lines(server) + kept
    data["mcp_servers"][NAME] = {**old, **server}
    return [f"replaces the command and args of [mcp_servers.{NAME}] (see the diff)"]


def put_notify(lines: list[str], data: dict[str, Any], notify: list[str]) -> list[str]:
    current = data.get("notify")
    if current == notify:
        return []
    if current is not None and not is_ours(current):
        # Codex runs one notify program: replacing the user's (a desktop notifier, say) would
        # silently break it, so it stays and the user decides.
        shown = shlex.join(map(str, current)) if isinstance(current, list) else str(current)
        return [
            f"notify already runs {shown}; Codex runs one notify program, so memory-ls's was "
            "not added"
        ]
    line = f"notify = {array(notify)}\n"
    notes = []
    if current is None:
        top_level_insert(lines, [line])
    else:
        first = first_header(lines)
        i = next((k for k in range(first) if NOTIFY.match(lines[k])), None)
        if i is None:
            raise SetupError("notify is not a top-level `notify = [...]` line")
        lines[i : statement_end(lines, i, first)] = [line]
        notes.append("replaces the existing memory-ls notify (see the diff)")
    data["notify"] = notify
    return notes


def plan(
    server: dict[str, Any], hook: list[str], workspace: Path, home: Path
) -> tuple[list[str], list[Change]]:
    path = config_file(home)
    add = shlex.join(["codex", "mcp", "add", NAME, "--", server["command"], *server["args"]])
    text = [
        f"MCP server ({path}; or `{add}`):",
        f"  [mcp_servers.{NAME}]",
        *(f"  {x.rstrip()}" for x in server_lines(server)),
        "Session notes (top-level, above any [table]; Codex runs it after every turn):",
        f"  notify = {array(hook)}",
    ]
    before = read(path)
    try:
        data = tomllib.loads(before or "")
    except tomllib.TOMLDecodeError as exc:
        raise SetupError(f"{path} is not valid TOML ({exc}); nothing was written") from exc
    expected = copy.deepcopy(data)
    lines = (before or "").splitlines(keepends=True)
    try:
        notes = put_server(lines, expected, server) + put_notify(lines, expected, hook)
    except SetupError as exc:
        raise SetupError(f"{path}: {exc}; nothing was written") from exc
    after = "".join(lines)
    verify(after, expected, str(path))
    return text, [Change(path, before, after, tuple(f"{path}: {n}" for n in notes))]
