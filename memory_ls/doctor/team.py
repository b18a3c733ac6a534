"""The team database (``store.backend = "postgres"``): reachable, pgvector, schema, namespace
and this role's privileges, asked with SELECTs only; the password is never shown."""

from __future__ import annotations

import math
import os
from typing import Any

from .check import FAIL, OK, WARN, Check, Env

# The tables a client reads and writes (index/postgres/migrations.py), and what it does there.
TABLES = ("memory_meta", "memory_files", "memory_chunks", "memory_vectors", "memory_chunk_lines")
PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE"

FIXES = {
    "bad credentials": "correct the user or password in ~/.pgpass or MEMORY_LS_PG_URL "
    "(store.postgres.url is often shared: keep the password out of it)",
    "unreachable": "start the server, or correct the host and port of store.postgres.url",
    "unknown host": "correct the host of store.postgres.url",
    "no such database": "create the database (CREATE DATABASE), or correct its name in the URL",
    "invalid URL": "correct store.postgres.url (postgresql://user@host:port/database)",
    "too slow": "check the server's load and network, or raise store.postgres.timeoutMs",
}


def _fix_for(reason: str) -> str:
    kind = next((k for k in FIXES if f": {k} (" in reason), "")
    return FIXES.get(kind, "check store.postgres.url and the server (psql with the same URL)")


def check_team(env: Env) -> Check:
    pg = env.settings.store.postgres
    if env.settings.store.backend != "postgres":
        return Check("team", OK, "not used (store.backend = sqlite)")
    from ..index.postgres.errors import URL_ENV, describe, redact

    url = pg.url or os.environ.get(URL_ENV, "")
    if not url:
        fix = f"set store.postgres.url, or {URL_ENV} in the environment"
        return Check("team", FAIL, "store.backend = postgres but no URL is set", fix=fix)
    try:
        import psycopg
    except ImportError:
        return Check("team", FAIL, "psycopg is not installed", fix="pip install 'memory-ls[team]'")
    timeout = max(2, math.ceil(pg.timeout_ms / 1000))
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=timeout) as conn:
            return _inspect(conn, env, redact(url))
    except psycopg.Error as exc:
        reason = describe(exc, url)
        return Check("team", FAIL, reason, f"namespace: {pg.namespace}", _fix_for(reason))


def _one(conn: Any, sql: str, *args: object) -> Any:
    row = conn.execute(sql, args).fetchone()
    return row[0] if row else None


def _inspect(conn: Any, env: Env, shown: str) -> Check:
    from ..index.postgres.migrations import MIN_PGVECTOR, SCHEMA_VERSION, version_tuple

    ns = env.settings.store.postgres.namespace
    server = _one(conn, "SHOW server_version")
    role = _one(conn, "SELECT current_user")
    lines = [f"server: PostgreSQL {server}, role {role}, namespace {ns}"]
    pgvector = _one(conn, "SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    if pgvector is None:
        fix = "an administrator runs CREATE EXTENSION vector; in that database"
        return Check("team", FAIL, f"{shown}: pgvector is not installed", "\n".join(lines), fix)
    lines.append(f"pgvector {pgvector}")
    if version_tuple(pgvector) < MIN_PGVECTOR:
        fix = "an administrator runs ALTER EXTENSION vector UPDATE"
        return Check(
            "team", FAIL, f"{shown}: pgvector {pgvector} is too old (0.5+)", "\n".join(lines), fix
        )
    if _one(conn, "SELECT to_regclass('memory_ls_migrations')") is None:
        fix = "the first `memory-ls index` creates it (as a role that may create tables)"
        return Check("team", WARN, f"{shown}: no memory-ls schema yet", "\n".join(lines), fix)
    schema = int(_one(conn, "SELECT max(version) FROM memory_ls_migrations") or 0)
    lines.append(f"schema {schema} (this memory-ls writes {SCHEMA_VERSION})")
    status, fix = OK, ""
    if schema > SCHEMA_VERSION:
        status, fix = WARN, "upgrade memory-ls: a newer one migrated this database"
    elif schema < SCHEMA_VERSION:
        status, fix = WARN, "the next `memory-ls index` migrates it (as the tables' owner)"
    lacking = _lacking(conn)
    if lacking:
        lines += [f"role {role} lacks {', '.join(privs)} on {t}" for t, privs in lacking.items()]
        grant = f'GRANT {PRIVILEGES} ON {", ".join(lacking)} TO "{role}"'
        summary = f"{shown}: role {role} may not read and write the index"
        return Check("team", FAIL, summary, "\n".join(lines), f"the tables' owner runs {grant}")
    files = _one(conn, "SELECT count(*) FROM memory_files WHERE ns = %s", ns)
    chunks = _one(conn, "SELECT count(*) FROM memory_chunks WHERE ns = %s", ns)
    summary = f"{shown}: pgvector {pgvector}, schema {schema}, namespace {ns}: {files} files"
    summary += f", {chunks} chunks"
    return Check("team", status, summary, "\n".join(lines), fix)


def _lacking(conn: Any) -> dict[str, list[str]]:
    """The privileges this role lacks, by table (each asked alone: has_table_privilege with a
    list is true when any one of them is held)."""
    out: dict[str, list[str]] = {}
    for table in TABLES:
        if _one(conn, "SELECT to_regclass(%s)", table) is None:
            continue  # a table of a later schema, not made yet
        for priv in PRIVILEGES.split(", "):
            if not _one(conn, "SELECT has_table_privilege(%s, %s)", table, priv):
                out.setdefault(table, []).append(priv)
    return out
