"""Line vectors on the team index (real PostgreSQL + pgvector): a search scores and points at
lines as the SQLite index does, a namespace's clients embed each chunk's lines once, and an
edit keeps the lines of the chunks it did not change."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import psycopg
import pytest
from conftest import write
from http_stub import StubServer
from line_notes import ANSWER, NOTE, QUESTION, long_note
from model_util import ensure_test_model
from pg_util import schema_1, schema_1_as, scratch_database, shared_url, unique, with_database
from team_util import rows, team

from memory_ls.engine import MemoryEngine
from memory_ls.index.line_vectors import ChunkLines
from memory_ls.index.postgres import store as pg_store
from memory_ls.index.postgres.migrations import SCHEMA_VERSION
from memory_ls.index.rows import to_blob
from memory_ls.settings import Settings

ORPHANS = (
    "SELECT count(*) FROM memory_chunk_lines l LEFT JOIN memory_chunks c ON c.id = l.chunk_id "
    "WHERE c.id IS NULL"
)


@pytest.fixture(scope="module")
def pg_url() -> str:
    return shared_url()


def embedded(stub: StubServer) -> list[str]:
    return [t for r in stub.requests for t in (r.body or {}).get("input", [])]


@pytest.mark.model
def test_a_team_search_scores_and_points_at_lines_as_sqlite_does(pg_url, tmp_path: Path):
    root = tmp_path / "ws"
    write(root, "memory/2026-03-01-session-4.md", NOTE)
    write(root, "memory/2026-03-02-plans.md", "# Plans\n\nBook the dentist for Tuesday.\n")
    local = Settings(provider="local")
    local.local.model_path = str(ensure_test_model())
    pg = team(pg_url, unique("lines"))
    pg.provider, pg.local = "local", local.local
    with MemoryEngine(root, local, index_path=tmp_path / "i.sqlite") as e:
        e.sync()
        want = e.search(QUESTION, min_score=0).results
    with MemoryEngine(root, pg) as e:
        e.sync()
        assert e.status()["pendingLineVectors"] == 0
        got = e.search(QUESTION, min_score=0).results
    assert [h.path for h in got] == [h.path for h in want]
    answer_line = NOTE.split("\n").index(ANSWER) + 1
    assert got[0].best_line == want[0].best_line == answer_line
    for g, w in zip(got, want, strict=True):  # halfvec against float32, int8 lines alike
        assert g.vector_score == pytest.approx(w.vector_score, abs=3e-3)
        assert g.score == pytest.approx(w.score, abs=3e-3)


def test_a_namespace_embeds_each_chunks_lines_once_and_edits_keep_them(pg_url, tmp_path: Path):
    ns = unique("lines")
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        write(root, "memory/diary.md", long_note())
    texts = "SELECT text FROM memory_chunks WHERE ns = %s"
    with StubServer(api_key=None, dims=16) as stub, MemoryEngine(a, team(pg_url, ns, stub)) as ea:
        ea.sync()
        n = rows(pg_url, "SELECT count(*) FROM memory_chunks WHERE ns = %s", ns)[0][0]
        assert n >= 3
        with_lines = "SELECT count(*) FROM memory_chunk_lines WHERE ns = %s AND rows <> ''"
        assert rows(pg_url, with_lines, ns) == [(n,)]
        assert len(embedded(stub)) > 60  # the chunks, then their 60 lines
        stub.requests.clear()
        with MemoryEngine(b, team(pg_url, ns, stub)) as eb:
            eb.sync()
            assert embedded(stub) == []  # the same notes: paid for by the other client
        before = {t for (t,) in rows(pg_url, texts, ns)}
        write(a, "memory/diary.md", long_note() + "Entry 60: the quetzal left.\n")
        ea.sync()
        after = [t for (t,) in rows(pg_url, texts, ns)]
        changed = [t for t in after if t not in before]
        assert changed and len(changed) < len(after)
        # Embedded: the changed chunks and their lines, nothing of the chunks left alone.
        assert embedded(stub) and all(any(t in c for c in changed) for t in embedded(stub))
        assert rows(pg_url, with_lines, ns) == [(len(after),)]
        assert ea.status()["pendingLineVectors"] == 0
    assert rows(pg_url, ORPHANS) == [(0,)]


def test_a_client_past_its_max_chunks_neither_drops_nor_uses_the_teams_lines(
    pg_url, tmp_path: Path
):
    """Clients share the line vectors, each with its own query.lines.maxChunks: one whose limit
    the namespace exceeds leaves them for the others (dropping them would make the others pay
    again) and scores every chunk by its own vector."""
    ns = unique("lines")
    write(tmp_path / "ws", "memory/diary.md", long_note())
    count = "SELECT count(*) FROM memory_chunk_lines WHERE ns = %s AND rows <> ''"
    query = "the harbour for 41 minutes"
    with StubServer(api_key=None, dims=16) as stub:
        s = team(pg_url, ns, stub)
        with MemoryEngine(tmp_path / "ws", s) as e:
            e.sync()
            have = rows(pg_url, count, ns)
            assert have[0][0] >= 3
            with_lines = e.search(query, min_score=0).results
        s.query.lines.max_chunks = 1
        with MemoryEngine(tmp_path / "ws", s) as e:
            e.sync()
            e.embed_pending()
            assert e.status()["pendingLineVectors"] == 0  # none it would embed
            small = e.search(query, min_score=0).results
        s.query.lines.max_chunks = 0
        with MemoryEngine(tmp_path / "ws", s) as e:
            off = e.search(query, min_score=0).results
    assert rows(pg_url, count, ns) == have
    assert [h.vector_score for h in small] == [h.vector_score for h in off]
    assert [h.vector_score for h in small] != [h.vector_score for h in with_lines]


def test_writes_skip_chunks_another_client_is_deleting(pg_url, tmp_path: Path):
    """A vector or line written for a chunk whose delete another client has not committed yet
    is skipped at once: waiting on it would fail the foreign key check when the delete
    commits, or deadlock with a delete of several chunks."""
    ns = unique("lines")
    write(tmp_path / "ws", "memory/diary.md", long_note())
    with (
        StubServer(api_key=None, dims=16) as stub,
        MemoryEngine(tmp_path / "ws", team(pg_url, ns, stub)) as e,
    ):
        e.sync()
        chunks = rows(pg_url, "SELECT id, hash FROM memory_chunks WHERE ns = %s ORDER BY id", ns)
        two = [cid for cid, _ in chunks[:2]]
        rows(pg_url, "DELETE FROM memory_chunk_lines WHERE chunk_id = ANY(%s)", two)
        rows(pg_url, "DELETE FROM memory_vectors WHERE chunk_id = ANY(%s)", two)
        db = e.route.team.db
        assert db is not None
        with psycopg.connect(pg_url) as other:  # a transaction left open
            for cid in reversed(two):
                other.execute("DELETE FROM memory_chunks WHERE id = %s", (cid,))
            lines = ChunkLines(np.array([0, 1]), np.eye(2, 16, dtype=np.float32))
            with e.route.team.lock:
                store = pg_store.writer(db)
                with store.transaction():
                    store.q("SET LOCAL lock_timeout = '2s'")  # a wait fails the test
                    store.lines.put(chunks[:2], {cid: lines for cid in two})
                    blob = to_blob(np.full(16, 0.25, dtype=np.float32))
                    store.set_embeddings([(cid, blob) for cid in two], db.model_key)
            other.commit()
        assert rows(pg_url, "SELECT count(*) FROM memory_chunks WHERE id = ANY(%s)", two) == [(0,)]
        assert e.search("harbour", min_score=0).results  # the client still answers
    assert rows(pg_url, ORPHANS) == [(0,)]


V1_TABLES = (
    "memory_meta, memory_files, memory_chunks, memory_vectors, memory_embed_claims, "
    "memory_embedding_cache"
)


def test_roles_per_namespace_keep_working_after_the_upgrade(pg_url, tmp_path: Path):
    """docs/guides/team.md: one role per namespace with row-level security, set up on the
    schema before line vectors. The owner's upgrade gives the new table the grants and
    policies of its sibling: each role keeps syncing and searching, with line vectors, and
    never sees the other's rows."""
    from memory_ls.index.postgres import PgDatabase

    # The first name needs quoting: the copied grants must not quote it twice.
    roles, pw = [unique("Team-A"), unique("team")], "team-pw-7788"
    for r in roles:
        rows(pg_url, f"CREATE ROLE \"{r}\" LOGIN PASSWORD '{pw}'")
    try:
        with scratch_database(pg_url) as db_url:
            with psycopg.connect(db_url, autocommit=True) as conn, conn.transaction():
                schema_1(conn, "halfvec")
                for r in roles:  # the guide's block as it was for schema 1
                    role = f'"{r}"'
                    conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {V1_TABLES} TO {role}")
                    conn.execute(f"GRANT SELECT ON memory_ls_migrations TO {role}")
                    conn.execute(f"GRANT USAGE ON SEQUENCE memory_chunks_id_seq TO {role}")
                for t in V1_TABLES.split(", "):
                    if t == "memory_embed_claims":
                        continue
                    conn.execute(f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY")
                    conn.execute(
                        f"CREATE POLICY own_namespace ON {t} USING (ns = current_user) "
                        "WITH CHECK (ns = current_user)"
                    )
                conn.execute("ALTER TABLE memory_embed_claims ENABLE ROW LEVEL SECURITY")
                conn.execute(
                    "CREATE POLICY own_namespace ON memory_embed_claims USING "
                    "(EXISTS (SELECT 1 FROM memory_chunks c WHERE c.id = chunk_id))"
                )
            PgDatabase(db_url, "owner", "test").close()  # the owner runs the new version once
            urls = {r: with_database(db_url, db_url.rsplit("/", 1)[1], r, pw) for r in roles}
            with StubServer(api_key=None, dims=16) as stub:
                for r in roles:
                    write(tmp_path / r, "memory/diary.md", long_note())
                    with MemoryEngine(tmp_path / r, team(urls[r], r, stub)) as e:
                        e.sync()
                        resp = e.search("the harbour for 41 minutes", min_score=0)
                        assert resp.results and resp.fallback_reason is None
                        assert e.status()["pendingLineVectors"] == 0
            mine = "SELECT ns, count(*) FROM memory_chunk_lines GROUP BY ns"
            n = rows(db_url, "SELECT count(*) FROM memory_chunk_lines WHERE ns = %s", roles[0])
            assert n[0][0] >= 3
            assert rows(urls[roles[0]], mine) == [(roles[0], n[0][0])]
            assert [ns for ns, _ in rows(urls[roles[1]], mine)] == [roles[1]]
            # Version 3's texts got memory_files' grants and policies the same way.
            texts = "SELECT DISTINCT ns FROM memory_file_texts"
            assert [rows(urls[r], texts) for r in roles] == [[(r,)] for r in roles]
            assert len(rows(db_url, texts)) == 2
    finally:
        for r in roles:
            rows(pg_url, f'DROP ROLE IF EXISTS "{r}"')


def test_an_upgrade_run_by_a_superuser_keeps_the_owner_and_forced_row_security(pg_url):
    """The new table gets its sibling's owner (else the owner's own clients lose access to it
    when a superuser ran the upgrade) and, when the sibling forces row security on its owner,
    the same."""
    from memory_ls.index.postgres import PgDatabase

    owner = unique("owner")
    rows(pg_url, f"CREATE ROLE \"{owner}\" LOGIN PASSWORD 'owner-pw-1'")
    try:
        with scratch_database(pg_url) as db_url:
            with schema_1_as(db_url, owner) as conn:
                conn.execute("ALTER TABLE memory_vectors ENABLE ROW LEVEL SECURITY")
                conn.execute("ALTER TABLE memory_vectors FORCE ROW LEVEL SECURITY")
                conn.execute("CREATE POLICY own ON memory_vectors USING (ns = current_user)")
            PgDatabase(db_url, "superuser", "test").close()  # the upgrade, as a superuser
            state = "SELECT relowner::regrole::text, relrowsecurity, relforcerowsecurity FROM "
            state += "pg_class WHERE relname = %s"
            assert rows(db_url, state, "memory_chunk_lines") == [(owner, True, True)]
            assert rows(db_url, state, "memory_vectors") == [(owner, True, True)]
            # The owner's own client reads the new table (as the policy lets it).
            owner_url = with_database(db_url, db_url.rsplit("/", 1)[1], owner, "owner-pw-1")
            assert rows(owner_url, "SELECT count(*) FROM memory_chunk_lines") == [(0,)]
    finally:
        rows(pg_url, f'DROP ROLE IF EXISTS "{owner}"')


def test_an_upgrade_that_may_not_hand_the_table_over_grants_the_owner_all(pg_url, caplog):
    """The runner owns the schema's first tables but not ``memory_vectors`` (given to another
    role since) and is no member of that role, so it may not make it the new table's owner:
    the upgrade still completes, keeps the table, and grants that role everything on it."""
    from memory_ls.index.postgres import PgDatabase

    runner, owner = unique("runner"), unique("owner")
    for r in (runner, owner):
        rows(pg_url, f"CREATE ROLE \"{r}\" LOGIN PASSWORD 'pw-{r}'")
    try:
        with scratch_database(pg_url) as db_url:
            name = db_url.rsplit("/", 1)[1]
            with schema_1_as(db_url, runner):  # the runner's schema, nothing beside it
                pass
            rows(db_url, f'ALTER TABLE memory_vectors OWNER TO "{owner}"')
            with caplog.at_level(logging.WARNING):
                PgDatabase(
                    with_database(db_url, name, runner, f"pw-{runner}"), "ns", "test"
                ).close()
            # The server's warning reaches the log (psycopg drops notices unless asked).
            said = [
                r.message
                for r in caplog.records
                if "memory_chunk_lines stays owned by" in r.message
            ]
            assert len(said) == 1 and runner in said[0]
            state = "SELECT relowner::regrole::text FROM pg_class WHERE relname = %s"
            assert rows(db_url, state, "memory_chunk_lines") == [(runner,)]
            may = "SELECT has_table_privilege(%s, 'memory_chunk_lines', %s)"
            for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE"):
                assert rows(db_url, may, owner, privilege) == [(True,)]
            owner_url = with_database(db_url, name, owner, f"pw-{owner}")
            assert rows(owner_url, "SELECT count(*) FROM memory_chunk_lines") == [(0,)]
            latest = "SELECT max(version) FROM memory_ls_migrations"
            assert rows(db_url, latest) == [(SCHEMA_VERSION,)]
    finally:
        for r in (runner, owner):
            rows(pg_url, f'DROP ROLE IF EXISTS "{r}"')
