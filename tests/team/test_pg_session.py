"""The PostgreSQL a test session starts for itself when no MEMORY_LS_TEST_PG_URL is given
(tests/support/pg_util.py, wired in tests/conftest.py): one server for all the pytest-xdist
workers, gone when the session ends; a start that fails is a skip saying why, or a failure in
CI. CI gives a URL, so this is the only place its own run goes through that path."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from pg_util import PG_ENV, SESSION_ENV, require_server_binaries, session_url
from repo_root import REPO

PROBE = """
import os, psycopg
from pg_util import PG_ENV, SESSION_ENV, shared_url

def probe(n):
    url = shared_url()
    with psycopg.connect(url) as conn:
        started = conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
    out = os.path.join(os.environ["PROBE_OUT"], f"{n}-{worker}")
    with open(out, "w") as f:
        f.write(f"{url}\\n{started}\\n{os.environ[SESSION_ENV]}\\n")
"""


def _postgres_args() -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    return [line for line in ps.stdout.splitlines() if "postgres" in line]


def test_one_server_for_all_workers_and_none_after_the_session(tmp_path: Path):
    require_server_binaries()
    (tmp_path / "out").mkdir()
    tests = "".join(f"\ndef test_{n}():\n    probe({n})\n" for n in range(6))
    (tmp_path / "test_probe.py").write_text(PROBE + tests, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in (PG_ENV, SESSION_ENV)}
    env["PROBE_OUT"] = str(tmp_path / "out")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests"), str(REPO / "tests" / "support")])
    run = subprocess.run(
        # tests/conftest.py as a plugin: its hooks start and stop the session's server
        [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider"]
        + ["-n", "2", "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    seen = [p.read_text(encoding="utf-8").split("\n") for p in (tmp_path / "out").iterdir()]
    assert len(seen) == 6
    workers = {p.name.split("-", 1)[1] for p in (tmp_path / "out").iterdir()}
    assert workers == {"gw0", "gw1"}
    # one URL, one postmaster (started once), one folder
    assert len({(url, started, folder) for url, started, folder, _ in seen}) == 1
    folder = seen[0][2]
    assert folder.startswith("/tmp/memory-ls-pg-session-")
    assert not Path(folder).exists()
    assert not [a for a in _postgres_args() if folder in a]


def test_a_failed_start_is_reported_once_to_every_caller(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CI", raising=False)
    folder = Path(tempfile.mkdtemp(prefix="memory-ls-pg-session-", dir="/tmp"))
    try:
        (folder / "bin").write_text("/nonexistent/bin\n")  # pg_server.sh's initdb: not found
        for _ in range(2):
            with pytest.raises(pytest.skip.Exception, match="could not start one") as skip:
                session_url(folder)
            assert PG_ENV in str(skip.value)
        assert not (folder / "ready").exists()
        monkeypatch.setenv("CI", "true")
        with pytest.raises(pytest.fail.Exception, match="in CI: .*could not start one"):
            session_url(folder)
    finally:
        subprocess.run(["bash", str(REPO / "tests/support/pg_server.sh"), "rm", str(folder)])
