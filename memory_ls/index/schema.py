"""SQLite schema of the index, and the connection that loads sqlite-vec where it can."""

from __future__ import annotations

import logging
import sqlite3 as _stdlib_sqlite3
from pathlib import Path
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

# 2: files.tail, where a growing transcript's next sync starts reading (upgraded in place).
SCHEMA_VERSION = 2


def sqlite_module() -> ModuleType:
    """The stdlib sqlite3 when it can load extensions, else sqlean.py (a drop-in with FTS5)."""
    if hasattr(_stdlib_sqlite3.Connection, "enable_load_extension"):
        return _stdlib_sqlite3
    try:
        import sqlean

        return sqlean
    except ImportError:  # still works: vectors fall back to numpy
        return _stdlib_sqlite3


sqlite3 = sqlite_module()
DatabaseError = sqlite3.DatabaseError
Connection = Any  # sqlite3.Connection or sqlean.Connection


def connect(path: Path | str, *, vec: bool = True) -> tuple[Connection, str | None]:
    """Open the database; return (connection, why sqlite-vec is unavailable or None)."""
    conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=30000")
    reason = None
    if vec:
        try:
            import sqlite_vec

            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
        except Exception as exc:  # missing wheel, no load_extension, wrong platform
            reason = f"sqlite-vec not loaded ({type(exc).__name__}: {exc}); using numpy"
    return conn, reason


# How FTS5 splits and folds text; everything that must match the way the index does uses it.
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"

DDL = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
  path TEXT PRIMARY KEY,
  source TEXT NOT NULL,
  hash TEXT NOT NULL,
  mtime REAL NOT NULL,
  size INTEGER NOT NULL,
  date TEXT,              -- ISO date driving temporal decay; NULL = evergreen
  lines INTEGER NOT NULL DEFAULT 0,
  line_map TEXT,          -- JSON list: rendered line -> original line (transcripts)
  tail TEXT               -- JSON: where a transcript's next sync resumes (see sync.py)
);
CREATE TABLE IF NOT EXISTS chunks (
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL,
  source TEXT NOT NULL,
  start_line INTEGER NOT NULL,
  end_line INTEGER NOT NULL,
  hash TEXT NOT NULL,
  model TEXT NOT NULL DEFAULT '',
  text TEXT NOT NULL,
  embedding BLOB,         -- float32, unit length; NULL until the vector side catches up
  updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE INDEX IF NOT EXISTS chunks_pending ON chunks(id) WHERE embedding IS NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
  body, tokenize = '{FTS_TOKENIZER}'
);
CREATE TABLE IF NOT EXISTS embedding_cache (
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  provider_key TEXT NOT NULL,
  hash TEXT NOT NULL,
  embedding BLOB NOT NULL,
  used_at REAL NOT NULL,
  PRIMARY KEY (provider, model, provider_key, hash)
);
CREATE INDEX IF NOT EXISTS embedding_cache_lru ON embedding_cache(used_at);
"""


def create(conn: Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(DDL)


def upgrade(conn: Connection, version: str) -> bool:
    """Bring an index of an older schema up to date in place; False when it cannot be."""
    if version != "1":
        return False
    columns = {row[1] for row in conn.execute("PRAGMA table_info(files)")}
    if "tail" not in columns:  # transcripts without it are read whole once, then by tail
        conn.execute("ALTER TABLE files ADD COLUMN tail TEXT")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))
    return True


def create_vec_table(conn: Connection, dims: int) -> None:
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0("
        f"embedding float[{int(dims)}] distance_metric=cosine)"
    )


def has_table(conn: Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    return row is not None
