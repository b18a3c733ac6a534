"""The command lines an agent runs: the MCP server and the session-end hook, with the absolute
path of this memory-ls, so that an app started without the shell's PATH (Claude Desktop, Cursor
from the dock) still finds it."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

NAME = "memory"  # the server's name in every agent's config (as docs/guides/agents.md uses)
SCRIPT = "memory-ls.exe" if os.name == "nt" else "memory-ls"


def executable() -> list[str]:
    """This memory-ls as an absolute command: the script that was run, else the one beside the
    running interpreter, else the one on PATH, else the interpreter with ``-m memory_ls``.

    Symlinks are kept (a ``uv tool`` or ``pipx`` link survives an upgrade of its environment)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    candidates = []
    if argv0 is not None and argv0.name == SCRIPT:
        candidates.append(Path(os.path.abspath(argv0)))
    candidates.append(Path(os.path.abspath(sys.executable)).parent / SCRIPT)
    found = shutil.which(SCRIPT)
    if found:
        candidates.append(Path(os.path.abspath(found)))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return [str(c)]
    return [os.path.abspath(sys.executable), "-m", "memory_ls"]


def mcp_server(workspace: Path) -> dict[str, Any]:
    """The stdio server entry, as every agent here spells it: ``command`` and ``args``."""
    exe = executable()
    return {"command": exe[0], "args": [*exe[1:], "mcp", "-w", str(workspace)]}


def hook_argv(workspace: Path) -> list[str]:
    """``memory-ls session save --hook``: reads Claude Code's or Codex's payload
    (memory_ls/sessions/hooks.py)."""
    return [*executable(), "session", "save", "--hook", "-w", str(workspace)]


def is_ours(argv: object) -> bool:
    """Whether a configured command line is memory-ls's (any install, any workspace)."""
    text = " ".join(argv) if isinstance(argv, list) else str(argv)
    return ("memory-ls" in text or "memory_ls" in text) and "session" in text
