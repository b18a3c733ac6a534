"""``memory-ls cache prune``: the index files in the cache of workspace folders that are gone.

Every folder gets its own index in ``$XDG_CACHE_HOME/memory-ls/index/``, named for the folder
(its name and a hash of its path), and nothing ever removed one: each temporary workspace left
its index behind. The hash cannot be turned back into the path, so an index names its folder in
a meta row (``engine/index_files.FOLDER_KEY``). An index is *stale* only when that row names a
folder that does not exist and the file's name is the one that folder's index gets: the index of
an existing folder, and anything whose folder cannot be told (an index from before that row, a
file renamed, a file that is not an index, a symlink), are never removed. ``scan`` reads the
files without writing anything; ``prune`` removes the stale ones and their -wal and -shm files.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

SIDE_SUFFIXES = ("-wal", "-shm")


@dataclass(frozen=True)
class Entry:
    path: Path  # the index file (the side files go with it)
    size: int  # bytes, side files included
    folder: str | None  # the workspace folder it records, None when it records none
    state: str  # "live" | "stale" | "unknown"
    why: str  # for unknown ones: why it cannot be attributed

    def files(self) -> list[Path]:
        return [self.path, *(Path(f"{self.path}{s}") for s in SIDE_SUFFIXES)]

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": str(self.path), "bytes": self.size}
        return out | {"folder": self.folder, "state": self.state, "why": self.why}


@dataclass
class Scan:
    folder: Path  # the cache's index folder
    entries: list[Entry] = field(default_factory=list)

    def of(self, state: str) -> list[Entry]:
        return [e for e in self.entries if e.state == state]

    def size(self, state: str) -> int:
        return sum(e.size for e in self.of(state))


def index_folder() -> Path:
    from .settings import cache_dir

    return cache_dir() / "index"


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def recorded_folder(path: Path) -> str | None:
    """The workspace folder an index records, read without writing; None when it records none
    or cannot be read (then it is not an index this code can attribute). An index with a -wal
    file (a process has it open, or died with it open) is read from a copy of the two files, as
    the -wal may hold what the main file does not yet, and reading it in place may write."""
    wal = Path(f"{path}-wal")
    if not (wal.exists() and wal.stat().st_size > 0):
        return _folder_row(path)
    with tempfile.TemporaryDirectory(prefix="memory-ls-prune-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, f"{copy}-wal")
        return _folder_row(copy)


def _folder_row(path: Path) -> str | None:
    from .engine.index_files import FOLDER_KEY
    from .index.schema import DatabaseError, connect_read_only

    try:
        conn = connect_read_only(path)
    except DatabaseError:
        return None
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (FOLDER_KEY,)).fetchone()
    except DatabaseError:  # not an index, a damaged one, or locked past the timeout
        return None
    finally:
        conn.close()
    return str(row[0]) if row and row[0] else None


def classify(path: Path) -> Entry:
    """One index file of the cache: live, stale or unknown, with its size and side files."""
    from .engine.index_files import default_index_path

    size = sum(_size(p) for p in [path, *(Path(f"{path}{s}") for s in SIDE_SUFFIXES)])
    try:
        regular = stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        regular = False
    if not regular:  # a symlink is never followed: its target may be anything
        return Entry(path, size, None, "unknown", "not a regular file")
    folder = recorded_folder(path)
    if folder is None:
        why = "it records no folder (an index made before memory-ls recorded it, or not one)"
        return Entry(path, size, None, "unknown", why)
    if default_index_path(Path(folder)).name != path.name:
        return Entry(path, size, folder, "unknown", f"its name is not the index name of {folder}")
    if os.path.lexists(folder):
        return Entry(path, size, folder, "live", "")
    return Entry(path, size, folder, "stale", "")


def _main_files(folder: Path) -> Iterable[Path]:
    """Every file of the index folder that is not a side file of an index beside it."""
    names = {p.name for p in folder.iterdir()}
    for name in sorted(names):
        side = next((s for s in SIDE_SUFFIXES if name.endswith(s)), None)
        if side is None or name[: -len(side)] not in names:
            yield folder / name


def scan(folder: Path | None = None) -> Scan:
    """Every file of the cache's index folder, classified; nothing is written."""
    folder = folder or index_folder()
    out = Scan(folder)
    if not folder.is_dir():
        return out
    for path in _main_files(folder):
        if path.name.endswith(".sqlite"):
            out.entries.append(classify(path))
        else:  # a rebuild cut short, an index moved aside as corrupt, anything else
            out.entries.append(Entry(path, _size(path), None, "unknown", "not an index file"))
    return out


def prune(folder: Path | None = None, *, dry_run: bool = False) -> tuple[Scan, list[Entry]]:
    """Remove the stale indexes of ``scan`` (with ``dry_run``, nothing); returns the scan and
    the entries removed (or that would be). Each is classified again just before it goes: a
    folder made again meanwhile keeps its index."""
    found = scan(folder)
    removed: list[Entry] = []
    for entry in found.of("stale"):
        if dry_run:
            removed.append(entry)
            continue
        again = classify(entry.path)
        if again.state != "stale" or again.path.parent != found.folder:
            continue
        for f in again.files():
            f.unlink(missing_ok=True)
        removed.append(again)
    return found, removed
