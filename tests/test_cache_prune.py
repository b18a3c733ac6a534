"""``memory-ls cache prune`` through the real CLI: the index of a deleted folder goes (with its
-wal and -shm files), the index of a folder that exists stays, and a file whose folder cannot be
told (an index from before the folder was recorded, a renamed one, a symlink, anything else)
stays and is reported; ``doctor`` warns of what prune would remove."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from cli_util import doctor, run_cli
from conftest import write

from memory_ls.engine.index_files import FOLDER_KEY


def cache_index() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "memory-ls" / "index"


def indexed_folder(root: Path, home: Path, *args: str) -> Path:
    write(root, ".memory-ls.toml", 'provider = "none"\n')
    write(root, "MEMORY.md", f"# {root.name}\n\nA note of {root.name}.\n")
    done = run_cli("index", "-w", str(root), *args, home=home)
    assert done.returncode == 0, done.stderr
    (path,) = cache_index().glob(f"{root.name}-*.sqlite")
    return path


def prune(home: Path, *args: str) -> dict:
    done = run_cli("cache", "prune", "--json", *args, home=home)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_prune_removes_exactly_the_index_of_a_deleted_folder(tmp_path: Path):
    home = tmp_path / "home"
    live = indexed_folder(tmp_path / "kept", home)
    stale = indexed_folder(tmp_path / "temporary", home)
    shutil.rmtree(tmp_path / "temporary")
    for side in ("-wal", "-shm"):  # as a process killed with the index open leaves them
        Path(f"{stale}{side}").write_bytes(b"x" * 10)
    size = sum(p.stat().st_size for p in cache_index().glob(f"{stale.name}*"))

    code, checks, _ = doctor(tmp_path / "kept", home)
    cache = checks["cache"]
    assert code == 0 and cache["status"] == "warn" and cache["fix"] == "memory-ls cache prune"
    assert "1 index of a folder that no longer exists" in cache["summary"]
    assert f"{stale.name}: {tmp_path / 'temporary'} (gone)" in cache["detail"]

    dry = prune(home, "--dry-run")
    assert [e["path"] for e in dry["removed"]] == [str(stale)] and dry["bytesFreed"] == size
    assert stale.exists()  # a dry run removes nothing

    done = prune(home)
    assert [e["path"] for e in done["removed"]] == [str(stale)] and done["bytesFreed"] == size
    assert [e["path"] for e in done["kept"]] == [str(live)] and done["unknown"] == []
    assert sorted(p.name for p in cache_index().iterdir()) == [live.name]
    text = run_cli("cache", "prune", home=home)
    assert "removed 0 indexes" in text.stdout and "1 of existing folders kept" in text.stdout
    code, checks, _ = doctor(tmp_path / "kept", home)
    assert checks["cache"]["status"] == "ok"


def test_what_cannot_be_attributed_to_a_folder_is_left_and_reported(tmp_path: Path):
    home = tmp_path / "home"
    indexed_folder(tmp_path / "kept", home)
    old = indexed_folder(tmp_path / "old", home)
    renamed = indexed_folder(tmp_path / "renamed", home)
    linked = indexed_folder(tmp_path / "linked", home)
    for folder in ("old", "renamed", "linked"):
        shutil.rmtree(tmp_path / folder)
    with closing(sqlite3.connect(old)) as conn:  # as an index made before the folder row
        conn.execute("DELETE FROM meta WHERE key = ?", (FOLDER_KEY,))
        conn.commit()
    renamed.rename(cache_index() / "mine.sqlite")
    target = tmp_path / "elsewhere.sqlite"
    linked.rename(target)
    (cache_index() / linked.name).symlink_to(target)
    write(cache_index(), "notes.txt", "not an index\n")
    before = sorted(p.name for p in cache_index().iterdir())

    done = prune(home)
    assert done["removed"] == [] and done["bytesFreed"] == 0
    why = {Path(e["path"]).name: e["why"] for e in done["unknown"]}
    assert set(why) == {old.name, "mine.sqlite", linked.name, "notes.txt"}
    assert why[old.name].startswith("it records no folder")
    assert why["mine.sqlite"].startswith("its name is not the index name of")
    assert why[linked.name] == "not a regular file" and why["notes.txt"] == "not an index file"
    assert sorted(p.name for p in cache_index().iterdir()) == before and target.exists()
    _, checks, _ = doctor(tmp_path / "kept", home)
    assert checks["cache"]["status"] == "ok" and "4 unattributed" in checks["cache"]["summary"]


def test_a_rebuilt_index_still_names_its_folder(tmp_path: Path):
    home = tmp_path / "home"
    path = indexed_folder(tmp_path / "ws", home)
    done = run_cli("index", "-w", str(tmp_path / "ws"), "--force", home=home)
    assert done.returncode == 0, done.stderr
    with closing(sqlite3.connect(path)) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (FOLDER_KEY,)).fetchone()
    assert row == (str((tmp_path / "ws").resolve()),)
    shutil.rmtree(tmp_path / "ws")
    assert [e["path"] for e in prune(home)["removed"]] == [str(path)]


def test_an_index_left_open_is_read_through_its_wal(tmp_path: Path):
    """A process that died with the index open leaves a -wal file that may hold what the main
    file lacks: a deleted folder row there keeps the index; a folder row there is seen."""
    home = tmp_path / "home"
    kept_by_wal = indexed_folder(tmp_path / "a", home)
    gone = indexed_folder(tmp_path / "b", home)
    open_a, open_b = sqlite3.connect(kept_by_wal), sqlite3.connect(gone)
    try:
        open_a.execute("DELETE FROM meta WHERE key = ?", (FOLDER_KEY,))
        open_a.commit()  # in the -wal only, while this connection stays open
        open_b.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('x', 'y')")
        open_b.commit()
        assert Path(f"{kept_by_wal}-wal").stat().st_size > 0
        shutil.rmtree(tmp_path / "a")
        shutil.rmtree(tmp_path / "b")
        done = prune(home)
    finally:
        open_a.close()
        open_b.close()
    assert [e["path"] for e in done["removed"]] == [str(gone)]
    assert [e["path"] for e in done["unknown"]] == [str(kept_by_wal)]
    assert kept_by_wal.exists() and not gone.exists()
