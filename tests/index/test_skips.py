"""What a sync passes over is said, by its workspace-relative path and why (issue 38, part 3):
files over maxFileBytes were named by their file name alone, and symlinks, FIFOs and names that
are not UTF-8 under memory/ were left out without a word in the report, status or the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import write
from repo_root import REPO

from memory_ls.engine import MemoryEngine
from memory_ls.index.writes import SyncReport
from memory_ls.settings import Settings

linux_only = pytest.mark.skipif(
    sys.platform != "linux",
    reason="symlinks, FIFOs and bytes names as Linux has them: run it on Linux (or in a container)",
)

# What the special entries below are reported as, each once.
SPECIAL = [
    "memory/caf\\xe9.md: its name is not UTF-8",
    "memory/dangling.md: symlink",
    "memory/link.md: symlink",
    "memory/linked: symlink",
    "memory/loop.md: symlink",
    "memory/pipe.md: not a regular file (FIFO)",
]


def engine(root: Path, tmp_path: Path, **settings: object) -> MemoryEngine:
    s = Settings(provider="none", **settings)  # type: ignore[arg-type]
    return MemoryEngine(root, s, index_path=tmp_path / "idx.sqlite")


def special_entries(root: Path, tmp_path: Path) -> None:
    """A symlink to a note, one to a folder outside, a dangling one and a loop, a FIFO and a
    note whose name is not UTF-8, all under memory/; the folder outside holds a secret."""
    mem = root / "memory"
    write(tmp_path, "outside/secret.md", "# Outside\n\nThe vault combination is okapi.\n")
    (mem / "link.md").symlink_to(root / "MEMORY.md")
    (mem / "linked").symlink_to(tmp_path / "outside", target_is_directory=True)
    (mem / "dangling.md").symlink_to(mem / "nowhere.md")
    (mem / "loop.md").symlink_to(mem / "loop.md")
    os.mkfifo(mem / "pipe.md")
    fd = os.open(os.fsencode(mem) + b"/caf\xe9.md", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"# Latin-1\n\nzebra crossing\n")
    os.close(fd)


def sync_within(e: MemoryEngine, seconds: float = 30) -> SyncReport:
    """``e.sync()`` in a thread: a sync that opened the FIFO would wait for a writer forever."""
    done: list[SyncReport] = []
    worker = threading.Thread(target=lambda: done.append(e.sync("test")), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the sync hung (a FIFO opened?)"
    assert done, "the sync failed"
    return done[0]


def test_two_big_files_of_one_name_are_told_apart(ws: Path, tmp_path: Path):
    write(ws, "memory/sub/big.md", "x" * 6000)
    write(ws, "memory/other/big.md", "y" * 7000)
    with engine(ws, tmp_path, max_file_bytes=5000) as e:
        report = e.sync("test")
        assert report.skipped == [
            "memory/other/big.md: 7000 bytes is over maxFileBytes (5000)",
            "memory/sub/big.md: 6000 bytes is over maxFileBytes (5000)",
        ]
        assert e.status()["lastSync"]["skipped"] == report.skipped


def test_a_binary_note_is_reported_by_its_path(ws: Path, tmp_path: Path):
    write(ws, "memory/sub/blob.md", b"\x00\x01PNG" * 10)
    with engine(ws, tmp_path) as e:
        assert e.sync("test").skipped == ["memory/sub/blob.md: binary file (NUL bytes)"]


@linux_only
def test_symlinks_fifos_and_names_not_utf8_are_each_reported_once(ws: Path, tmp_path: Path):
    special_entries(ws, tmp_path)
    with engine(ws, tmp_path) as e:
        report = sync_within(e)
        assert report.skipped == SPECIAL
        assert e.status()["lastSync"]["skipped"] == SPECIAL
        # Each sync says it again, once; nothing was followed into.
        assert sync_within(e).skipped == SPECIAL
        assert not e.search("okapi").results
        assert [h.path for h in e.search("dark mode").results] == ["MEMORY.md"]
    assert os.path.islink(ws / "memory" / "loop.md")  # nothing modified
    assert (tmp_path / "outside" / "secret.md").read_text().endswith("okapi.\n")


@linux_only
def test_a_symlinked_memory_folder_and_root_note_are_reported(tmp_path: Path):
    real = write(tmp_path, "real/memory/n.md", "# N\n\nThe heron note.\n").parent
    root = tmp_path / "ws"
    root.mkdir()
    (root / "memory").symlink_to(real, target_is_directory=True)
    os.mkfifo(root / "MEMORY.md")
    with engine(root, tmp_path) as e:
        assert sync_within(e).skipped == [
            "MEMORY.md: not a regular file (FIFO)",
            "memory: symlink",
        ]
        assert not e.search("heron").results


@linux_only
def test_index_json_shows_what_was_skipped(ws: Path, tmp_path: Path):
    special_entries(ws, tmp_path)
    write(ws, ".memory-ls.toml", 'provider = "none"\nmaxFileBytes = 5000\n')
    write(ws, "memory/sub/big.md", "x" * 6000)
    write(ws, "memory/other/big.md", "y" * 6000)
    done = subprocess.run(
        [sys.executable, "-m", "memory_ls", "index", "--json"]
        + ["-w", str(ws), "--index", str(tmp_path / "i.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    over = "6000 bytes is over maxFileBytes (5000)"
    big = [f"memory/other/big.md: {over}", f"memory/sub/big.md: {over}"]
    assert json.loads(done.stdout)["skipped"] == sorted(SPECIAL + big)
