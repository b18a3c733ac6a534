"""The PostgreSQL schema, as numbered migrations applied once under an advisory lock.

Every table carries the namespace (``ns``) in its key, so one database holds many teams'
memories and every statement is scoped (row-level security can be added on ``ns``:
docs/guides/team.md). A database whose schema is newer than this version knows is never written to.
Keyword search uses a text search configuration of the english Snowball stemmer with no stop
words, fed tokens that Python already split, folded and cut into CJK bigrams (``tokens.py``),
so both backends index the same words.

To change the schema, as for the SQLite index (``index/schema.py``): append ``N: _vN`` to
``MIGRATIONS`` (the statements that bring version N-1 to N) and N to ``READABLE_FROM``; never
edit or renumber a migration that shipped. ``migrate`` runs the ones a database lacks, once,
in order, recording each version.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors

from .errors import PrimaryUnavailable

log = logging.getLogger(__name__)

MIGRATION_LOCK = 0x6D656D6F  # pg_advisory_xact_lock key shared by every memory-ls client
TS_CONFIG = "memory_ls_english"
MIN_PGVECTOR = (0, 5)  # HNSW
HALFVEC_PGVECTOR = (0, 7)
ITERATIVE_SCAN_PGVECTOR = (0, 8)


def _v1(vtype: str) -> list[str]:
    return [
        f"CREATE TEXT SEARCH DICTIONARY {TS_CONFIG}_stem (TEMPLATE = snowball, Language = english)",
        f"CREATE TEXT SEARCH CONFIGURATION {TS_CONFIG} (COPY = english)",
        f"ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG} ALTER MAPPING FOR asciiword, asciihword, "
        f"hword_asciipart, word, hword, hword_part WITH {TS_CONFIG}_stem",
        "CREATE TABLE memory_meta (ns text NOT NULL, key text NOT NULL, value text NOT NULL, "
        "PRIMARY KEY (ns, key))",
        """CREATE TABLE memory_files (
            ns text NOT NULL, path text NOT NULL, source text NOT NULL, hash text NOT NULL,
            mtime double precision NOT NULL, size bigint NOT NULL, date text,
            lines integer NOT NULL DEFAULT 0, line_map text, tail text,
            origin text NOT NULL DEFAULT '', updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (ns, path))""",
        """CREATE TABLE memory_chunks (
            id bigserial PRIMARY KEY, ns text NOT NULL, path text NOT NULL,
            source text NOT NULL, start_line integer NOT NULL, end_line integer NOT NULL,
            hash text NOT NULL, text text NOT NULL,
            tsv tsvector NOT NULL, len integer NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now())""",
        # Scoring reads tsv for every matching chunk: kept in the row (compressed if need be),
        # never in TOAST, while the text, read for the few hits only, may go there.
        "ALTER TABLE memory_chunks ALTER COLUMN tsv SET STORAGE MAIN",
        "CREATE INDEX memory_chunks_path ON memory_chunks (ns, path, id)",
        "CREATE INDEX memory_chunks_tsv ON memory_chunks USING gin (tsv)",
        # One row per chunk and embedding model: clients with different models share a
        # namespace, and a model change needs no rebuild (the old model's rows stay usable).
        f"""CREATE TABLE memory_vectors (
            chunk_id bigint NOT NULL REFERENCES memory_chunks(id) ON DELETE CASCADE,
            ns text NOT NULL, model text NOT NULL, dims integer NOT NULL,
            embedding {vtype} NOT NULL, PRIMARY KEY (chunk_id, model))""",
        "CREATE INDEX memory_vectors_ns ON memory_vectors (ns, model)",
        # Chunks a client is embedding now, so two clients never pay for the same text.
        """CREATE TABLE memory_embed_claims (
            chunk_id bigint NOT NULL REFERENCES memory_chunks(id) ON DELETE CASCADE,
            model text NOT NULL, owner text NOT NULL, until timestamptz NOT NULL,
            PRIMARY KEY (chunk_id, model))""",
        """CREATE TABLE memory_embedding_cache (
            ns text NOT NULL, provider text NOT NULL, model text NOT NULL,
            provider_key text NOT NULL, hash text NOT NULL, embedding bytea NOT NULL,
            used_at double precision NOT NULL,
            PRIMARY KEY (ns, provider, model, provider_key, hash))""",
        "CREATE INDEX memory_embedding_cache_lru ON memory_embedding_cache (ns, used_at)",
    ]


def _v2(vtype: str) -> list[str]:
    # Line vectors (index/line_vectors.py's int8 rows), per chunk and model; a row with no
    # lines marks a chunk done that has nothing to embed line by line.
    return [
        """CREATE TABLE memory_chunk_lines (
            chunk_id bigint NOT NULL REFERENCES memory_chunks(id) ON DELETE CASCADE,
            ns text NOT NULL, model text NOT NULL, rows bytea NOT NULL, vectors bytea NOT NULL,
            PRIMARY KEY (chunk_id, model))""",
        "CREATE INDEX memory_chunk_lines_ns ON memory_chunk_lines (ns, model)",
        "ALTER TABLE memory_ls_migrations ADD COLUMN IF NOT EXISTS readable_from integer",
        _SAME_ACCESS_AS.format(new="memory_chunk_lines", like="memory_vectors"),
    ]


def _v3(vtype: str) -> list[str]:
    # The rendered text of each file (files.py), so a client can show a hit whose file is on
    # another machine. In parts: a transcript's append adds a part instead of rewriting a text
    # of megabytes. A part's hash is the file's hash once it was written: text whose last part
    # does not carry memory_files.hash (the file changed through a client of version 2) is
    # never served. The foreign key drops the text with its file, whoever deletes it.
    return [
        """CREATE TABLE memory_file_texts (
            ns text NOT NULL, path text NOT NULL, part integer NOT NULL, hash text NOT NULL,
            body text NOT NULL, pending text NOT NULL DEFAULT '',
            PRIMARY KEY (ns, path, part),
            FOREIGN KEY (ns, path) REFERENCES memory_files (ns, path) ON DELETE CASCADE)""",
        _SAME_ACCESS_AS.format(new="memory_file_texts", like="memory_files"),
    ]


def _v4(vtype: str) -> list[str]:
    # A Markdown file's front matter (sources/frontmatter.py), kept apart from its body, which
    # the chunks then hold alone: files whose first chunk may open with front matter are read
    # again by the next sync. Clients of version 3 ignore the column (and leave it as it is).
    return [
        "ALTER TABLE memory_files ADD COLUMN IF NOT EXISTS meta text",
        "UPDATE memory_files f SET hash = '', mtime = -1 FROM memory_chunks c "
        "WHERE c.ns = f.ns AND c.path = f.path AND c.start_line = 1 AND left(c.text, 3) = '---'",
    ]


# A table added to a deployment whose administrator set up one role per namespace
# (docs/guides/team.md) gets the owner, grants, row-level security and policies of its sibling table
# (a regrole's text is already quoted where the name needs it), so the roles keep working
# after the upgrade and never see each other's rows through it, and an upgrade run by a
# superuser does not leave the owner's own clients without access. A policy that does not fit
# the new table is left out: with row security on and no policy, a role sees nothing (never
# too much).
_SAME_ACCESS_AS = """DO $$
DECLARE g record; p record; o oid;
BEGIN
  FOR g IN SELECT a.grantee, string_agg(a.privilege_type, ', ') AS privs
           FROM pg_class c, aclexplode(c.relacl) a
           WHERE c.oid = '{like}'::regclass AND a.grantee <> c.relowner GROUP BY a.grantee LOOP
    EXECUTE format('GRANT %s ON {new} TO %s', g.privs,
      CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END);
  END LOOP;
  IF (SELECT relforcerowsecurity FROM pg_class WHERE oid = '{like}'::regclass) THEN
    ALTER TABLE {new} FORCE ROW LEVEL SECURITY;  -- the owner too goes through the policies
  END IF;
  IF (SELECT relrowsecurity FROM pg_class WHERE oid = '{like}'::regclass) THEN
    ALTER TABLE {new} ENABLE ROW LEVEL SECURITY;
    FOR p IN SELECT * FROM pg_policies
             WHERE schemaname = current_schema() AND tablename = '{like}' LOOP
      BEGIN
        EXECUTE format('CREATE POLICY %I ON {new} AS %s FOR %s TO %s%s%s', p.policyname,
          p.permissive, p.cmd,
          (SELECT string_agg(CASE WHEN r = 'public' THEN 'PUBLIC' ELSE quote_ident(r) END, ', ')
           FROM unnest(p.roles) r),
          CASE WHEN p.qual IS NULL THEN '' ELSE ' USING (' || p.qual || ')' END,
          CASE WHEN p.with_check IS NULL THEN '' ELSE ' WITH CHECK (' || p.with_check || ')' END);
      EXCEPTION WHEN undefined_column OR undefined_table OR undefined_function THEN
        RAISE WARNING 'memory-ls: policy % of {like} left off {new}: %', p.policyname, SQLERRM;
      END;
    END LOOP;
  END IF;
  -- Last, while the runner still owns the table for the statements above.
  SELECT relowner INTO o FROM pg_class WHERE oid = '{like}'::regclass;
  IF o <> (SELECT relowner FROM pg_class WHERE oid = '{new}'::regclass) THEN
    BEGIN
      EXECUTE format('ALTER TABLE {new} OWNER TO %s', o::regrole::text);
    EXCEPTION WHEN insufficient_privilege THEN
      EXECUTE format('GRANT ALL ON {new} TO %s', o::regrole::text);
      RAISE WARNING 'memory-ls: {new} stays owned by %, not % (granted all to it): %',
        current_user, o::regrole, SQLERRM;
    END;
  END IF;
