"""SQLite schema of the index, and the connection that loads sqlite-vec where it can.

A new index is made by ``DDL`` at the current schema version (``SCHEMA_VERSION``, kept in
``meta``'s ``schema`` row). An index of an older version is brought up to date in place by
``MIGRATIONS``, numbered and append-only as the team index's are (``postgres/migrations.py``):
``upgrade`` runs each step after the index's version once, in order, each in its own
transaction that records its number as the schema version, so an upgrade cut short carries on
from where it stopped. A version this code does not know is moved aside and rebuilt.

To change the schema: change ``DDL`` (what a new index gets), then append ``N: _vN`` to
``MIGRATIONS``, a function that brings an index of version N-1 to N (written so that it also
leaves alone what is already there), and add N to ``VACUUM_AFTER`` when it frees many pages.
Never edit or renumber a migration that shipped. A change that only a rebuild can make (the
chunking, the tokenizer's rules) goes through the meta the engine compares, not here.
"""

from __future__ import annotations

import logging
import os
import sqlite3 as _stdlib_sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..text import fts_text, rules_stamp

log = logging.getLogger(__name__)


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


def connect_read_only(path: Path) -> Connection:
    """A connection that writes nothing to the index. Without a -wal file beside it the main
    file is the whole index, read as immutable: no lock, no side file made or touched. With one
    (a process has the index open, or died with it open) it is read through it, as every reader
    does: SQLite may then update the -shm file, which holds no data."""
    live = Path(f"{path}-wal").exists()
    uri = f"{Path(path).absolute().as_uri()}?mode=ro{'' if live else '&immutable=1'}"
    return sqlite3.connect(uri, uri=True, timeout=5, check_same_thread=False)


# Primary result codes of a SQLite error that says nothing about the file's content: a full
# disk, a lock held too long, an I/O error, a read-only file, a file that cannot be opened.
# An index that fails with one of these is kept as it is (it answers again once the cause is
# gone); only a corrupt or foreign file (or a schema this code cannot read) is moved aside.
_NOT_THE_FILE = {3, 5, 6, 7, 8, 9, 10, 13, 14, 15, 23}  # PERM BUSY LOCKED NOMEM READONLY
# INTERRUPT IOERR FULL CANTOPEN PROTOCOL AUTH

# What memory-ls reads as memory: never moved aside, even when it is at the index path.
_MEMORY_SUFFIXES = (".md", ".markdown", ".jsonl")


def is_unusable_file(exc: BaseException) -> bool:
    """Whether a database error means the file itself is corrupt or foreign (then it is moved
    aside and rebuilt), rather than the disk, a lock or the permissions failing."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is None or (code & 0xFF) not in _NOT_THE_FILE


class IndexPathError(OSError):
    """The index path names something that must not be replaced by an index."""


def check_index_path(path: Path) -> None:
    """Refuse an index path that is a folder or a memory file: such a path is a mistake in
    ``store.path`` or ``--index``, and moving it aside would move the user's files."""
    if path.is_dir():
        raise IndexPathError(f"index path {path} is a folder, not an index file")
    if path.name.lower().endswith(_MEMORY_SUFFIXES) or (
        path.exists() and path.resolve().name.lower().endswith(_MEMORY_SUFFIXES)
    ):
        raise IndexPathError(f"index path {path} is a memory file, not an index file")


