"""Several processes on one index, and files that change while they are indexed (from an
audit of concurrency and file churn): every sync converges to what is on disk (and in the
editor), and nothing outside the memory files is ever read."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import write
from lsp_harness import (  # the harness of the server tests
    Start,
    capabilities,
    eventually,
    make_workspace,
    paths,
    search,
    start,  # noqa: F401  (a fixture)
    status,
    uri,
)
from lsprotocol import types

from memory_ls.engine import MemoryEngine
from memory_ls.settings import Settings
from memory_ls.sources.markdown import SourceError, read_bytes
from memory_ls.workspace import MemoryFile, PathError


def keyword(ws: Path, idx: Path) -> MemoryEngine:
    return MemoryEngine(ws, Settings(provider="none"), index_path=idx)


def test_unsaved_text_survives_another_process_syncing_the_index(ws: Path, tmp_path: Path):
    # A language server indexes an open buffer's unsaved text; a CLI `index` (or an MCP
    # server's sync before each search) on the same index file wrote the disk text over it,
    # and the editor's searches no longer found what it had typed until the next keystroke.
    idx = tmp_path / "i.sqlite"
    with keyword(ws, idx) as editor:
        editor.sync()
        assert editor.set_document("memory/2026-02-01-deploy.md", "# Deploy\n\nThe zebra plan.\n")
        assert [h.path for h in editor.search("zebra").results] == ["memory/2026-02-01-deploy.md"]
        for force in (False, True):
            with keyword(ws, idx) as other:
                other.sync(force=force)
            hits = editor.search("zebra").results
            assert [h.path for h in hits] == ["memory/2026-02-01-deploy.md"], force
            assert not editor.search("Fly.io").results  # the disk text is not searched either


HOLD_WRITE_LOCK = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("UPDATE meta SET value = value")  # a commit the engine sees as another writer's
c.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(30)
"""


def test_a_search_is_not_held_by_another_process_holding_the_write_lock(ws: Path, tmp_path: Path):
    # Seeing another process's commit, a search indexed the open buffers again in a write
    # transaction, even when the index held their text already, and waited out the other
    # process's write lock (SQLite's 30 s busy timeout) instead of the search's budget.
    idx = tmp_path / "i.sqlite"
    with keyword(ws, idx) as editor:
        editor.sync()
        assert editor.set_document("memory/2026-02-01-deploy.md", "# Deploy\n\nThe zebra plan.\n")
        editor.search("zebra")
        for stale in (False, True):
            if stale:  # the disk text over the buffer's, as another process's sync writes it
                with keyword(ws, idx) as other:
                    other.sync(force=True)
            holder = subprocess.Popen(
                [sys.executable, "-c", HOLD_WRITE_LOCK, str(idx)], stdout=subprocess.PIPE
            )
            try:
                assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
                editor.search("zebra")
                assert holder.poll() is None  # answered while the lock is still held
            finally:
                holder.kill()
                holder.wait()
        # The lock gone, the next search puts the buffer back.
        hits = editor.search("zebra").results
        assert [h.path for h in hits] == ["memory/2026-02-01-deploy.md"]


async def left_the_index(client, word: str) -> None:
    """Until the workspace's three notes alone are indexed (status does not sync: this waits
    for the sync a watcher's event starts), then ``word`` finds nothing."""

    async def gone() -> bool:
        return (await status(client))["files"] == 3

    await eventually(gone)
    assert not paths(await search(client, word))


async def test_a_memory_folder_moved_away_leaves_the_index(
    start: Start,  # noqa: F811
    tmp_path: Path,
):
    # The server's own watcher sees a folder moved out of the workspace as one "deleted"
    # event for the folder, none for its notes, and ignored it: they stayed searchable.
    ws = make_workspace(tmp_path / "ws")
    write(ws, "memory/old/a.md", "# A\n\nThe ocelot ledger.\n")
    write(ws, "memory/old/b.md", "# B\n\nThe ocelot invoice.\n")
    client = await start(ws, caps=capabilities(watch=False))
    assert (await status(client))["watch"] == "server"
    assert len(paths(await search(client, "ocelot"))) == 2
    shutil.move(ws / "memory" / "old", tmp_path / "archive")
    await left_the_index(client, "ocelot")


