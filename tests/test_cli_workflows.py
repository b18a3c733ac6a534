"""What an agent or a script does with the CLI and the MCP server, as separate processes on one
workspace and one index: search, then read what a result cites, with JSON on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import write

REPO = Path(__file__).resolve().parent.parent


def cli(root: Path, index: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``memory-ls ARGS -w ROOT --index INDEX`` in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "memory_ls", *args, "-w", str(root), "--index", str(index)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )


def keyword_ws(root: Path) -> Path:
    write(root, ".memory-ls.toml", 'provider = "none"\n')
    write(root, "MEMORY.md", "# Memory\n\nUser prefers dark mode.\n")
    return root


def test_every_citation_search_prints_can_be_read_with_get(tmp_path: Path):
    """A note in a folder with a space, or named with "#", was cited by search but its citation
    was refused by get as "bad line numbers" (exit 2): the path had to be one a citation inside
    running text can hold."""
    root = keyword_ws(tmp_path / "ws")
    names = ["memory/on call/handover notes.md", "memory/c#/sharp #1.md", "memory/café ünï.md"]
    for i, name in enumerate(names):
        write(root, name, f"# Note {i}\n\nThe walrus{i} deploy happens on Fridays.\n")
    index = tmp_path / "index.sqlite"
    for i, name in enumerate(names):
        found = cli(root, index, "search", f"walrus{i}", "--json")
        assert found.returncode == 0, found.stderr
        (hit,) = json.loads(found.stdout)["results"]
        assert hit["path"] == name and hit["citation"] == f"{name}#L1-L3"
        got = cli(root, index, "get", hit["citation"], "--json")
        assert got.returncode == 0, got.stderr
        excerpt = json.loads(got.stdout)
        assert excerpt["path"] == name and (excerpt["from"], excerpt["to"]) == (1, 3)
        assert excerpt["text"].endswith(f"The walrus{i} deploy happens on Fridays.")
        one = cli(root, index, "get", f"{name}#L3")
        assert one.returncode == 0 and one.stdout == f"The walrus{i} deploy happens on Fridays.\n"
    # Bad line numbers are still an error, whatever the path holds.
    bad = cli(root, index, "get", f"{names[0]}#L3-L1")
    assert bad.returncode == 2 and "bad line numbers" in bad.stderr
