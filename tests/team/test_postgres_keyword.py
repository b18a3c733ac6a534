"""Keyword search on the team index right after a large push (real PostgreSQL).

New GIN entries wait in the index's pending list until it is merged, and every keyword
statement reads the whole list: a push of many chunks merges it, and a role that may not
(row privileges only) still syncs and answers, leaving the merge to autovacuum.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from conftest import write
from pg_util import scratch_database, shared_url, unique, with_database
from team_util import paths, rows, team

from memory_ls.engine import MemoryEngine
from memory_ls.index.postgres import PgDatabase
from memory_ls.index.postgres import store as pg_store
from memory_ls.index.postgres.keyword import MERGE_AFTER

PENDING = "SELECT gin_clean_pending_list('memory_chunks_tsv'::regclass)"  # pages it merged
TABLES = (
    "memory_meta, memory_files, memory_file_texts, memory_chunks, memory_vectors, "
    "memory_chunk_lines, memory_embed_claims, memory_embedding_cache"
)


@pytest.fixture(scope="session")
def pg_url() -> str:
    return shared_url()


def notes(root: Path, n: int) -> None:
    for i in range(n):
        write(root, f"memory/note-{i:03d}.md", f"# Note {i}\n\nThe ferry timetable, entry {i}.\n")


def quiet_schema(db_url: str) -> None:
    """The schema, with autovacuum kept off the chunks: it would merge the list as well."""
    PgDatabase(db_url, "owner", "test").close()
    rows(db_url, "ALTER TABLE memory_chunks SET (autovacuum_enabled = off)")


def test_a_push_of_many_chunks_leaves_no_pending_list(pg_url, tmp_path: Path):
    """A push of MERGE_AFTER chunks or more merges the list, and every chunk is found; smaller
    pushes leave their entries for autovacuum (each probe below merges what it finds)."""
    with scratch_database(pg_url) as db_url:
        quiet_schema(db_url)
        ws = tmp_path / "ws"
        with MemoryEngine(ws, team(db_url, unique("merge"))) as e:
            notes(ws, MERGE_AFTER - 1)
            e.sync()
            assert rows(db_url, PENDING)[0][0] > 0  # one short of the bar
            notes(ws, 2 * MERGE_AFTER + 20)  # MERGE_AFTER + 21 new notes
            e.sync()
            assert rows(db_url, PENDING) == [(0,)]
            resp = e.search("ferry timetable", mode="keyword", max_results=300, min_score=0)
            assert len(resp.results) == 2 * MERGE_AFTER + 20
            write(ws, "memory/extra.md", "# Extra\n\nThe ferry to the island.\n")
            e.sync()
        assert rows(db_url, PENDING)[0][0] > 0


def test_a_role_that_may_not_merge_still_syncs_and_answers(pg_url, tmp_path: Path, caplog):
    """A namespace role with row privileges only: the merge is refused, said once in the
    log (once per connection), and the push and the search go on through PostgreSQL."""
    role, pw = unique("rows_only"), "rows-only-pw-5"
    rows(pg_url, f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{pw}'")
    try:
        with scratch_database(pg_url) as db_url:
            quiet_schema(db_url)  # the owner creates the schema
            rows(db_url, f'GRANT SELECT, INSERT, UPDATE, DELETE ON {TABLES} TO "{role}"')
            rows(db_url, f'GRANT SELECT ON memory_ls_migrations TO "{role}"')
            rows(db_url, f'GRANT USAGE ON SEQUENCE memory_chunks_id_seq TO "{role}"')
            url = with_database(db_url, db_url.rsplit("/", 1)[1], role, pw)
            notes(tmp_path / "ws", MERGE_AFTER + 20)
            with caplog.at_level(logging.INFO), MemoryEngine(tmp_path / "ws", team(url, role)) as e:
                e.sync()
                notes(tmp_path / "ws", MERGE_AFTER * 2 + 40)
                e.sync()
                resp = e.search("ferry timetable", mode="keyword", min_score=0)
                assert resp.results and e.status()["store"]["answering"] == "postgres"
            said = [r for r in caplog.records if "pending list left to autovacuum" in r.message]
            assert len(said) == 1 and "owner" in said[0].message
            assert rows(db_url, PENDING)[0][0] > 0  # still there for autovacuum
    finally:
        rows(pg_url, f'DROP ROLE IF EXISTS "{role}"')


def frequencies_counting(db, words: list[str]) -> tuple[tuple[list[int], int], list[list[str]]]:
    """``doc_frequencies`` of ``words`` on a reader (their frequencies and the namespace's
    chunks), and the tsqueries it counted."""
    counted: list[list[str]] = []
    with pg_store.reader(db) as store:
        real_q = store.q

        def q(sql, params=None, **kw):
            if "count(*) FROM (SELECT 1" in str(sql):
                counted.append(list(params[2]))
            return real_q(sql, params, **kw)

        store.q = q  # type: ignore[method-assign]
        found = store.doc_frequencies(words)
    return found, counted


def counted_beside_others(db, db_url: str, tmp_path: Path, chunks: int):
    """``frequencies_counting`` of "ferry" and "gannet" again, fresh, after another namespace
    synced ``chunks`` ferry notes and the table was analyzed."""
    other = tmp_path / "other"
    notes(other, chunks)
    with MemoryEngine(other, team(db_url, unique("df"))) as o:
        o.sync()
    rows(db_url, "ANALYZE memory_chunks")
    db.common = None
    db.df.clear()
    return frequencies_counting(db, ["ferry", "gannet"])


def test_a_share_stands_for_a_count_below_the_floor_only_where_it_cannot_be_far_off(
    pg_url, tmp_path: Path, monkeypatch
):
    """From BOUNDED_DF_FROM chunks (below STATS_DF_FROM) a word's share of the table stands
    for its count only while the rows it could wrongly hold, other namespaces' and those
    changed since ANALYZE, are at most MAX_DF_ERROR of the estimate."""
    from memory_ls.index.postgres import keyword

    monkeypatch.setattr(keyword, "STATS_DF_FROM", 10_000)
    monkeypatch.setattr(keyword, "BOUNDED_DF_FROM", 20)
    with scratch_database(pg_url) as db_url:
        ws = tmp_path / "ws"
        notes(ws, 60)  # "ferry" in all 60
        for i in range(3):
            write(ws, f"memory/bird-{i}.md", f"# Birds {i}\n\nA gannet over the ferry.\n")
        s = team(db_url, unique("df"))
        with MemoryEngine(ws, s) as e:
            e.sync()
        # Every writer gone (a backend reports its row changes as late as its exit), then
        # ANALYZE: nothing changed since.
        idle = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        deadline = time.monotonic() + 10
        while rows(db_url, idle) != [(1,)] and time.monotonic() < deadline:
            time.sleep(0.05)
        rows(db_url, "ANALYZE memory_chunks")
        with MemoryEngine(ws, s) as e:
            db = e.route.team.connect()
            ((ferry, gannet), _), counted = frequencies_counting(db, ["ferry", "gannet"])
            assert gannet == 3 and 55 <= ferry <= 63 and counted == [["'gannet'"]]
            # 20 chunks of another namespace: a share of the table may now be 20 off, more
            # than a quarter of ferry's 60 or so: counted.
            ((ferry, _), _), counted = counted_beside_others(db, db_url, tmp_path, 20)
            assert ferry == 63 and counted == [["'ferri'", "'gannet'"]]


def test_common_words_take_their_frequency_from_the_statistics(pg_url, tmp_path: Path, monkeypatch):
    """A word that ANALYZE's statistics show in STATS_DF_FROM chunks or more is not counted
    (a count visits a heap row per match); its frequency is the statistics' share of the
    namespace, close to the truth. Rarer words are still counted exactly."""
    from memory_ls.index.postgres import keyword

    monkeypatch.setattr(keyword, "STATS_DF_FROM", 20)
    with scratch_database(pg_url) as db_url:
        ws = tmp_path / "ws"
        notes(ws, 60)  # "ferry" in all 60
        for i in range(3):
            write(ws, f"memory/bird-{i}.md", f"# Birds {i}\n\nA gannet over the ferry.\n")
        with MemoryEngine(ws, team(db_url, unique("df"))) as e:
            e.sync()
            rows(db_url, "ANALYZE memory_chunks")
            db = e.route.team.db
            ((ferry, gannet), total), counted = frequencies_counting(db, ["ferry", "gannet"])
            assert total == 63 and gannet == 3
            assert 55 <= ferry <= 63  # the statistics' share, not a count
            assert counted == [["'gannet'"]]
            resp = e.search("gannet ferry", mode="keyword", min_score=0)
            assert resp.results[0].path.startswith("memory/bird-")
            # Once other namespaces are most of the table, its shares are not this one's.
            ((ferry, _), _), counted = counted_beside_others(db, db_url, tmp_path, 90)
            assert ferry == 63 and counted == [["'ferri'", "'gannet'"]]  # counted


def test_a_word_counted_after_the_chunk_total_was_cached(pg_url, tmp_path: Path):
    """Each count is kept for a while: when another client pushed chunks between this
    client's count of the namespace and its first count of a word, the word's count is the
    larger. BM25's IDF of such a word was the log of a negative number: the search failed."""
    ns = unique("stale")
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "MEMORY.md", "# Memory\n\nPrefers tea.\n")
    notes(b, 3)
    with MemoryEngine(a, team(pg_url, ns)) as ea, MemoryEngine(b, team(pg_url, ns)) as eb:
        ea.sync()
        assert paths(ea.search("tea"))  # the namespace's 1 chunk counted and kept
        eb.sync()  # 3 more, all with "ferry"
        assert sorted(paths(ea.search("ferry timetable"))) == [
            f"memory/note-{i:03d}.md" for i in range(3)
        ]


def test_words_over_the_postings_budget_still_count_on_the_team_index(pg_url, tmp_path: Path):
    """The team index gets the words the postings budget leaves out (it picks the rarer words
    to find chunks by itself and scores every word): its ranking is the unbudgeted one."""
    ws = tmp_path / "ws"
    for i in range(1100):
        # "walrus" alone in 20 notes, with "deploy" in 10 more; "deploy" in a fifth of all.
        word = "walrus" if i < 20 else "walrus deploy" if i < 30 else "deploy" if i % 5 == 0 else ""
        write(ws, f"memory/n{i:04}.md", f"# Note\n\nstatus update for the week {word}\n")
    ns = unique("budget")

    def top(budget: int) -> list[tuple[str, float]]:
        s = team(pg_url, ns)
        s.query.keyword_postings_budget = budget
        with MemoryEngine(ws, s) as e:
            e.sync()
            hits = e.search("walrus deploy", max_results=10, min_score=0).results
            return [(h.path, h.score) for h in hits]

    whole = top(0)
    assert [p for p, _ in whole] == [f"memory/n{i:04}.md" for i in range(20, 30)]
    assert top(100) == whole
