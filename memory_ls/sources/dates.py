"""Dates of memory files: dated notes decay, evergreen files never do."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

from ..roots import MEMORY
from ..workspace import MEMORY_DIR, ROOT_FILES

_DATED = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


def file_date(rel_path: str, mtime: float, stated: str | None = None) -> date | None:
    """The date that drives temporal decay, or None for an evergreen file.

    ``memory/**/YYYY-MM-DD*.md`` is dated by its name; else the date its front matter states
    (``stated``, ISO: ``date: 2026-03-01``); else ``MEMORY.md``, ``memory.md`` and undated files
    under ``memory/`` are evergreen, and anything else (extra paths, transcripts) uses mtime.
    """
    if rel_path.startswith(MEMORY.prefix):  # memory.roots: every note is memory, as memory/**
        rel_path = f"{MEMORY_DIR}/{rel_path.partition('/')[2]}"
    name = rel_path.rsplit("/", 1)[-1]
    if stated and not (rel_path.startswith(MEMORY_DIR + "/") and _named(name)):
        return date.fromisoformat(stated)
    if rel_path in ROOT_FILES:
        return None
    if rel_path.startswith(MEMORY_DIR + "/") and rel_path.endswith(".md"):
        return _named(name)
    return datetime.fromtimestamp(mtime, UTC).date()


def _named(name: str) -> date | None:
    m = _DATED.match(name)
    if not m:
        return None
    try:
        return date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None
