"""Keyword search on the team index right after a large push (real PostgreSQL).

New GIN entries wait in the index's pending list until it is merged, and every keyword
statement reads the whole list: a push of many chunks merges it, and a role that may not
(row privileges only) still syncs and answers, leaving the merge to autovacuum.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import write
from pg_util import scratch_database, shared_url, unique, with_database
from test_postgres import rows, team

from memory_ls.engine import MemoryEngine
from memory_ls.index.postgres import PgDatabase
from memory_ls.index.postgres.keyword import MERGE_AFTER

PENDING = "SELECT gin_clean_pending_list('memory_chunks_tsv'::regclass)"  # pages it merged
TABLES = (
    "memory_meta, memory_files, memory_chunks, memory_vectors, memory_chunk_lines, "
    "memory_embed_claims, memory_embedding_cache"
)


@pytest.fixture(scope="session")
def pg_url() -> str:
    return shared_url()


def notes(root: Path, n: int) -> None:
    for i in range(n):
        write(root, f"memory/note-{i:03d}.md", f"# Note {i}\n\nThe ferry timetable, entry {i}.\n")


def test_a_large_push_leaves_no_pending_list(pg_url, tmp_path: Path):
    """After a push of more than MERGE_AFTER chunks nothing is left for the merge, and the
    namespace's chunks are all found; a small push afterwards leaves its few entries pending."""
    with scratch_database(pg_url) as db_url:
        notes(tmp_path / "ws", MERGE_AFTER + 20)
        with MemoryEngine(tmp_path / "ws", team(db_url, unique("merge"))) as e:
            e.sync()
            assert rows(db_url, PENDING) == [(0,)]
            resp = e.search("ferry timetable", mode="keyword", max_results=200, min_score=0)
            assert len(resp.results) == MERGE_AFTER + 20
            write(tmp_path / "ws", "memory/extra.md", "# Extra\n\nThe ferry to the island.\n")
            e.sync()
        assert rows(db_url, PENDING)[0][0] > 0  # one chunk: merged by autovacuum, not here


def test_a_role_that_may_not_merge_still_syncs_and_answers(pg_url, tmp_path: Path, caplog):
    """A namespace role with row privileges only: the merge is refused, said once in the
    log, and the push and the search go on through PostgreSQL."""
    role, pw = unique("rows_only"), "rows-only-pw-5"
    rows(pg_url, f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{pw}'")
    try:
        with scratch_database(pg_url) as db_url:
            PgDatabase(db_url, "owner", "test").close()  # the owner creates the schema
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