END $$"""


# Version -> the statements that bring a database of the version before it there. Append-only.
MIGRATIONS = {1: _v1, 2: _v2, 3: _v3, 4: _v4}
SCHEMA_VERSION = max(MIGRATIONS)
# Per version, the oldest schema version a client must know to use such a database: a later
# migration that only adds what older clients can ignore keeps it low, so clients need not all
# be upgraded at once. Clients before version 2 do not read it: they refuse anything newer.
READABLE_FROM = {1: 1, 2: 2, 3: 2, 4: 2}  # version 2 clients ignore the texts and meta


@dataclass(frozen=True)
class Capabilities:
    pgvector: str  # extversion
    vtype: str  # "halfvec" or "vector": the embedding column's type
    iterative_scan: bool  # hnsw.iterative_scan (pgvector 0.8): filtered HNSW returns k rows
    schema: int


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("-")[0].split(".") if p.isdigit())


def vector_type_for(extversion: str) -> str:
    """halfvec (half the size, same recall) from pgvector 0.7 on; refuses before 0.5."""
    v = version_tuple(extversion)
    if v < MIN_PGVECTOR:
        raise PrimaryUnavailable(
            f"pgvector {extversion} is too old: memory-ls needs 0.5 or later (HNSW indexes); "
            "an administrator runs ALTER EXTENSION vector UPDATE"
        )
    return "halfvec" if v >= HALFVEC_PGVECTOR else "vector"


def _extension(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    if row:
        return str(row[0])
    db = conn.info.dbname
    available = conn.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    if not available:
        raise PrimaryUnavailable(
            f"the pgvector extension is not installed on the server of database {db}"
        )
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except (errors.InsufficientPrivilege, errors.FeatureNotSupported) as exc:
        raise PrimaryUnavailable(
            f"the vector extension is missing in database {db} and this role may not create "
            f"it: an administrator runs CREATE EXTENSION vector; there once ({exc.sqlstate})"
        ) from None
    except errors.UniqueViolation:
        pass  # another client created it at the same moment
    return _extension(conn)


def _applied(conn: psycopg.Connection[Any]) -> tuple[int, int] | None:
    """The schema version in the database and the oldest version a client must know to use
    it; None when memory-ls never ran there."""
    exists = conn.execute("SELECT to_regclass('memory_ls_migrations')").fetchone()
    if not exists or exists[0] is None:
        return None
    has_floor = conn.execute(
        "SELECT 1 FROM pg_attribute WHERE attrelid = 'memory_ls_migrations'::regclass "
        "AND attname = 'readable_from' AND NOT attisdropped"
    ).fetchone()
    floor = "coalesce(readable_from, version)" if has_floor else "version"
    row = conn.execute(f"SELECT max(version), max({floor}) FROM memory_ls_migrations").fetchone()
    if not row or row[0] is None:
        return None
    return int(row[0]), int(row[1])


def _too_new(applied: tuple[int, int] | None) -> None:
    if applied is not None and applied[1] > SCHEMA_VERSION:
        raise PrimaryUnavailable(
            f"schema version {applied[0]} was written by a newer memory-ls (this one knows "
            f"{SCHEMA_VERSION}, and it needs {applied[1]}): upgrade memory-ls; nothing was "
            "written"
        )


def _column_type(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute(
        "SELECT t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = to_regclass('memory_vectors') AND a.attname = 'embedding'"
    ).fetchone()
    return str(row[0]) if row else "vector"


def _log_warning(diag: psycopg.errors.Diagnostic) -> None:
    if diag.severity_nonlocalized == "WARNING":
        log.warning("%s", diag.message_primary)


def migrate(conn: psycopg.Connection[Any], client: str) -> Capabilities:
    """Check pgvector and bring the schema up to date; raise PrimaryUnavailable with a clear
    reason when that cannot be done. Up-to-date databases get no DDL at all, so a role with
    row privileges only works once an owner has migrated."""
    extversion = _extension(conn)
    vtype = vector_type_for(extversion)
    applied = _applied(conn)
    _too_new(applied)
    if applied is None or applied[0] < SCHEMA_VERSION:
        # What a migration warns about (a policy left off, a table kept) goes to the log:
        # psycopg drops server notices unless asked.
        conn.add_notice_handler(_log_warning)
        try:
            with conn.transaction():
                # A new table's foreign key locks memory_chunks against writes: waiting behind
                # a long push would hold every other client's writes up behind this one.
                conn.execute("SET LOCAL lock_timeout = '5s'")
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS memory_ls_migrations (version integer PRIMARY "
                    "KEY, applied_at timestamptz NOT NULL DEFAULT now(), client text NOT NULL)"
                )
                applied = _applied(conn)  # another client may have migrated meanwhile
                _too_new(applied)
                for version in range((applied or (0, 0))[0] + 1, SCHEMA_VERSION + 1):
                    for stmt in MIGRATIONS[version](vtype):
                        conn.execute(stmt)
                    conn.execute(
                        "INSERT INTO memory_ls_migrations (version, client) VALUES (%s, %s)",
                        (version, client),
                    )
                    if version >= 2:  # the column came with version 2
                        conn.execute(
                            "UPDATE memory_ls_migrations SET readable_from = %s WHERE version = %s",
                            (READABLE_FROM[version], version),
                        )
                    log.info("PostgreSQL schema migrated to version %d", version)
        except errors.LockNotAvailable:
            raise PrimaryUnavailable(
                f"the schema needs migrating to version {SCHEMA_VERSION} and its tables are "
                "locked (another client's migration or push, a VACUUM or ANALYZE): tried "
                "again later"
            ) from None
        except errors.InsufficientPrivilege as exc:
            raise PrimaryUnavailable(
                f"the schema needs migrating to version {SCHEMA_VERSION} and this role may "
                f"not create tables ({exc.sqlstate}): run memory-ls once as the owner"
            ) from None
        finally:
            conn.remove_notice_handler(_log_warning)
    return Capabilities(
        pgvector=extversion,
        vtype=_column_type(conn),
        iterative_scan=version_tuple(extversion) >= ITERATIVE_SCAN_PGVECTOR,
        schema=SCHEMA_VERSION,
    )
