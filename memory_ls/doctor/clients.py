"""What uses memory-ls on this machine: editors (the VS Code extension, Neovim) and agents
(their transcript folders, and whether their MCP configuration names memory-ls)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .check import OK, WARN, Check, Env

# editors/vscode/package.json's publisher.name: an installed wheel has no editors/ folder to read
# it from (tests/test_doctor.py holds the two equal).
VSCODE_EXTENSION_ID = "memory-ls.memory-ls"
VSCODE_FOLDERS = (".vscode/extensions", ".vscode-server/extensions")
MENTIONS = ("memory-ls", "memory_ls")


def _extension_version(folder: Path) -> str:
    try:
        return str(json.loads((folder / "package.json").read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return "version unknown"


def check_editors(env: Env) -> Check:
    found = []
    for rel in VSCODE_FOLDERS:
        base = env.home / rel
        if not base.is_dir():
            continue
        prefix = f"{VSCODE_EXTENSION_ID}-"
        for folder in sorted(base.iterdir()):
            if folder.name.lower().startswith(prefix) and folder.is_dir():
                found.append(f"VS Code extension {_extension_version(folder)} in ~/{rel}")
    nvim = shutil.which("nvim")
    detail = (
        f"nvim: {nvim or 'not on PATH'} (whether the plugin is on its runtimepath is not checked)"
    )
    if not found:
        return Check("editors", OK, "no VS Code extension of memory-ls found (optional)", detail)
    return Check("editors", OK, "; ".join(found), detail)


def _mentions(path: Path) -> bool | None:
    """Whether the file names memory-ls; None when there is no such file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return any(m in text for m in MENTIONS)


def check_agents(env: Env) -> Check:
    from ..roots import MEMORY, default_name, detect

    found = detect(env.home)
    lines = [f"{agent.name} transcripts: {folder} ({count})" for agent, folder, count in found]
    notes = [(default_name(MEMORY, f, env.home), f, n) for _, f, n in detect(env.home, MEMORY)]
    lines += [f"memory folder {name}: {folder} ({count} notes)" for name, folder, count in notes]
    configs = {
        "claude": [env.home / ".claude.json", env.root / ".mcp.json"],
        "codex": [env.home / ".codex" / "config.toml"],
    }
    unset, configured = [], []
    for agent, files in configs.items():
        seen = {f: _mentions(f) for f in files}
        if any(seen.values()):
            configured.append(agent)
            lines.append(
                f"{agent}: memory-ls is in {', '.join(str(f) for f, m in seen.items() if m)}"
            )
        elif any(m is not None for m in seen.values()):
            unset.append(agent)
            there = ", ".join(str(f) for f, m in seen.items() if m is not None)
            lines.append(f"{agent}: {there} do not name memory-ls")
    if "sessions" not in env.settings.sources:
        lines.append(
            "transcripts are not indexed here (sources lacks sessions): "
            "`memory-ls sessions detect` prints the settings that index them"
        )
    if notes and not env.settings.memory.roots:
        lines.append(
            "the agents' memory folders are not indexed here (memory.roots is empty): "
            "`memory-ls sessions detect` prints the settings that index them"
        )
    summary = (
        f"transcript folders: {', '.join(a.name for a, _, _ in found) or 'none'}; "
        f"memory folders: {', '.join(name for name, _, _ in notes) or 'none'}; "
        f"MCP configured for: {', '.join(configured) or 'none'}"
    )
    if not unset:
        return Check("agents", OK, summary, "\n".join(lines))
    mcp = f"memory-ls mcp -w {env.root}"
    fixes = {
        "claude": f"claude mcp add memory-ls -- {mcp}",
        "codex": '~/.codex/config.toml: [mcp_servers.memory-ls] command = "memory-ls", '
        f'args = ["mcp", "-w", "{env.root}"]',
    }
    summary += f" (not for {', '.join(unset)})"
    return Check("agents", WARN, summary, "\n".join(lines), "\n".join(fixes[a] for a in unset))