async def test_a_deleted_folder_reported_by_the_client_leaves_the_index(
    start: Start,  # noqa: F811
    tmp_path: Path,
):
    # A client reports a deleted folder as one event for the folder (VS Code sends none for
    # the files in it); it is not a memory file, so it was dropped and the notes stayed.
    ws = make_workspace(tmp_path / "ws")
    write(ws, "memory/old/a.md", "# A\n\nThe ocelot ledger.\n")
    client = await start(ws)
    assert paths(await search(client, "ocelot")) == ["memory/old/a.md"]
    shutil.rmtree(ws / "memory" / "old")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[
                types.FileEvent(uri=uri(ws / "memory" / "old"), type=types.FileChangeType.Deleted)
            ]
        )
    )
    await left_the_index(client, "ocelot")


async def test_a_note_written_into_a_folder_the_client_reports_as_made_is_indexed(
    start: Start,  # noqa: F811
    tmp_path: Path,
):
    # `mkdir -p` then a write, as agents do: the client reports the folder (its watcher for
    # the new folder starts after the note is there) and nothing for the note.
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    made = ws / "memory" / "projects" / "new"
    made.mkdir(parents=True)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri(made), type=types.FileChangeType.Created)]
        )
    )
    await asyncio.sleep(0.5)  # the folder's first sync has run: the note comes after it
    write(ws, "memory/projects/new/plan.md", "# Plan\n\nThe axolotl rollout.\n")

    async def found() -> bool:
        return paths(await search(client, "axolotl")) == ["memory/projects/new/plan.md"]

    await eventually(found)


def swap_after_walk(
    e: MemoryEngine, note: Path, swap: Callable[[], object]
) -> Callable[[], list[MemoryFile]]:
    """The workspace's walk, then ``note`` deleted and ``swap`` put in its place: what a sync
    finds when the file changes between the walk and the read."""
    walk = e.workspace.discover

    def discover_then_swap() -> list[MemoryFile]:
        found = walk()
        note.unlink()
        swap()
        return found

    return discover_then_swap


