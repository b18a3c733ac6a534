"""``memory-ls setup <agent>`` through the venv's own ``memory-ls``, with HOME in a temporary
folder: each agent's config file, written in that agent's documented format with entries of
its own (comments too, for TOML), is merged by ``--write --yes`` keeping the rest, backed up,
and left alone by a second run; printing changes nothing; no terminal and no --yes refuses."""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from repo_root import REPO

MEMORY_LS = Path(sys.executable).parent / "memory-ls"
CODEX_TOML = """\
# Codex settings (https://developers.openai.com/codex/config-reference)
model = "gpt-5-codex"   # the default model
approval_policy = "on-request"

# a server of the user's
[mcp_servers.docs]
command = "docs-server"
args = ["--stdio"]
env = { "DOCS_TOKEN" = "x" }

[profiles.fast]
model = "o4-mini"  # keep me
"""


def json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


# agent -> {file relative to the test's folder: its text before}; "home/..." or "ws/..."
FILES: dict[str, dict[str, str]] = {
    "claude-code": {
        "ws/.mcp.json": json_text(
            {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-fs", "/tmp"]}}}
        ),
        "ws/.claude/settings.local.json": json_text(
            {
                "permissions": {"allow": ["Bash(git status)"]},
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}
                    ]
                },
            }
        ),
    },
    "claude-desktop": {
        "home/.config/Claude/claude_desktop_config.json": json_text(
            {
                "globalShortcut": "Alt+Space",
                "mcpServers": {"weather": {"command": "uv", "args": ["run", "weather.py"]}},
            }
        )
    },
    "cursor": {
        "home/.cursor/mcp.json": json_text(
            {"mcpServers": {"pw": {"command": "npx", "args": ["@playwright/mcp@latest"]}}}
        )
    },
    "codex": {"home/.codex/config.toml": CODEX_TOML},
    "openclaw": {
        "home/.openclaw/openclaw.json": json_text(
            {
                "agents": {"defaults": {"workspace": "~/.openclaw/workspace"}},
                "mcp": {"servers": {"docs": {"command": "uvx", "args": ["mcp-server-fetch"]}}},
            }
        )
    },
}


def setup(base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "OPENCLAW_CONFIG_PATH")}
    env |= {"HOME": str(base / "home"), "XDG_CONFIG_HOME": str(base / "home" / ".config")}
    return subprocess.run(
        [str(MEMORY_LS), "setup", *args, "-w", str(base / "ws")],
        stdin=subprocess.DEVNULL,  # no terminal: only --yes may write
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def lay_out(base: Path, files: dict[str, str]) -> dict[Path, str]:
    (base / "ws").mkdir(parents=True, exist_ok=True)
    out = {}
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        out[path] = text
    return out


def snapshot(base: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in base.rglob("*") if p.is_file()}


def without_ours(path: Path, text: str) -> str:
    """The file as it was before memory-ls's entries: what the merge must have kept."""
    data = json.loads(text)
    if path.name == "settings.local.json":
        data["hooks"].pop("SessionEnd")
    elif path.name == "openclaw.json":
        data["mcp"]["servers"].pop("memory")
    else:
        data["mcpServers"].pop("memory")
    return json_text(data)


@pytest.mark.parametrize("agent", list(FILES))
def test_write_merges_keeps_the_rest_backs_up_and_is_idempotent(tmp_path: Path, agent: str) -> None:
    before = lay_out(tmp_path, FILES[agent])
    ws = str(tmp_path / "ws")

    printed = setup(tmp_path, agent)
    assert printed.returncode == 0, printed.stderr
    assert f'"{MEMORY_LS}"' in printed.stdout or str(MEMORY_LS) in printed.stdout
    assert {p: p.read_text() for p in before} == before  # printing writes nothing

    done = setup(tmp_path, agent, "--write", "--yes")
    assert done.returncode == 0, done.stderr
    for path, old in before.items():
        new = path.read_text(encoding="utf-8")
        assert new != old
        (backup,) = path.parent.glob(f"{path.name}.memory-ls-backup-*")
        assert backup.read_text(encoding="utf-8") == old
        if path.suffix == ".toml":
            data = tomllib.loads(new)
            server = data["mcp_servers"]["memory"]
            assert data["notify"] == [str(MEMORY_LS), "session", "save", "--hook", "-w", ws]
            # only lines added: every byte of the user's file is still there, in order
            ops = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines()).get_opcodes()
            assert {op for op, *_ in ops} <= {"equal", "insert"}
        else:
            assert without_ours(path, new) == old
            data = json.loads(new)
            if path.name == "settings.local.json":
                (group,) = data["hooks"]["SessionEnd"]
                assert group["hooks"][0]["command"].startswith(f"{MEMORY_LS} session save --hook")
                continue
            servers = data["mcp"]["servers"] if agent == "openclaw" else data["mcpServers"]
            server = servers["memory"]
        assert server == {"command": str(MEMORY_LS), "args": ["mcp", "-w", ws]}

    files = snapshot(tmp_path)
    again = setup(tmp_path, agent, "--write", "--yes")
    assert again.returncode == 0, again.stderr
    assert "nothing to change" in again.stdout
    assert snapshot(tmp_path) == files  # no write, no second backup


