"""Running the checks a workspace's settings turn on, over the index or a draft note."""

from __future__ import annotations

from datetime import date
from typing import Any

from ..index.backend import IndexBackend
from ..settings.hygiene import HygieneSettings
from . import checks, duplicates
from .corpus import Doc, LineVectors, draft_doc, load_docs
from .findings import DUPLICATE, EXPIRED, FRONT_MATTER, LOAD_CAP, ORPHAN, Finding


def severities(settings: HygieneSettings) -> dict[str, str]:
    """The severity of each check that is on, by code."""
    each: dict[str, Any] = {
        DUPLICATE: settings.duplicate,
        LOAD_CAP: settings.load_cap,
        EXPIRED: settings.expired,
        FRONT_MATTER: settings.front_matter,
        ORPHAN: settings.orphan,
    }
    return {code: s.severity for code, s in each.items() if s.enabled}


def _run(
    docs: list[Doc],
    store: IndexBackend,
    settings: HygieneSettings,
    today: date,
    only: str | None = None,
) -> list[Finding]:
    on = severities(settings)
    out: list[Finding] = []
    for doc in docs:
        if only is not None and doc.path != only:
            continue
        if LOAD_CAP in on:
            out += checks.load_cap(doc, on[LOAD_CAP])
        out += checks.front_matter(doc, today, on)
    if ORPHAN in on:
        out += [f for f in checks.orphans(docs, on[ORPHAN]) if only in (None, f.path)]
    if DUPLICATE in on:
        out += duplicates.findings(docs, LineVectors(store), on[DUPLICATE], only)
    return sorted(out, key=lambda f: (f.path, f.start_line, f.code))


def check_index(
    store: IndexBackend, settings: HygieneSettings, today: date | None = None
) -> list[Finding]:
    """Every finding over the memory files the index holds."""
    return _run(load_docs(store), store, settings, today or date.today())


def check_draft(
    store: IndexBackend,
    settings: HygieneSettings,
    text: str,
    path: str,
    today: date | None = None,
) -> list[Finding]:
    """The findings a note would cause if ``text`` were written to ``path`` (its copies of
    what memory already says, its front matter, a cap it would pass), all on the draft: the
    draft is later than everything, and stands in for the file at ``path`` if there is one."""
    docs = [*load_docs(store, leave_out=path), draft_doc(path, text)]
    return _run(docs, store, settings, today or date.today(), only=path)