def move_aside(path: Path, why: str) -> Path:
    """Keep a bad index file for inspection instead of deleting it silently."""
    dest = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    os.replace(path, dest)
    for ext in ("-wal", "-shm"):
        side = Path(str(path) + ext)
        if side.exists():
            os.replace(side, Path(str(dest) + ext))
    log.warning("index %s is unusable (%s); moved aside to %s and rebuilding", path, why, dest)
    return dest


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
  tail TEXT,              -- JSON: where a transcript's next sync resumes (see sync.py)
  meta TEXT               -- JSON: a Markdown file's front matter (sources/frontmatter.py)
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
  vec INTEGER NOT NULL DEFAULT 0,  -- 1 once chunk_vectors holds its vector
  updated_at REAL NOT NULL,
  lines INTEGER NOT NULL DEFAULT 0  -- 1 once its lines are embedded (see line_vectors.py)
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(hash);
CREATE INDEX IF NOT EXISTS chunks_pending ON chunks(id) WHERE vec = 0;
-- Apart from the text: a 1.5 KB vector beside 1.2 KB of text left one row per 4 KB page.
CREATE TABLE IF NOT EXISTS chunk_vectors (
  id INTEGER PRIMARY KEY,  -- chunks.id
  embedding BLOB NOT NULL  -- float16, unit length
);
-- Contentless: the text lives in chunks once; a delete names the tokens it removes.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
  body, content = '', tokenize = '{FTS_TOKENIZER}'
);
-- The vectors of a chunk's lines (int8, see line_vectors.py); ``rows``: each one's line (uint16).
CREATE TABLE IF NOT EXISTS chunk_lines (
  id INTEGER PRIMARY KEY,  -- chunks.id
  rows BLOB NOT NULL,
  vectors BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS embedding_cache (
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  provider_key TEXT NOT NULL,
  hash TEXT NOT NULL,
  embedding BLOB NOT NULL,  -- float16; only vectors that no chunk holds (see cache.py)
  used_at REAL NOT NULL,
  PRIMARY KEY (provider, model, provider_key, hash)
);
CREATE INDEX IF NOT EXISTS embedding_cache_lru ON embedding_cache(used_at);
-- Which chunks' vectors changed, in commit order: another process's in-memory matrix follows
-- this file's writes from here instead of loading every vector again (see vectors.VectorLog).
-- Triggers, so that every writer logs, whatever code it runs; AUTOINCREMENT: pruning the old
-- entries never lets a number come back.
CREATE TABLE IF NOT EXISTS vector_changes (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id INTEGER NOT NULL  -- chunks.id
);
CREATE TRIGGER IF NOT EXISTS chunk_vectors_added AFTER INSERT ON chunk_vectors BEGIN
  INSERT INTO vector_changes(id) VALUES (new.id);
END;
CREATE TRIGGER IF NOT EXISTS chunk_vectors_changed AFTER UPDATE ON chunk_vectors BEGIN
  INSERT INTO vector_changes(id) SELECT old.id WHERE old.id != new.id;
  INSERT INTO vector_changes(id) VALUES (new.id);
END;
CREATE TRIGGER IF NOT EXISTS chunk_vectors_removed AFTER DELETE ON chunk_vectors BEGIN
  INSERT INTO vector_changes(id) VALUES (old.id);
END;
"""


# Not in DDL: an index of schema 3 has no ``lines`` column until ``upgrade`` adds it.
LINES_PENDING = (
    "CREATE INDEX IF NOT EXISTS chunks_lines_pending ON chunks(id) WHERE vec = 1 AND lines = 0"
)


def create(conn: Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(DDL)
    if "lines" in _columns(conn, "chunks"):
        conn.execute(LINES_PENDING)
    # The vector log's numbers count from this file's creation: a rebuilt index, copied over
    # this one, brings a log and a name of its own. Looked up first: an INSERT takes the write
    # lock, which another process's sync may hold for a while.
    if conn.execute("SELECT 1 FROM meta WHERE key = 'vectorLog'").fetchone() is None:
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('vectorLog', lower(hex(randomblob(8))))"
        )


def _columns(conn: Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _v2(conn: Connection) -> None:
    """files.tail, where a growing transcript's next sync starts reading (each is read whole
    once, then by its tail)."""
    if "tail" not in _columns(conn, "files"):
        conn.execute("ALTER TABLE files ADD COLUMN tail TEXT")


def _v3(conn: Connection) -> None:
    """A third of the size: chunk vectors out of ``chunks`` into ``chunk_vectors`` as float16,
    the FTS5 table contentless, and the cache without the vectors that chunks hold."""
    conn.create_function("f16", 1, f16_blob, deterministic=True)
    if "embedding" in _columns(conn, "chunks"):
        conn.execute("ALTER TABLE chunks ADD COLUMN vec INTEGER NOT NULL DEFAULT 0")
        conn.execute(
            "INSERT INTO chunk_vectors(id, embedding) "
            "SELECT id, f16(embedding) FROM chunks WHERE embedding IS NOT NULL"
        )
        conn.execute("UPDATE chunks SET vec = 1 WHERE embedding IS NOT NULL")
        conn.execute("DROP INDEX IF EXISTS chunks_pending")
        conn.execute("ALTER TABLE chunks DROP COLUMN embedding")
        conn.execute("CREATE INDEX chunks_pending ON chunks(id) WHERE vec = 0")
        conn.execute("UPDATE embedding_cache SET embedding = f16(embedding)")
        key = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        conn.execute(
            "DELETE FROM embedding_cache WHERE provider = ? AND model = ? AND provider_key = ? "
            "AND hash IN (SELECT hash FROM chunks WHERE vec = 1)",
            (key.get("provider", ""), key.get("model", ""), key.get("providerKey", "")),
        )
    fts = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()
    if fts is not None and "content" not in fts[0]:
        # Written again from the chunks under today's rules, which the stamp then vouches for.
        conn.create_function("fts_text", 1, fts_text, deterministic=True)
        conn.execute(
            "CREATE VIRTUAL TABLE chunks_fts_v3 USING fts5("
            f"body, content = '', tokenize = '{FTS_TOKENIZER}')"
        )
        conn.execute("INSERT INTO chunks_fts_v3(rowid, body) SELECT id, fts_text(text) FROM chunks")
        conn.execute("DROP TABLE chunks_fts")
        conn.execute("ALTER TABLE chunks_fts_v3 RENAME TO chunks_fts")
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('ftsText', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (rules_stamp(),),
        )


def _v4(conn: Connection) -> None:
    """Line vectors (chunk_lines, chunks.lines) for re-scoring by a chunk's best line: every
    chunk's lines are still to embed (``chunk_lines`` itself comes with ``DDL``)."""
    if "lines" not in _columns(conn, "chunks"):
        conn.execute("ALTER TABLE chunks ADD COLUMN lines INTEGER NOT NULL DEFAULT 0")
        conn.execute(LINES_PENDING)


