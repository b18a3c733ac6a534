"""The index when the disk, a lock or a setting fails (from a fuzzing pass over storage,
settings and concurrency): the Markdown files are never touched, a healthy index is never moved
aside for a failure that is not its own, and a damaged one is repaired by a rebuild."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write

from memory_ls.cli import main
from memory_ls.engine import MemoryEngine
from memory_ls.index import schema
from memory_ls.index.schema import DatabaseError, IndexPathError, connect, is_unusable_file
from memory_ls.index.store import Store
from memory_ls.settings import Settings, load


def keyword(ws: Path, idx: Path) -> MemoryEngine:
    return MemoryEngine(ws, Settings(provider="none"), index_path=idx)


def test_an_index_path_that_is_a_folder_is_refused_and_left_alone(ws: Path, tmp_path: Path):
    # It used to be renamed to <folder>.corrupt-<time>: store.path = the workspace moved it all.
    for folder in (ws, ws / "memory"):
        with pytest.raises(IndexPathError, match="is a folder"):
            keyword(ws, folder)
    assert (ws / "memory" / "2026-02-01-deploy.md").is_file()
    assert not list(tmp_path.glob("**/*.corrupt-*"))


def test_an_index_path_that_is_a_memory_file_is_refused_and_left_alone(ws: Path, tmp_path: Path):
    note = ws / "MEMORY.md"
    before = note.read_bytes()
    link = tmp_path / "index.sqlite"
    link.symlink_to(note)
    for path in (note, link, tmp_path / "elsewhere" / "notes.md"):
        with pytest.raises(IndexPathError, match="memory file"):
            keyword(ws, path)
    assert note.read_bytes() == before
    assert not list(tmp_path.glob("**/*.corrupt-*"))


def test_only_a_damaged_or_foreign_file_counts_as_unusable(tmp_path: Path):
    good = tmp_path / "good.sqlite"
    conn, _ = connect(good, vec=False)
    conn.execute("CREATE TABLE t (x)")
    # A full disk (SQLITE_FULL), as a database capped at its current size meets it.
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(DatabaseError) as full:
        conn.execute("INSERT INTO t VALUES (zeroblob(100000))")
    assert not is_unusable_file(full.value)
    # A lock held by another connection (SQLITE_BUSY).
    conn.execute("BEGIN EXCLUSIVE")
    other, _ = connect(good, vec=False)
    other.execute("PRAGMA busy_timeout = 0")
    with pytest.raises(DatabaseError) as busy:
        other.execute("BEGIN IMMEDIATE")
    assert not is_unusable_file(busy.value)
    conn.execute("ROLLBACK")
    other.close()
    conn.close()
    # Not a database (SQLITE_NOTADB), and our own "schema this code cannot read".
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"\x01\x02" * 4096)
    conn, _ = connect(bad, vec=False)
    with pytest.raises(DatabaseError) as notadb:
        conn.execute("SELECT * FROM sqlite_master").fetchall()
    conn.close()
    assert is_unusable_file(notadb.value)
    assert is_unusable_file(DatabaseError("schema version 99"))


def _damage_table(idx: Path, table: str) -> None:
    """Overwrite the root page of ``table`` with garbage (the rest of the file is fine)."""
    conn, _ = connect(idx, vec=False)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with idx.open("r+b") as f:
        f.seek((root[0] - 1) * page)
        f.write(b"\xa5" * page)


def test_an_upgrade_cut_short_keeps_the_steps_it_made_and_carries_on(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Numbered and append-only: one step per version after the oldest an index can upgrade from.
    steps = range(schema.OLDEST_UPGRADED + 1, schema.SCHEMA_VERSION + 1)
    assert sorted(schema.MIGRATIONS) == list(steps)
    idx = tmp_path / "idx.sqlite"
    with keyword(ws, idx) as e:
        e.sync()
    conn, _ = connect(idx, vec=False)  # back to schema 2 (its step to 3 then finds nothing)
    conn.executescript(
        "DROP INDEX chunks_lines_pending; ALTER TABLE chunks DROP COLUMN lines;"
        "UPDATE meta SET value = '2' WHERE key = 'schema';"
    )
    conn.close()

    def fail(conn: object) -> None:
        raise RuntimeError("killed")

    def version() -> str:
        conn, _ = connect(idx, vec=False)
        try:
            return str(conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0])
        finally:
            conn.close()

    with monkeypatch.context() as m:
        m.setitem(schema.MIGRATIONS, 4, fail)
        with pytest.raises(RuntimeError):
            Store.open(idx)
    assert version() == "3"  # step 3 kept, and the failed step 4 left nothing behind
    Store.open(idx).close()
    assert version() == str(schema.SCHEMA_VERSION)
    with keyword(ws, idx) as e:
        assert not e.needs_rebuild and e.search("token bucket").results
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_a_forced_rebuild_repairs_an_index_damaged_where_opening_does_not_look(
    ws: Path, tmp_path: Path
):
    # The embedding cache's table is read only to seed a rebuild: `index --force` used to fail
    # on it for good, so nothing short of deleting the file by hand repaired the index.
    idx = tmp_path / "i.sqlite"
    with keyword(ws, idx) as e:
        e.sync()
    _damage_table(idx, "embedding_cache")
    with keyword(ws, idx) as e:
        e.sync(force=True)
        assert e.search("Redis").results
    conn, _ = connect(idx, vec=False)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def test_a_failed_write_keeps_the_dirty_files_for_the_next_try(ws: Path, tmp_path: Path):
    with keyword(ws, tmp_path / "i.sqlite") as e:
        e.sync()
        writer = e.indexer.writer.conn
        pages = writer.execute("PRAGMA page_count").fetchone()[0]
        writer.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full
        write(ws, "memory/late.md", "# Late\n\nThe quokka report. " + "filler words " * 4000)
        e.mark_dirty(["memory/late.md"])
        with pytest.raises(DatabaseError, match="full"):
            e.sync_dirty()
        assert e.search("Redis").results  # the old index answers as before
        writer.execute("PRAGMA max_page_count = 1073741823")  # space again
        assert "memory/late.md" in e.indexer.dirty
        assert e.search("quokka").results


def test_the_cli_says_what_is_wrong_in_one_line(ws: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["index", "-w", str(ws), "--index", str(ws)]) == 2
    assert "is a folder" in capsys.readouterr().err
    note = ws / "MEMORY.md"
    assert main(["search", "dark", "-w", str(ws), "--index", str(note)]) == 2
    assert "memory file" in capsys.readouterr().err


def test_an_integer_setting_too_large_for_sqlite_is_ignored(tmp_path: Path):
    # query.maxResults = 1e40 from a client made every search fail with an OverflowError.
    settings, problems = load(None, {"query": {"maxResults": 10**40, "minScore": 0.2}})
    assert settings.query.max_results == Settings().query.max_results
    assert settings.query.min_score == 0.2
    assert any("query.maxResults" in p for p in problems)


def test_a_huge_candidate_pool_is_capped(ws: Path, tmp_path: Path):
    s = Settings(provider="none")
    s.query.max_results = 2**62  # allowed, but times candidateMultiplier overflows SQLite
    with MemoryEngine(ws, s, index_path=tmp_path / "i.sqlite") as e:
        e.sync()
        assert e.search("Redis").results
