"""``memory-ls`` run as a user runs it: its own process, the test's cache and config folders
(conftest.py isolates them) and a home folder of the test's, so that what doctor finds under
``~`` (agents, editors) is what the test put there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from repo_root import REPO


def run_cli(
    *args: str, home: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "memory_ls", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO), "HOME": str(home)} | (env or {}),
    )


def doctor(
    root: Path, home: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    """(exit code, the checks by id, stdout) of ``memory-ls doctor -w ROOT --json``."""
    done = run_cli("doctor", "-w", str(root), "--json", *args, home=home, env=env)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] == (done.returncode == 0)
    return done.returncode, {c["id"]: c for c in report["checks"]}, done.stdout