def test_a_note_replaced_by_a_symlink_during_a_sync_is_not_read_through_it(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The walk skips symlinks, but the file was then stat'ed and read by name, following a
    # symlink put there after the walk: a file outside the workspace got indexed as the note.
    secret = write(tmp_path, "outside/secret.txt", "The vault combination is 31-17-42 okapi.\n")
    note = ws / "memory" / "2026-02-01-deploy.md"
    with keyword(ws, tmp_path / "i.sqlite") as e:
        e.sync()
        swapped = swap_after_walk(e, note, lambda: note.symlink_to(secret))
        monkeypatch.setattr(e.workspace, "discover", swapped)
        e.sync()
        assert not e.search("okapi").results
        monkeypatch.undo()
        e.sync()
        assert not e.search("okapi").results
        assert "memory/2026-02-01-deploy.md" not in {h.path for h in e.search("Deploys").results}


def test_a_folder_replaced_by_a_symlink_during_a_sync_is_not_read_through_it(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Only the note itself was opened without following a link: a folder on its path swapped
    # for a symlink after the walk led the read outside the workspace, and memory/get too.
    outside = tmp_path / "outside"
    write(outside, "cjk.md", "# Elsewhere\n\nThe vault combination is 31-17-42 okapi.\n")
    folder = ws / "memory" / "notes"
    with keyword(ws, tmp_path / "i.sqlite") as e:
        e.sync()
        walk = e.workspace.discover

        def discover_then_swap() -> list[MemoryFile]:
            found = walk()
            folder.rename(tmp_path / "moved-away")
            folder.symlink_to(outside, target_is_directory=True)
            return found

        monkeypatch.setattr(e.workspace, "discover", discover_then_swap)
        e.sync()
        monkeypatch.undo()
        assert not e.search("okapi").results
        e.sync()
        assert not e.search("okapi").results
        with pytest.raises(PathError):  # refused by name, as before
            e.get("memory/notes/cjk.md")
        note = MemoryFile("memory/notes/cjk.md", ws / "memory/notes/cjk.md", "memory")
        with pytest.raises(SourceError, match="symlink"):  # and by the read itself
            read_bytes(note.abs_path, 1 << 20, note.folders)
        assert read_bytes(outside / "cjk.md", 1 << 20).startswith(b"# Elsewhere")


def test_a_note_replaced_by_a_fifo_during_a_sync_does_not_hang_it(ws: Path, tmp_path: Path):
    # Reading a FIFO by name blocks until something writes to it: the sync, holding the
    # index writer (and the server's edit lane), waited forever.
    note = ws / "memory" / "2026-02-01-deploy.md"
    with keyword(ws, tmp_path / "i.sqlite") as e:
        e.sync()
        swapped = swap_after_walk(e, note, lambda: os.mkfifo(note))
        e.workspace.discover = swapped  # type: ignore[method-assign]
        done: list[object] = []
        worker = threading.Thread(target=lambda: done.append(e.sync()), daemon=True)
        worker.start()
        worker.join(30)  # milliseconds when it works; a stuck open() never returns
        hung = worker.is_alive()
        if hung:  # a writer end lets it go
            os.close(os.open(note, os.O_WRONLY | os.O_NONBLOCK))
            worker.join()
        assert not hung and done
        assert "memory/2026-02-01-deploy.md" not in {h.path for h in e.search("Deploys").results}


def test_a_same_size_rewrite_within_the_mtime_tick_is_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A note rewritten at the same size within the tick of its mtime, right after a sync read
    it, matched what was read (mtime and size) and was never indexed again."""
    root = tmp_path / "ws"
    write(root, "memory/counter.md", "# Counter\n\nvalue alpha\n")
    note = root / "memory/counter.md"
    engine = MemoryEngine(root, Settings(provider="none"), index_path=tmp_path / "i.sqlite")
    try:
        engine.sync("test")
        stamp = note.stat().st_mtime_ns
        note.write_text("# Counter\n\nvalue omega\n")  # same size
        os.utime(note, ns=(stamp, stamp))  # within the same tick
        engine.sync("test")
        assert [h.path for h in engine.search("omega").results] == ["memory/counter.md"]
        assert engine.search("alpha").results == []
        # Once the change is older than a tick could be, its stamp (the mtime, or the ctime,
        # which setting the mtime moves) is kept as it is, and the next syncs match it
        # without reading the file.
        monkeypatch.setattr("memory_ls.index.writes.RACY_S", 0.2)
        os.utime(note, (time.time() - 10, time.time() - 10))
        time.sleep(0.3)
        engine.sync("test")
        with engine.indexer.reader() as store:
            kept = store.file_states(["memory/counter.md"])["memory/counter.md"]
        st = note.stat()
        assert kept.mtime == max(st.st_mtime, st.st_ctime)
    finally:
        engine.close()


def test_only_a_deleted_path_that_held_notes_is_worth_a_sync(ws: Path, tmp_path: Path):
    # Deleted paths under memory/ that are not notes: a folder of notes (sync), or an editor's
    # scratch file made and deleted on every save (vim's 4913, a.md~, .a.md.swp: no sync).
    write(ws, "memory/old/a.md", "# A\n\nThe ocelot ledger.\n")
    with keyword(ws, tmp_path / "i.sqlite") as engine:
        engine.sync()
        assert engine.holds_below("memory/old") and engine.holds_below("memory/old/")
        assert engine.holds_below("memory")
        for scratch in ("memory/4913", "memory/old/a.md~", "memory/old/.a.md.swp", "memory/ol"):
            assert not engine.holds_below(scratch), scratch