# The files whose first chunk may hold front matter, which chunks no longer do: read again.
FRONT_MATTER_REREAD = (
    "UPDATE files SET hash = '', mtime = -1 WHERE path IN "
    "(SELECT path FROM chunks WHERE start_line = 1 AND substr(text, 1, 3) = '---')"
)


def _v5(conn: Connection) -> None:
    """files.meta, a Markdown file's front matter kept apart from its body: the files that
    may open with one are read again by the next sync (their hash and mtime then match none)."""
    if "meta" not in _columns(conn, "files"):
        conn.execute("ALTER TABLE files ADD COLUMN meta TEXT")
    conn.execute(FRONT_MATTER_REREAD)


# Version -> the step that brings an index of the version before it there. Append-only.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: _v2, 3: _v3, 4: _v4, 5: _v5}
SCHEMA_VERSION = max(MIGRATIONS)
OLDEST_UPGRADED = min(MIGRATIONS) - 1  # older indexes (none were made) are rebuilt
VACUUM_AFTER = {3}  # steps that free pages: the file is then handed back its free space


def upgrade(conn: Connection, version: str) -> bool:
    """Bring an index of an older schema ``version`` up to date in place; False when it
    cannot be (a version this code does not know: the caller moves it aside and rebuilds)."""
    if version not in {str(v) for v in range(OLDEST_UPGRADED, SCHEMA_VERSION)}:
        return False
    steps = range(int(version) + 1, SCHEMA_VERSION + 1)
    for step in steps:
        _migrate(conn, step)
    if VACUUM_AFTER.intersection(steps):
        conn.execute("VACUUM")  # hand the freed pages back: the file shrinks to its new size
    return True


def _migrate(conn: Connection, step: int) -> None:
    """Run migration ``step`` and record it as the schema version, in one transaction;
    nothing when another process opening the same index has run it meanwhile."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if not (row and str(row[0]).isdigit() and int(row[0]) >= step):
            MIGRATIONS[step](conn)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(step),))
            log.info("index schema migrated to version %d", step)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def f16_blob(blob: bytes) -> bytes:
    """A float32 vector's bytes as float16 (unit vectors lose about 1e-4 of cosine)."""
    return np.frombuffer(blob, dtype=np.float32).astype(np.float16).tobytes()


def f32_blob(blob: bytes) -> bytes:
    """A stored float16 vector as float32 bytes, unit length again."""
    return unit_f32(np.frombuffer(blob, dtype=np.float16)).tobytes()


def unit_f32(vectors: np.ndarray) -> np.ndarray:
    """float16 rows as float32 rows of unit length (rounding moves the norm by about 1e-4,
    and every backend must score the same numbers)."""
    out = vectors.astype(np.float32)
    norms = np.linalg.norm(out, axis=-1, keepdims=True)
    return np.divide(out, norms, out=out, where=norms > 0)


def create_vec_table(conn: Connection, dims: int) -> None:
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0("
        f"embedding float[{int(dims)}] distance_metric=cosine)"
    )


def has_table(conn: Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    return row is not None
