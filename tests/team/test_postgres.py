"""The team index on a real PostgreSQL + pgvector (tests/support/pg_util.py starts or finds one).

Engines on one namespace share chunks, deletions and paid-for vectors; namespaces never see
each other; a primary stopped mid-session is replaced by the local index and caught up when it
is back; bad URLs, credentials, a missing extension and a newer schema are named in status
without the password.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest
from http_stub import StubServer
from pg_util import (
    PgServer,
    require_server_binaries,
    schema_1,
    scratch_database,
    shared_url,
    unique,
)
from team_util import NOTES, by_primary, paths, rows, searched_during_rebuilds, team, write_notes

from memory_ls.engine import MemoryEngine
from memory_ls.index.postgres import PgDatabase, redact
from memory_ls.index.postgres import store as pg_store
from memory_ls.index.postgres.errors import describe, scrub
from memory_ls.index.postgres.migrations import vector_type_for
from memory_ls.index.postgres.sizing import SearchMemory
from memory_ls.index.postgres.tokens import index_text
from memory_ls.index.term_counts import parse_match
from memory_ls.search.query import match_expression, query_terms
from memory_ls.settings import Settings


@pytest.fixture(scope="session")
def pg_url() -> str:
    return shared_url()


# -- pure parts ---------------------------------------------------------------------------------


def test_password_never_shown():
    url = "postgresql://memory:s3cr3t-pw@db.internal:5433/memory?sslmode=require"
    assert redact(url) == "postgresql://memory:***@db.internal:5433/memory?sslmode=require"
    assert "s3cr3t-pw" not in scrub(f"failed for {url}: s3cr3t-pw rejected", url)
    assert redact("host=db password='a b' user=x") == "host=db password=*** user=x"
    # libpq takes it as a query parameter too
    query = "postgresql://memory@db.internal/memory?sslmode=require&password=s3cr3t-pw"
    assert redact(query) == "postgresql://memory@db.internal/memory?sslmode=require&password=***"
    assert "s3cr3t-pw" not in scrub(f"failed for {query}: s3cr3t-pw rejected", query)
    msg = describe(
        psycopg.OperationalError('password authentication failed for user "memory"'), url
    )
    assert "bad credentials" in msg and "s3cr3t-pw" not in msg and "db.internal" in msg


def test_a_bad_url_and_an_unknown_host_are_named_as_such():
    """A URL libpq cannot parse (each tried for real: refused before any network) and a host
    that does not resolve (psycopg's words; no lookup here) were "unreachable" or "error"."""
    for url in (
        "postgresql://u:s3cr3t-pw@127.0.0.1:notaport/db",
        "postgresql://u:s3cr3t-pw@127.0.0.1/db?sslmode=bogus",
        "mysql://u:s3cr3t-pw@127.0.0.1/db",
    ):
        with pytest.raises(psycopg.Error) as info:
            psycopg.connect(url, connect_timeout=2)
        msg = describe(info.value, url)
        assert ": invalid URL (" in msg and "s3cr3t-pw" not in msg, msg
    url = "postgresql://u:s3cr3t-pw@db.internal/db"
    said = "failed to resolve host 'db.internal': [Errno -2] Name or service not known"
    msg = describe(psycopg.OperationalError(said), url)
    assert ": unknown host (" in msg and "s3cr3t-pw" not in msg, msg


def test_what_a_transaction_pooler_says_names_the_setting():
    url = "postgresql://memory:s3cr3t-pw@pooler.internal:6543/memory"
    for text in (
        "connection failed: FATAL:  unsupported startup parameter: options",
        'prepared statement "_pg3_0" does not exist',
        'prepared statement "_pg3_2" already exists',
    ):
        msg = describe(psycopg.OperationalError(text), url)
        assert "store.postgres.pooler = transaction" in msg and "s3cr3t-pw" not in msg
    assert "store.postgres" not in describe(psycopg.OperationalError("connection refused"), url)


def test_pgvector_versions():
    with pytest.raises(Exception, match="0.4.4 is too old"):
        vector_type_for("0.4.4")
    assert vector_type_for("0.5.1") == "vector"
    assert vector_type_for("0.6.2") == "vector"
    assert vector_type_for("0.7.0") == "halfvec"
    assert vector_type_for("0.8.6") == "halfvec"


def test_tokens_follow_fts5():
    # FTS5 unicode61 splits fly.io and foo-bar, folds case and Latin diacritics; CJK as grams.
    assert index_text("Fly.io foo-bar Café ÉTÉ") == ("fly io foo bar cafe ete", 6)
    assert index_text("令牌桶限流")[0] == "令牌 牌桶 桶限 限流 流"
    expr = match_expression(query_terms('限 "quoted" fly.io'))
    assert parse_match(expr) == [("限", True), ("quoted", False), ("fly", False), ("io", False)]


# -- one engine ------------------------------------------------------------------------------------


def test_keyword_ranking_matches_sqlite(pg_url, tmp_path):
    """The same folder through both backends: the same hits, in the same order, with the
    same normalised keyword scores (BM25 over the same tokens)."""
    root = write_notes(tmp_path / "ws", NOTES)
    for i in range(30):  # enough chunks for IDF to mean something
        write_notes(
            root, {f"memory/filler-{i}.md": f"# Log {i}\n\nRoutine note {i} about builds.\n"}
        )
    local = Settings(provider="none")
    with (
        MemoryEngine(root, local, index_path=tmp_path / "a.sqlite") as lite,
        MemoryEngine(root, team(pg_url, unique("rank")), index_path=tmp_path / "b.sqlite") as pg,
    ):
        lite.sync()
        pg.sync()
        assert pg.status()["store"]["answering"] == "postgres"
        for q in ["rate limiting redis", "限流", "令牌桶", "cafe", "fly.io deploys", "429 header"]:
            a, b = lite.search(q, min_score=0), pg.search(q, min_score=0)
            assert by_primary(b)
            assert paths(a) == paths(b), q
            for x, y in zip(a.results, b.results, strict=True):
                assert x.text_score == pytest.approx(y.text_score, abs=0.02), q


def test_hybrid_on_pgvector(pg_url, tmp_path):
    root = write_notes(tmp_path / "ws", NOTES)
    with (
        StubServer(api_key=None, dims=16) as stub,
        MemoryEngine(root, team(pg_url, unique("hyb"), stub)) as eng,
    ):
        report = eng.sync()
        assert report.embedded == 4
        resp = eng.search("token bucket rate limiting")
        assert resp.mode == "hybrid" and resp.fallback_reason is None
        assert resp.results[0].path == "memory/2026-01-10-api.md"
        assert resp.results[0].vector_score is not None
        st = eng.status()
        assert st["vectorBackend"] == "pgvector" and st["pendingEmbeddings"] == 0
        assert rows(pg_url, "SELECT 1 FROM pg_indexes WHERE indexname = 'memory_vectors_hnsw_16'")
        # What a search reads against the server's buffer cache, as the server reports it.
        server = st["store"]["server"]
        [(shared,)] = rows(pg_url, "SELECT pg_size_bytes(current_setting('shared_buffers'))")
        assert server["sharedBuffersMB"] == round(shared / 2**20, 1)
        sizes = dict(
            rows(
                pg_url,
                "SELECT indexname, pg_relation_size(indexname::regclass) FROM pg_indexes "
                "WHERE indexname IN ('memory_vectors_hnsw_16', 'memory_chunks_tsv')",
            )
        )
        assert len(sizes) == 2 and "memory_vectors_pkey" not in server["searchIndexesMB"]
        for name, size in sizes.items():
            assert server["searchIndexesMB"][name] == round(size / 2**20, 1)


def test_status_hints_when_the_search_indexes_outgrow_the_buffer_cache():
    fits = SearchMemory(128 * 2**20, {"memory_vectors_hnsw_384": 90 * 2**20, "tsv": 30 * 2**20})
    assert fits.hint() is None and fits.to_json()["hint"] is None
    short = SearchMemory(128 * 2**20, {"memory_vectors_hnsw_384": 127 * 2**20, "tsv": 55 * 2**20})
    hint = short.hint()
    assert hint is not None and "182 MB" in hint and "128 MB" in hint and "shared_buffers" in hint
    assert short.to_json()["searchIndexesMB"] == {"memory_vectors_hnsw_384": 127.0, "tsv": 55.0}


def test_a_backfill_leaves_the_planner_the_tables_size(pg_url, tmp_path):
    """After a vector phase that grew memory_vectors, the table is analyzed: with an empty
    table's statistics the planner answers a vector search with an exact scan of the
    namespace (64 ms at 100k chunks) instead of the HNSW graph, until autovacuum comes."""
    notes = {f"memory/n{i}.md": f"# Note {i}\n\nFact {i} about the fleet.\n" for i in range(150)}
    root = write_notes(tmp_path / "ws", notes)
    with scratch_database(pg_url) as db_url:
        with (
            StubServer(api_key=None, dims=16) as stub,
            MemoryEngine(root, team(db_url, unique("stats"), stub)) as eng,
        ):
            eng.sync()
        stats = (
            "SELECT count(*) FROM pg_stats WHERE tablename = 'memory_vectors' AND attname = 'ns'"
        )
        assert rows(db_url, stats) == [(1,)]


def test_vector_search_is_never_prepared(pg_url, tmp_path):
    """psycopg prepares a statement after five runs; PostgreSQL's generic plan of the vector
    search reads the namespace's every vector and sorts them (3.5x slower at 11k chunks).
    Other statements are still prepared."""
    from memory_ls.index.postgres import vectors

    root = write_notes(tmp_path / "ws", NOTES)
    ns = unique("prep")
    with (
        StubServer(api_key=None, dims=16) as stub,
        MemoryEngine(root, team(pg_url, ns, stub)) as eng,
    ):
        eng.sync()
    (model,) = rows(pg_url, "SELECT DISTINCT model FROM memory_vectors WHERE ns = %s", ns)[0]
    db = PgDatabase(pg_url, ns, "test", pool_size=1)
    db.model_key = model
    try:
        with pg_store.reader(db) as store:
            query = store.all_embeddings()[1][0]
            for _ in range(8):
                assert vectors.knn(store, query, 3)
                store.q("SELECT count(*) FROM memory_chunks WHERE ns = %s", (ns,))
            prepared = [r[0] for r in store.q("SELECT statement FROM pg_prepared_statements")]
        assert any("memory_chunks" in p for p in prepared)
        assert not any("memory_vectors" in p for p in prepared)
    finally:
        db.close()


def test_vector_column_before_pgvector_0_7(pg_url, tmp_path):
    """A schema made where pgvector was older than 0.7 stores `vector`, not `halfvec`: the
    same engine works on it (HNSW on vector_cosine_ops). That schema is version 1, written by
    a memory-ls before line vectors: it is migrated in place and gets them."""
    from memory_ls.index.postgres.migrations import SCHEMA_VERSION

    root = write_notes(tmp_path / "ws", NOTES)
    with scratch_database(pg_url) as db_url:
        with psycopg.connect(db_url, autocommit=True) as conn, conn.transaction():
            schema_1(conn, "vector")
        with (
            StubServer(api_key=None, dims=16) as stub,
            MemoryEngine(root, team(db_url, unique("old"), stub)) as eng,
        ):
            eng.sync()
            assert eng.status()["store"]["vectorType"] == "vector"
            resp = eng.search("token bucket rate limiting")
            assert resp.mode == "hybrid" and by_primary(resp)
            assert resp.results[0].path == "memory/2026-01-10-api.md"
            assert eng.status()["pendingLineVectors"] == 0
        assert rows(db_url, "SELECT max(version) FROM memory_ls_migrations") == [(SCHEMA_VERSION,)]
        # MEMORY.md's and the API note's (the others have one line of 12 characters or more)
        assert rows(db_url, "SELECT count(*) FROM memory_chunk_lines WHERE rows <> ''") == [(2,)]
        assert (
            rows(
                db_url,
                "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                "memory_vectors_hnsw_16",
            )[0][0].count("vector_cosine_ops")
            == 1
        )


# -- many engines ----------------------------------------------------------------------------------


def test_two_engines_one_namespace(pg_url, tmp_path):
    ns = unique("team")
    a = write_notes(
        tmp_path / "a", {**NOTES, "memory/agent.md": "# Build box\n\nccache halves build times.\n"}
    )
    b = write_notes(tmp_path / "b", NOTES)
    with (
        StubServer(api_key=None, dims=16) as stub,
        MemoryEngine(a, team(pg_url, ns, stub)) as ea,
        MemoryEngine(b, team(pg_url, ns, stub)) as eb,
    ):
        ea.sync()
        first = stub.count("/embeddings")
        assert first > 0
        eb.sync()  # the same notes: nothing to embed again
        assert stub.count("/embeddings") == first
        hits = eb.search("ccache build times")
        assert hits.results[0].path == "memory/agent.md"  # written by the other machine
        dupes = rows(
            pg_url,
            "SELECT path, start_line, count(*) FROM memory_chunks WHERE ns = %s "
            "GROUP BY 1, 2 HAVING count(*) > 1",
            ns,
        )
        assert dupes == []
        (a / "memory/agent.md").unlink()
        ea.sync()
        assert "memory/agent.md" not in paths(eb.search("ccache build times", min_score=0))
        assert eb.status()["files"] == len(NOTES)


def test_concurrent_writers_embed_each_text_once(pg_url, tmp_path):
    """Three clients sync the same notes at once: every chunk once, every text embedded once
    (each note's two lines too: they get line vectors). Two of them share a folder, as a
    language server and the CLI do: their claims are still their own."""
    ns = unique("fleet")
    notes = {
        f"memory/n{i}.md": f"# Note {i}\n\nFact number {i} about the fleet.\n"
        f"The fleet's rule number {i} holds.\n"
        for i in range(40)
    }
    roots = [write_notes(tmp_path / f"c{i}", notes) for i in range(2)]
    roots.append(roots[1])
    with StubServer(api_key=None, dims=16, latency=0.05) as stub:  # slow enough to overlap
        engines = [
            MemoryEngine(r, team(pg_url, ns, stub), index_path=tmp_path / f"i{i}.sqlite")
            for i, r in enumerate(roots)
        ]
        try:
            errors: list[BaseException] = []

            def run(e: MemoryEngine) -> None:
                try:
                    e.sync()
                except BaseException as exc:  # reported below
                    errors.append(exc)

            threads = [threading.Thread(target=run, args=(e,)) for e in engines]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not errors
            for e in engines:  # whoever was left with pending chunks finishes them
                e.embed_pending()
            texts = [t for r in stub.requests for t in (r.body or {}).get("input", [])]
            assert len(texts) == len(set(texts)) == 40 * 3
        finally:
            for e in engines:
                e.close()
    (n,) = rows(pg_url, "SELECT count(*) FROM memory_chunks WHERE ns = %s", ns)[0]
    assert n == 40
    (v,) = rows(pg_url, "SELECT count(*) FROM memory_vectors WHERE ns = %s", ns)[0]
    assert v == 40


def test_namespaces_never_mix(pg_url, tmp_path):
    a = write_notes(tmp_path / "a", {"memory/secret.md": "# Payroll\n\nSalaries are in vault X.\n"})
    b = write_notes(tmp_path / "b", {"memory/open.md": "# Open\n\nThe salaries page is public.\n"})
    with (
        MemoryEngine(a, team(pg_url, unique("ns-a"))) as ea,
        MemoryEngine(b, team(pg_url, unique("ns-b"))) as eb,
    ):
        ea.sync()
        eb.sync()
        assert paths(eb.search("salaries vault payroll", min_score=0)) == ["memory/open.md"]
        assert paths(ea.search("salaries vault payroll", min_score=0)) == ["memory/secret.md"]
        assert eb.status()["chunks"] == 1
        a_ids = [
            r[0]
            for r in rows(
                pg_url, "SELECT id FROM memory_chunks WHERE ns = %s", ea.route.team.namespace
            )
        ]
        # Even asked by id, B's store answers only B's rows.
        with pg_store.reader(eb.route.team.db) as r:
            assert r.chunks_by_ids(a_ids) == {}
            assert "memory/secret.md" not in r.file_infos(["memory/secret.md"])


def test_forced_rebuilds_serialised_readers_answer(pg_url, tmp_path):
    ns = unique("rebuild")
    notes = {f"memory/r{i}.md": f"# R {i}\n\nRebuild topic {i}.\n" for i in range(60)}
    a, b = write_notes(tmp_path / "a", notes), write_notes(tmp_path / "b", notes)
    with MemoryEngine(a, team(pg_url, ns)) as ea, MemoryEngine(b, team(pg_url, ns)) as eb:
        ea.sync()
        answers = searched_during_rebuilds(eb, "rebuild topic", (ea, eb))
        # never an empty answer during the rebuilds
        assert answers and min(len(r.results) for r in answers) > 0
        (n,) = rows(pg_url, "SELECT count(*) FROM memory_chunks WHERE ns = %s", ns)[0]
        assert n == 60


# -- primary -> fallback -------------------------------------------------------------------------


def test_primary_stopped_and_restarted(tmp_path):
    require_server_binaries()
    server = PgServer()
    try:
        url = server.up()
        root = write_notes(tmp_path / "ws", NOTES)
        s = team(url, unique("outage"), retry_after_s=0.3)
        with MemoryEngine(root, s) as eng:
            eng.sync()
            assert by_primary(eng.search("token bucket"))
            server.down()
            write_notes(root, {"memory/outage.md": "# Outage\n\nThe primary was down at noon.\n"})
            (root / "memory/cafe.md").unlink()
            t0 = time.monotonic()
            eng.sync()
            resp = eng.search("primary down noon")
            assert time.monotonic() - t0 < 5
            assert paths(resp) == ["memory/outage.md"] and resp.mode == "keyword"
            assert "team index unavailable" in resp.fallback_reason
            st = eng.status()
            assert st["store"]["answering"] == "sqlite" and "unreachable" in st["store"]["problem"]
            assert url.split(":")[2].split("@")[0] not in str(st)  # the password
            server.up()
            time.sleep(0.4)  # the cooldown
            resp = eng.search("primary down noon")
            assert by_primary(resp) and paths(resp) == ["memory/outage.md"]
            assert eng.status()["store"]["answering"] == "postgres"
            files = {r[0] for r in rows(url, "SELECT path FROM memory_files")}
            assert "memory/outage.md" in files and "memory/cafe.md" not in files
    finally:
        server.remove()


# -- bad input ------------------------------------------------------------------------------------


def _fallback_answers(root: Path, s: Settings) -> dict:
    with MemoryEngine(root, s) as eng:
        eng.sync()
        resp = eng.search("token bucket")
        assert paths(resp)[:1] == ["memory/2026-01-10-api.md"]
        assert "team index unavailable" in resp.fallback_reason
        st = eng.status()
    assert st["store"]["answering"] == "sqlite"
    return st


def test_unreachable_and_bad_password(pg_url, tmp_path):
    root = write_notes(tmp_path / "ws", NOTES)
    port = rows(pg_url, "SHOW port")[0][0]
    closed = pg_url.replace(f":{port}/", ":1/")
    st = _fallback_answers(root, team(closed, unique("x")))
    assert "unreachable" in st["store"]["problem"]
    password = psycopg.conninfo.conninfo_to_dict(pg_url)["password"]
    wrong = pg_url.replace(password, "wrong-password-123")
    st = _fallback_answers(root, team(wrong, unique("x")))
    assert "bad credentials" in st["store"]["problem"]
    assert "wrong-password-123" not in str(st) and password not in str(st)


def test_missing_extension(pg_url, tmp_path):
    root = write_notes(tmp_path / "ws", NOTES)
    role, pw = unique("role"), "role-pw-4567"
    rows(pg_url, f"CREATE ROLE {role} LOGIN PASSWORD '{pw}'")
    try:
        with scratch_database(pg_url) as db_url:
            # The role may create tables, not extensions: only pgvector is missing.
            rows(db_url, f"GRANT CREATE ON SCHEMA public TO {role}")
            dbname = db_url.rsplit("/", 1)[1]
            user_url = f"postgresql://{role}:{pw}@{db_url.split('@', 1)[1]}"
            st = _fallback_answers(root, team(user_url, unique("x")))
            problem = st["store"]["problem"]
            assert "CREATE EXTENSION vector" in problem and dbname in problem
            assert pw not in str(st)
    finally:
        rows(pg_url, f"DROP ROLE IF EXISTS {role}")


def test_newer_schema_is_left_alone(pg_url, tmp_path):
    root = write_notes(tmp_path / "ws", NOTES)
    with scratch_database(pg_url) as db_url:
        PgDatabase(db_url, "x", "test").close()  # a current schema
        # A newer version that says this one can still use the database: it is used.
        rows(
            db_url,
            "INSERT INTO memory_ls_migrations (version, client, readable_from) "
            "VALUES (98, 'future', 2)",
        )
        with MemoryEngine(root, team(db_url, unique("x"))) as eng:
            eng.sync()
            assert by_primary(eng.search("token bucket")) and eng.status()["files"] == len(NOTES)
        rows(db_url, "DELETE FROM memory_files")
        rows(db_url, "DELETE FROM memory_chunks")
        rows(db_url, "INSERT INTO memory_ls_migrations (version, client) VALUES (99, 'future')")
        st = _fallback_answers(root, team(db_url, unique("x")))
        assert "schema version 99" in st["store"]["problem"]
        assert rows(db_url, "SELECT count(*) FROM memory_files") == [(0,)]
        assert rows(db_url, "SELECT count(*) FROM memory_chunks") == [(0,)]


def test_filters_find_matches_that_rank_past_the_candidates(pg_url, tmp_path):
    """As on SQLite (tests/engine/test_engine.py): the few chunks a path or date filter lets through
    are scored, on both sides, where only the candidates were filtered."""
    root = tmp_path / "ws"
    for i in range(250):
        write_notes(root, {f"memory/a/{i:03d}.md": f"# a{i}\n\nredis redis note {i}\n"})
    far = "redis comes up once here, among many other words about the weather and lunch\n"
    write_notes(
        root, {"memory/b/x.md": "# b\n\n" + far, "memory/2026-01-01-old.md": "# old\n\n" + far}
    )
    with (
        StubServer(api_key=None, dims=16) as stub,
        MemoryEngine(root, team(pg_url, unique("scope"), stub)) as eng,
    ):
        eng.sync()
        for mode in ("keyword", "hybrid", "vector"):
            got = eng.search("redis file:memory/b/", mode=mode, min_score=0)
            assert by_primary(got) and got.mode == mode
            assert paths(got) == ["memory/b/x.md"], mode
        assert paths(eng.search("redis before:2026-02-01", min_score=0)) == [
            "memory/2026-01-01-old.md"
        ]
        assert paths(eng.search("redis after:2026-02-01", min_score=0)) == []


def test_front_matter_in_a_team_index(pg_url, tmp_path):
    """As on SQLite (tests/search/test_front_matter.py): the front matter is kept apart from the
    body in the files row, ``tag:`` filters on it (tag names with LIKE's own characters too),
    and an expired note is demoted."""
    root = tmp_path / "ws"
    body = "The billing service rolls out every Tuesday through Argo.\n"
    write_notes(
        root,
        {
            "memory/a.md": "---\ntitle: Zanzibar\ntags: [deploy, on_call]\n---\n" + body,
            "memory/b.md": "---\ntags: [ondcall]\nexpires: 2020-01-01\n---\n" + body,
            "memory/c.md": body,
        },
    )
    ns = unique("front")
    with MemoryEngine(root, team(pg_url, ns)) as eng:
        eng.sync()
        assert paths(eng.search("Zanzibar", mode="keyword")) == []
        assert paths(eng.search("tag:deploy rolls out", mode="keyword")) == ["memory/a.md"]
        assert paths(eng.search("tag:on_call rolls out", mode="keyword")) == ["memory/a.md"]
        hits = eng.search("billing rolls out Tuesday", mode="keyword").results
        assert hits[-1].path == "memory/b.md" and hits[-1].score == hits[0].score * 0.5
        assert {h.start_line for h in hits if h.path != "memory/c.md"} == {5}
    meta = rows(pg_url, "SELECT meta FROM memory_files WHERE ns = %s AND path = 'memory/a.md'", ns)
    assert '"tags":["deploy","on_call"]' in meta[0][0]
