"""The index follows the files under real write patterns (from an audit of the ways editors,
agents and people change memory files): after each, a search sees exactly the files on disk."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
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
)

from memory_ls.engine import MemoryEngine
from memory_ls.settings import Settings


async def test_a_memory_folder_deleted_and_made_again_is_watched_again(
    start: Start,  # noqa: F811
    tmp_path: Path,
):
    # The server's watcher kept the watch of the deleted memory/ registered under its path
    # (watchdog keeps a watch whose folder went), so memory/ made again was not watched: a
    # note written into it stayed out of the index (the interval sync is off by default).
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws, caps=capabilities(watch=False))
    assert (await status(client))["watch"] == "server"

    async def files(n: int) -> bool:  # status does not sync: this waits for the watcher
        return (await status(client))["files"] == n

    for away in ("deleted", "moved"):
        if away == "deleted":
            shutil.rmtree(ws / "memory")
        else:
            (ws / "memory").rename(ws / "memory.old")
        await eventually(lambda: files(1))  # MEMORY.md
        (ws / "memory").mkdir()
        await asyncio.sleep(0.5)  # the sync for the new folder has run: the note comes after
        write(ws, "memory/agent.md", f"# Agent\n\nThe {away} narwhal cache was flushed.\n")
        await eventually(lambda: files(2))
        assert paths(await search(client, f"{away} narwhal")) == ["memory/agent.md"]


def test_a_closed_buffer_of_a_note_replaced_by_a_symlink_leaves_the_index(tmp_path: Path):
    # An agent replaced an open note by a symlink (`ln -sf`): closing the buffer was refused
    # (a symlink is not memory), the buffer stayed, and every sync indexed its text again.
    root = tmp_path / "ws"
    write(root, "MEMORY.md", "# Memory\n\nPlain words.\n")
    note = write(root, "memory/x.md", "# X\n\nThe quokka ledger on disk.\n")
    with MemoryEngine(root, Settings(provider="none"), index_path=tmp_path / "i.sqlite") as e:
        e.sync("test")
        e.set_document("memory/x.md", "# X\n\nThe quokka ledger, unsaved.\n")
        assert [h.path for h in e.search("quokka").results] == ["memory/x.md"]
        note.unlink()
        note.symlink_to(root / "MEMORY.md")
        e.clear_document("memory/x.md")
        assert e.search("quokka").results == []
        e.sync("test")
        assert e.search("quokka").results == []
        with e.indexer.reader() as store:
            assert sorted(store.file_states()) == ["MEMORY.md"]


def test_a_hidden_note_is_not_indexed_by_a_watch_event_either(tmp_path: Path):
    # The walk skips hidden files under memory/ and extra folders (as it skips hidden
    # folders); a watcher's event for one indexed it, and the next full sync dropped it.
    root = tmp_path / "ws"
    write(root, "memory/a.md", "# A\n\nThe ibex note.\n")
    s = Settings(provider="none", extra_paths=["notes"])
    with MemoryEngine(root, s, index_path=tmp_path / "i.sqlite") as e:
        e.sync("test")
        for rel in ("memory/.draft.md", "memory/sub/.x.md", "notes/.y.md"):
            write(root, rel, "# Draft\n\nThe ibex draft.\n")
            e.mark_dirty([rel])
            e.sync_dirty()
            assert [h.path for h in e.search("ibex").results] == ["memory/a.md"], rel
            assert e.set_document(rel, "The ibex buffer.\n") is False
        e.sync("test")
        assert [h.path for h in e.search("ibex").results] == ["memory/a.md"]


def test_a_same_size_edit_with_its_mtime_set_back_is_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # An edit of the same size whose mtime was then set back (`touch -d`, `cp -p`, a restore
    # from a backup) matched the mtime and size the last sync read, and was never indexed.
    root = tmp_path / "ws"
    note = write(root, "memory/status.md", "# Status\n\nThe build is green.\n")
    old = time.time() - 3600
    os.utime(note, (old, old))
    monkeypatch.setattr("memory_ls.index.writes.RACY_S", 0.2)  # a change this old is settled
    time.sleep(0.3)
    with MemoryEngine(root, Settings(provider="none"), index_path=tmp_path / "i.sqlite") as e:
        e.sync("test")
        assert e.sync("test").unchanged == 1
        size = note.stat().st_size
        note.write_text("# Status\n\nThe build is amber.\n")  # same size
        os.utime(note, (old, old))
        assert note.stat().st_size == size
        e.sync("test")
        assert [h.path for h in e.search("amber").results] == ["memory/status.md"]
        assert e.search("green").results == []
