"""One PostgreSQL database as one engine sees it: the connections, the schema check, and the
small caches its readers share.

Readers borrow pooled connections whose every statement has the query budget
(``statement_timeout``, ``tcp_user_timeout``), set when the connection is made: planner
settings are never changed on a shared connection (psycopg prepares a statement after five runs,
and a plan made under a changed setting would stick). The one writer connection has a longer
budget: a sync may push thousands of chunks in one transaction. Behind a transaction pooler
no ``statement_timeout`` is sent; there, and in direct mode too, a whole read also has the
budget on the client's side (``deadline``).
"""

from __future__ import annotations

import contextlib
import math
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np
import psycopg
from psycopg import conninfo
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool

from .deadline import Deadlines, Expired
from .errors import PrimaryUnavailable, describe, redact
from .migrations import Capabilities, migrate

WRITER_TIMEOUT_MS = 600_000
STATS_SECONDS = 30.0  # document frequencies and the calibration sample may be this stale


class Vector:
    """A float32 vector sent in pgvector's binary format (not text: 10x less work at 100k)."""

    def __init__(self, values: np.ndarray):
        self.values = values


class _VectorDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Vector) -> Buffer:
        v = np.asarray(obj.values, dtype=">f4")
        return struct.pack(">HH", len(v), 0) + v.tobytes()


class _VectorLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        dims = struct.unpack_from(">H", data)[0]
        return np.frombuffer(bytes(data), dtype=">f4", count=dims, offset=4).astype(np.float32)


def _options(url: str, timeout_ms: int, pooler: str) -> dict[str, Any]:
    """Connection parameters: the URL's own, plus the budget appended to its ``options``.

    A pooler in transaction mode gets neither: PgBouncer refuses startup options it does not
    track, and a statement prepared on one server connection is unknown on the next."""
    params = conninfo.conninfo_to_dict(url)
    opts: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": max(2, math.ceil(timeout_ms / 1000)),
        "tcp_user_timeout": timeout_ms,
        "application_name": params.get("application_name") or "memory-ls",
    }
    if pooler == "transaction":
        opts["prepare_threshold"] = None
    else:
        extra = f"-c statement_timeout={timeout_ms}"
        opts["options"] = f"{params.get('options', '')} {extra}".strip()
    return opts


class Session(Protocol):
    """What the store's helper modules (keyword, vectors, pending, files) use of a
    ``PgStore``."""

    conn: psycopg.Connection[Any]
    db: PgDatabase
    ns: str

    def lock_path(self, path: str) -> None: ...

    def q(
        self,
        sql: str | psycopg.sql.Composed,
        params: Any = None,
        *,
        binary: bool = False,
        prepare: bool | None = None,
    ) -> psycopg.Cursor[Any]: ...


class PgDatabase:
    def __init__(
        self,
        url: str,
        namespace: str,
        origin: str,
        *,
        timeout_ms: int = 2000,
        pool_size: int = 4,
        claimant: str = "",
        pooler: str = "none",
    ):
        self.url = url
        self.namespace = namespace
        self.origin = origin  # who writes: host and folder, recorded on every file row
        # Who embeds: two processes on one folder (a language server and the CLI) must not
        # take over each other's claims, so a claim names the process as well as the folder.
        self.claimant = claimant or f"{origin} {uuid.uuid4().hex[:12]}"
        self.timeout_ms = timeout_ms
        self.pooler = pooler
        self.deadlines = Deadlines()
        self.model_key = ""  # the embedding model whose vectors this engine reads and writes
        self.lock = threading.Lock()
        self.terms: dict[tuple[str, bool], tuple[str, tuple[str, ...]]] = {}  # term -> tsquery
        self.df: dict[str, tuple[int, float]] = {}  # tsquery text -> (chunks, when counted)
        self.totals: tuple[int, float, float] | None = None  # (chunks, avg length, when)
        self.sample: tuple[str, np.ndarray, float] | None = None  # (model, vectors, when)
        # The table's most common lexemes and the share of chunks holding each (pg_stats)
        # (shares, rows, rows changed since ANALYZE, when)
        self.common: tuple[dict[str, float], float, float, float] | None = None
        self.hnsw_dims: set[int] = set()  # dimension counts that have their HNSW index
        self.deferred_dims: set[int] = set()  # ... that get it once the vector phase is done
        self.stored_vectors = 0  # vectors written since memory_vectors was last analyzed
        self.may_merge = True  # False once the server said this role may not (till a reconnect)
        self._writer: psycopg.Connection[Any] | None = None
        try:
            conn = self._connect(WRITER_TIMEOUT_MS)
        except psycopg.Error as exc:
            raise PrimaryUnavailable(describe(exc, url)) from None
        try:
            # Through a pooler that has lost its server, the first statement would wait minutes.
            with self.budget(conn):
                conn.execute("SELECT 1")
            self.caps: Capabilities = migrate(conn, origin)
            self._vector_oid = TypeInfo.fetch(conn, "vector").oid  # type: ignore[union-attr]
            self._register(conn)
        except BaseException:
            conn.close()
            self.deadlines.close()
            raise
        self._writer = conn
        self.pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs=_options(url, timeout_ms, pooler),
            configure=self._register,
            timeout=timeout_ms / 1000,
            open=False,
            name="memory-ls",
        )
        try:
            self.pool.open(wait=True, timeout=max(2.0, timeout_ms / 1000))
        except Exception as exc:
            self.close()
            raise PrimaryUnavailable(describe(exc, url)) from None

    def _connect(self, timeout_ms: int) -> psycopg.Connection[Any]:
        opts = _options(self.url, timeout_ms, self.pooler)
        opts["connect_timeout"] = max(2, math.ceil(self.timeout_ms / 1000))
        return psycopg.connect(self.url, **opts)

    def _register(self, conn: psycopg.Connection[Any]) -> None:
        dumper = type("VectorDumper", (_VectorDumper,), {"oid": self._vector_oid})
        conn.adapters.register_dumper(Vector, dumper)
        conn.adapters.register_loader(self._vector_oid, _VectorLoader)

    # -- connections --------------------------------------------------------------------------
    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for one read (``store.reader`` wraps it), within the budget."""
        with self.pool.connection() as conn, self.budget(conn):
            yield conn

    @contextmanager
    def budget(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """What ``conn`` runs in this block is cut off after the search budget."""
        try:
            with self.deadlines.guard(conn, self.timeout_ms / 1000):
                yield
        except Expired as exc:
            why = f"PostgreSQL at {redact(self.url)}: too slow ({exc})"
            raise PrimaryUnavailable(why) from None

    def writer_connection(self) -> psycopg.Connection[Any]:
        """The one writer connection (made again after it broke)."""
        if self._writer is None or self._writer.closed or self._writer.broken:
            if self._writer is not None:
                with contextlib.suppress(Exception):
                    self._writer.close()
            self._writer = self._connect(WRITER_TIMEOUT_MS)
            self._register(self._writer)
        return self._writer

    def ping(self) -> None:
        with self.connection() as conn:
            conn.execute("SELECT 1")

    # -- shared caches --------------------------------------------------------------------------
    def fresh(self, when: float) -> bool:
        return time.monotonic() - when < STATS_SECONDS

    def close(self) -> None:
        self.deadlines.close()
        with contextlib.suppress(Exception):
            if hasattr(self, "pool"):
                self.pool.close(timeout=1.0)
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
            self._writer = None
