"""Running the checks a workspace's settings turn on, over the index or a draft note."""

from __future__ import annotations

from datetime import date
from typing import Any

from ..index.backend import IndexBackend
from ..settings.hygiene import HygieneSettings
from .checks import caps_of
from .findings import CONFLICT, DUPLICATE, EXPIRED, FRONT_MATTER, LOAD_CAP, ORPHAN, Finding
from .incremental import Checker


def severities(settings: HygieneSettings) -> dict[str, str]:
    """The severity of each check that is on, by code."""
    each: dict[str, Any] = {
        DUPLICATE: settings.duplicate,
        CONFLICT: settings.conflict,
        LOAD_CAP: settings.load_cap,
        EXPIRED: settings.expired,
        FRONT_MATTER: settings.front_matter,
        ORPHAN: settings.orphan,
    }
    return {code: s.severity for code, s in each.items() if s.enabled}


def check_index(
    store: IndexBackend,
    settings: HygieneSettings,
    today: date | None = None,
    checker: Checker | None = None,
) -> list[Finding]:
    """Every finding over the memory files the index holds; ``checker``: the cache of an
    earlier check of this index (only the files changed since are read again)."""
    on, day = severities(settings), today or date.today()
    return (checker or Checker(caps_of(settings.load_cap))).check(store, on, day)


def check_draft(
    store: IndexBackend,
    settings: HygieneSettings,
    text: str,
    path: str,
    today: date | None = None,
    checker: Checker | None = None,
) -> list[Finding]:
    """The findings a note would cause if ``text`` were written to ``path`` (its copies of
    what memory already says, its front matter, a cap it would pass), all on the draft: the
    draft is later than everything, and stands in for the file at ``path`` if there is one."""
    day = today or date.today()
    ch = checker or Checker(caps_of(settings.load_cap))
    return ch.draft(store, severities(settings), text, path, day)
