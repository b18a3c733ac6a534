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

log = logging.getLogger(__name__)


class SourceError(Exception):
    """The file cannot be indexed (binary, too large, unreadable); the message says why."""


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
        raise SourceError(f"{name}: binary file (NUL bytes), skipped")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        log.warning("%s: invalid UTF-8 at byte %d, decoded with replacement", name, exc.start)
        text = data.decode("utf-8", errors="replace")
    return text.removeprefix("\ufeff")


# The file may have been replaced since the walk listed it: never read through a symlink
# (its target may be anywhere) and never wait on a FIFO (opening one blocks until a writer).
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file itself; FileNotFoundError when it
    is gone, SourceError when it is something else (a symlink, a folder, a FIFO) or
    cannot be opened."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SourceError(f"{path.name}: a symlink, skipped") from None
        raise SourceError(f"{path.name}: cannot read ({exc.strerror or exc})") from exc
    fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        fh.close()
        raise SourceError(f"{path.name}: not a regular file, skipped")
    return fh


def read_bytes(path: Path, max_bytes: int) -> bytes:
    with open_regular(path) as fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            if size <= max_bytes:
                data = fh.read(max_bytes + 1)  # it may grow while we read
                size = len(data)
        except OSError as exc:
            raise SourceError(f"{path.name}: cannot read ({exc.strerror or exc})") from exc
    if size > max_bytes:
        raise SourceError(f"{path.name}: {size} bytes is over maxFileBytes ({max_bytes})")
    return data
