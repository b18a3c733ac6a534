"""A sync killed with SIGKILL at any point leaves an index that opens, answers and catches up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write

from memory_ls.engine import MemoryEngine
from memory_ls.settings import Settings


def make_workspace(root: Path, n: int) -> None:
    for i in range(n):
        body = "\n".join(
            f"Line {j} of note {i} mentions project-{i % 50} and topic{j}." for j in range(40)
        )
        write(root, f"memory/2026-01-{1 + i % 28:02d}-note-{i}.md", f"# Note {i}\n\n{body}\n")
    write(root, "MEMORY.md", "# Memory\n\nThe canary word is flamingo.\n")


def run_and_kill(root: Path, idx: Path, delay: float, force: bool) -> None:
    cmd = [sys.executable, "-m", "memory_ls", "index", "-w", str(root), "--index", str(idx)]
    proc = subprocess.Popen(cmd + (["--force"] if force else []), env={**os.environ})
    time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.mark.parametrize("delay", [0.6, 1.2, 2.0])
def test_kill_during_full_rebuild_keeps_a_usable_index(tmp_path: Path, delay: float):
    root = tmp_path / "ws"
    make_workspace(root, 1500)
    idx = tmp_path / "index.sqlite"
    e = MemoryEngine(root, Settings(provider="none"), index_path=idx)
    e.sync()
    e.close()
    run_and_kill(root, idx, delay, force=True)
    e = MemoryEngine(root, Settings(provider="none"), index_path=idx)
    assert [h.path for h in e.search("flamingo").results] == ["MEMORY.md"]
    assert e.status()["files"] == 1501
    e.sync()
    assert e.status()["files"] == 1501
    e.close()
    assert not list(tmp_path.glob("index.sqlite.rebuild-*"))


def test_kill_during_first_index_then_resume(tmp_path: Path):
    root = tmp_path / "ws"
    make_workspace(root, 1500)
    idx = tmp_path / "index.sqlite"
    run_and_kill(root, idx, 1.0, force=False)
    e = MemoryEngine(root, Settings(provider="none"), index_path=idx)
    r = e.sync()
    assert e.status()["files"] == 1501
    assert r.indexed + r.unchanged == 1501
    assert [h.path for h in e.search("flamingo").results] == ["MEMORY.md"]
    e.close()
