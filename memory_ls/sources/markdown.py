"""Reading memory files from disk: bytes to text, with bad input reported, never fatal."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

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


def read_bytes(path: Path, max_bytes: int) -> bytes:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise SourceError(f"{path.name}: {size} bytes is over maxFileBytes ({max_bytes})")
        return path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise SourceError(f"{path.name}: cannot read ({exc.strerror or exc})") from exc
