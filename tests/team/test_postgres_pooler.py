"""The team index through PgBouncer in transaction mode: Debian 12's 1.18 and a current 1.24
(tests/support/pgbouncer_build.sh; .ci/run installs the one and builds the other).

A transaction pooler hands each transaction whichever server connection is free: a client that
prepares statements or sets session options breaks there, and a pooler that has lost its server
holds statements for minutes. With ``store.postgres.pooler = "transaction"`` memory-ls answers
through one exactly as it does directly, and keeps a search's budget on its own side.
"""

from __future__ import annotations

import time

import psycopg
import pytest
from http_stub import StubServer
from pg_util import (
    BOUNCERS,
    PgServer,
    bouncer,
    bouncer_binary,
    require_server_binaries,
    shared_url,
    unique,
)
from team_util import (
    NOTES,
    by_primary,
    paths,
    rows,
    searched_during_rebuilds,
    team,
    write_notes,
)

from memory_ls.engine import MemoryEngine
from memory_ls.index.postgres import PgDatabase, PrimaryUnavailable


@pytest.fixture(scope="module", params=BOUNCERS)
def pooled(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(the server's URL, a transaction pooler's URL in front of it), for each PgBouncer."""
    url = shared_url()
    with bouncer(url, bouncer_binary(request.param)) as pooled_url:
        yield url, pooled_url


def pooler(url: str, namespace: str, stub: StubServer | None = None, **pg: object):
    return team(url, namespace, stub, pooler="transaction", **pg)


def test_through_the_pooler_as_through_the_server(pooled, tmp_path):
    """Two clients and a direct one: the same answers, every one from the team index, past
    psycopg's prepare threshold, with vectors, deletions and forced rebuilds."""
    direct_url, url = pooled
    ns = unique("pooled")
    extra = {"memory/agent.md": "# Build box\n\nccache halves build times.\n"}
    a = write_notes(tmp_path / "a", {**NOTES, **extra})
    b = write_notes(tmp_path / "b", NOTES)
    with (
        StubServer(api_key=None, dims=16) as stub,
        MemoryEngine(a, pooler(url, ns, stub)) as ea,
        MemoryEngine(b, pooler(url, ns, stub)) as eb,
        MemoryEngine(b, team(direct_url, ns, stub), index_path=tmp_path / "d.sqlite") as ed,
    ):
        ea.sync()
        embedded = stub.count("/embeddings")
        assert embedded > 0
        eb.sync()
        assert stub.count("/embeddings") == embedded  # the server's cache, through the pooler
        for q in ("token bucket rate limiting", "ccache build times", "café station"):
            want = ed.search(q, min_score=0)
            assert by_primary(want) and want.mode == "hybrid"
            for _ in range(8):  # psycopg would prepare from the sixth run on
                for eng in (ea, eb):
                    got = eng.search(q, min_score=0)
                    assert by_primary(got), got.fallback_reason
                    assert paths(got) == paths(want)
                    assert [h.score for h in got.results] == pytest.approx(
                        [h.score for h in want.results], abs=1e-6
                    )
        (a / "memory/agent.md").unlink()
        ea.sync()
        assert "memory/agent.md" not in paths(eb.search("ccache build times", min_score=0))

        answers = searched_during_rebuilds(eb, "token bucket", (ea, eb))
        assert answers and all(by_primary(r) and r.results for r in answers)
        for eng in (ea, eb):
            st = eng.status()["store"]
            assert st["answering"] == "postgres" and st["problem"] is None
            assert st["pooler"] == "transaction"
    (n,) = rows(direct_url, "SELECT count(DISTINCT path) FROM memory_files WHERE ns = %s", ns)[0]
    assert n == len(NOTES)


def test_without_the_setting_status_says_what_to_set(pooled, tmp_path):
    _, url = pooled
    root = write_notes(tmp_path / "ws", NOTES)
    with MemoryEngine(root, team(url, unique("unset"))) as eng:
        eng.sync()
        resp = eng.search("token bucket")
        assert paths(resp)[:1] == ["memory/2026-01-10-api.md"]
        assert "team index unavailable" in resp.fallback_reason
        problem = eng.status()["store"]["problem"]
    assert 'store.postgres.pooler = "transaction"' in problem or "pooler = transaction" in problem


def test_a_statement_past_the_budget_is_cancelled(pooled):
    """No statement_timeout travels through a pooler: the client cancels, and the pool
    goes on with a working connection."""
    _, url = pooled
    db = PgDatabase(url, unique("budget"), "test", timeout_ms=400, pooler="transaction")
    try:
        t0 = time.monotonic()
        with pytest.raises(PrimaryUnavailable, match="too slow"), db.connection() as conn:
            conn.execute("SELECT pg_sleep(20)")
        assert time.monotonic() - t0 < 10
        db.ping()
    finally:
        db.close()


def test_a_statement_the_pooler_holds_is_cut_off(pooled):
    """Every server connection busy (as when the pooler cannot reach its server): the
    statement waits in the pooler, so the client gives up on the socket itself."""
    direct_url, url = pooled
    db = PgDatabase(url, unique("held"), "test", timeout_ms=400, pooler="transaction")
    holders = [psycopg.connect(url, prepare_threshold=None) for _ in range(3)]
    try:
        for h in holders:  # each holds one of the pooler's 3 server connections
            h.execute("SELECT 1")
        t0 = time.monotonic()
        with pytest.raises(PrimaryUnavailable, match="too slow"), db.connection() as conn:
            conn.execute("SELECT 1")
        assert time.monotonic() - t0 < 10
    finally:
        for h in holders:
            h.close()
    db.ping()  # the cut connection was dropped, a new one answers
    db.close()
    assert rows(direct_url, "SELECT 1") == [(1,)]


@pytest.mark.parametrize("which", BOUNCERS)
def test_server_gone_behind_the_pooler(tmp_path, which):
    """The pooler stays up, its server stops: searches answer from the local index within
    the budget (not after the pooler's 60 s), and the primary is caught up once it is back."""
    require_server_binaries()
    binary = bouncer_binary(which)
    server = PgServer()
    try:
        direct_url = server.up()
        with bouncer(direct_url, binary) as url:
            root = write_notes(tmp_path / "ws", NOTES)
            s = pooler(url, unique("gone"), retry_after_s=0.3, timeout_ms=1000)
            with MemoryEngine(root, s) as eng:
                eng.sync()
                assert by_primary(eng.search("token bucket"))
                server.down()
                write_notes(root, {"memory/outage.md": "# Outage\n\nThe primary was down.\n"})
                t0 = time.monotonic()
                eng.sync()
                resp = eng.search("primary down")
                assert time.monotonic() - t0 < 20
                assert paths(resp) == ["memory/outage.md"]
                assert "team index unavailable" in resp.fallback_reason
                assert eng.status()["store"]["answering"] == "sqlite"
                server.up()
                deadline = time.monotonic() + 30  # the pooler's own retry of its server
                while not by_primary(resp := eng.search("primary down")):
                    assert time.monotonic() < deadline, resp.fallback_reason
                    time.sleep(0.5)
                assert paths(resp) == ["memory/outage.md"]
            files = {r[0] for r in rows(direct_url, "SELECT path FROM memory_files")}
            assert "memory/outage.md" in files
    finally:
        server.remove()