def test_without_a_terminal_or_yes_it_refuses(tmp_path: Path) -> None:
    lay_out(tmp_path, FILES["cursor"])
    files = snapshot(tmp_path)
    done = setup(tmp_path, "cursor", "--write")
    assert done.returncode == 2
    assert "--yes" in done.stderr and "nothing was written" in done.stderr
    assert "+++ " in done.stdout  # the diff is shown all the same
    assert snapshot(tmp_path) == files


def test_a_new_file_is_created_without_backup(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    done = setup(tmp_path, "codex", "--write", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout)["files"]
    assert entry["written"] and entry["backup"] is None
    text = (tmp_path / "home/.codex/config.toml").read_text()
    assert text.startswith("notify = [")
    assert tomllib.loads(text)["mcp_servers"]["memory"]["args"][-1] == str(tmp_path / "ws")


def test_codex_replaces_its_own_entry_and_keeps_a_foreign_notify(tmp_path: Path) -> None:
    old = (
        'notify = ["notify-send", "Codex"]  # my desktop notifier\n\n'
        "[mcp_servers.memory]  # an older install\n"
        'command = "/old/bin/memory-ls"\n'
        "args = [\n"
        '  "mcp", "-w", "/old/notes",\n'
        "]\n"
        "startup_timeout_sec = 20\n\n"
        "[mcp_servers.memory.env]\n"
        'MEMORY_LS_MCP_TOKEN = "t"\n'
    )
    lay_out(tmp_path, {"home/.codex/config.toml": old})
    done = setup(tmp_path, "codex", "--write", "--yes")
    assert done.returncode == 0, done.stderr
    assert '-command = "/old/bin/memory-ls"' in done.stdout  # the replacement is in the diff
    assert "notify already runs notify-send Codex" in done.stderr
    data = tomllib.loads((tmp_path / "home/.codex/config.toml").read_text())
    assert data["notify"] == ["notify-send", "Codex"]
    assert data["mcp_servers"]["memory"] == {
        "command": str(MEMORY_LS),
        "args": ["mcp", "-w", str(tmp_path / "ws")],
        "startup_timeout_sec": 20,
        "env": {"MEMORY_LS_MCP_TOKEN": "t"},
    }


def test_openclaw_json5_is_left_to_openclaw(tmp_path: Path) -> None:
    json5 = "{\n  // my gateway\n  gateway: { port: 18789 },\n}\n"
    lay_out(tmp_path, {"home/.openclaw/openclaw.json": json5})
    files = snapshot(tmp_path)
    done = setup(tmp_path, "openclaw", "--write", "--yes")
    assert done.returncode == 2
    assert "openclaw mcp set memory" in done.stderr
    assert snapshot(tmp_path) == files


def guide_text() -> str:
    return (REPO / "docs" / "guides" / "openclaw.md").read_text(encoding="utf-8")


def test_openclaw_prints_the_memory_plugin_install(tmp_path: Path) -> None:
    before = lay_out(tmp_path, FILES["openclaw"])
    printed = setup(tmp_path, "openclaw")
    assert printed.returncode == 0, printed.stderr
    plugin = REPO / "integrations" / "openclaw"
    lines = [line.strip() for line in printed.stdout.splitlines()]
    # The commands of docs/guides/openclaw.md, with this checkout's plugin folder.
    assert f"cd {plugin} && npm ci && npm run build && cd -" in lines
    assert f"openclaw plugins install {plugin} --force --accept-capabilities" in lines
    assert "cd integrations/openclaw && npm ci && npm run build && cd -" in guide_text()
    assert "openclaw config set plugins.entries.memory-core.enabled false" in lines
    guide = (REPO / "docs" / "guides" / "openclaw.md").read_text(encoding="utf-8")
    assert "openclaw config set plugins.entries.memory-core.enabled false" in guide
    assert {p: p.read_text() for p in before} == before  # printed, never run
    assert not (tmp_path / "home" / ".openclaw" / "extensions").exists()
