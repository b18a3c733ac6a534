"""Reading memory files from disk: bytes to text, with bad input reported, never fatal."""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..workspace import not_regular

log = logging.getLogger(__name__)


class SourceError(Exception):
    """The file cannot be indexed (binary, too large, unreadable): ``reason`` says why, and
    the message names the file too (``name: reason``)."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"{name}: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class SourceText:
    text: str
    # rendered line i (0-based) -> original 1-based line; None when they are the same lines.
    line_map: tuple[int, ...] | None = None


def content_hash(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def decode(data: bytes, name: str) -> str:
    """UTF-8 text of a file; binary files raise, invalid UTF-8 is replaced and logged."""
    if b"\x00" in data[:8192]:
        raise SourceError(name, "binary file (NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        log.warning("%s: invalid UTF-8 at byte %d, decoded with replacement", name, exc.start)
        text = data.decode("utf-8", errors="replace")
    return text.removeprefix("\ufeff")


# The file may have been replaced since the walk listed it: never read through a symlink
# (its target may be anywhere) and never wait on a FIFO (opening one blocks until a writer).
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def open_regular(path: Path, folders: int = 0) -> BinaryIO:
    """``path`` opened for reading if it is a regular file itself; FileNotFoundError when it
    is gone, SourceError when it is something else (a symlink, a folder, a FIFO) or
    cannot be opened. ``folders``: how many folders above it must not be symlinks either (those
    between the file and its root folder, which itself may be one): each is opened without
    following a link, so a folder swapped for a symlink since the walk is not read through."""
    try:
        fd = _open_below(path, folders) if folders and _DIR_FD else os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise SourceError(path.name, "a symlink on its path") from None
        raise SourceError(path.name, f"cannot read ({exc.strerror or exc})") from exc
    fh = os.fdopen(fd, "rb")
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        fh.close()
        raise SourceError(path.name, not_regular(mode))
    return fh


_DIR_FD = os.open in os.supports_dir_fd  # not on Windows: there the file alone is checked
# O_PATH (Linux): a folder one may enter but not list opens too, as a path lookup would.
_AT = getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0)
_FOLDER_FLAGS = _AT | getattr(os, "O_NOFOLLOW", 0)


def _open_below(path: Path, folders: int) -> int:
    folders = min(folders, len(path.parents) - 1)  # a key with ".." may count more
    names = path.parts[-1 - folders :]
    at = os.open(path.parents[folders], _AT)
    try:
        for name in names[:-1]:
            inner = os.open(name, _FOLDER_FLAGS, dir_fd=at)
            os.close(at)
            at = inner
        return os.open(names[-1], _OPEN_FLAGS, dir_fd=at)
    finally:
        os.close(at)


def read_bytes(path: Path, max_bytes: int, folders: int = 0) -> bytes:
    with open_regular(path, folders) as fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            if size <= max_bytes:
                data = fh.read(max_bytes + 1)  # it may grow while we read
                size = len(data)
        except OSError as exc:
            raise SourceError(path.name, f"cannot read ({exc.strerror or exc})") from exc
    if size > max_bytes:
        raise SourceError(path.name, f"{size} bytes is over maxFileBytes ({max_bytes})")
    return data
