"""The checks over single files: ``expired`` and ``front-matter`` (front matter), ``load-cap``
(always-loaded files past an agent's cap) and ``orphan`` (topic files the index never links)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from datetime import date
from urllib.parse import unquote

from ..roots import MEMORY, split
from ..settings.hygiene import LoadCapSettings
from ..sources import frontmatter
from ..workspace import ROOT_FILES
from .corpus import Doc
from .findings import EXPIRED, FRONT_MATTER, LOAD_CAP, ORPHAN, Finding, Related


@dataclass(frozen=True)
class LoadCap:
    agent: str
    files: tuple[str, ...]  # paths of the files it loads, in the workspace or a memory root
    max_lines: int | None
    max_bytes: int | None
    source: str  # the documentation that states the cap


LOAD_CAPS = (
    # https://code.claude.com/docs/en/memory (Auto memory): "The first 200 lines of MEMORY.md,
    # or the first 25KB, whichever comes first, are loaded at the start of every conversation";
    # CLAUDE.md is loaded in full. 25KB is 25,000 bytes: Claude Code's own warning reads
    # "limit: 24.4KB" (KiB).
    LoadCap("Claude Code", ROOT_FILES, 200, 25_000, "https://code.claude.com/docs/en/memory"),
    # https://developers.openai.com/codex/guides/agents-md: Codex stops adding AGENTS.md text
    # once the combined size reaches project_doc_max_bytes, 32 KiB by default. memory-ls reads
    # only memory files: AGENTS.md is checked when the workspace indexes it (extraPaths), and
    # alone (the global ~/.codex/AGENTS.md counts against the same budget first).
    LoadCap("Codex", ("AGENTS.md",), None, 32 * 1024, "https://developers.openai.com/codex/guides/agents-md"),
)  # fmt: skip


def agent_path(key: str) -> str:
    """A note's path as its agent reads it: under memory.roots, relative to the root (its
    ``MEMORY.md`` is the agent's index: ``memory:claude-app/MEMORY.md`` -> ``MEMORY.md``)."""
    rooted = split(key) if key.startswith(MEMORY.prefix) else None
    return rooted[1] if rooted else key


def _below(path: str, base: str) -> bool:
    """True when ``path`` is in the folder ``base`` (the workspace's top: ``""``; a memory
    root's: ``memory:<name>``), at any depth."""
    return path.startswith(base + "/") if base else split(path) is None


def caps_of(settings: LoadCapSettings) -> tuple[LoadCap, ...]:
    """The documented caps and the user's (``hygiene.loadCap.caps``)."""
    mine = tuple(
        LoadCap(
            e.agent or "your agent",
            tuple(e.files),
            e.max_lines or None,
            e.max_bytes or None,
            e.source or "hygiene.loadCap.caps",
        )
        for e in settings.caps
        if e.files and (e.max_lines or e.max_bytes)
    )
    return LOAD_CAPS + mine


def load_cap(doc: Doc, severity: str, caps: tuple[LoadCap, ...] = LOAD_CAPS) -> list[Finding]:
    out = []
    for cap in caps:
        if agent_path(doc.path) not in cap.files:
            continue
        total = 0
        for n, line in enumerate(doc.lines, 1):
            total += len(line.encode("utf-8", "surrogatepass")) + 1
            over_lines = cap.max_lines is not None and n > cap.max_lines
            over_bytes = cap.max_bytes is not None and total > cap.max_bytes
            if over_lines or over_bytes:
                limit = f"{cap.max_lines} lines" if over_lines else f"{cap.max_bytes:,} bytes"
                out.append(
                    Finding(
                        LOAD_CAP,
                        severity,
                        doc.path,
                        n,
                        n,
                        f"{cap.agent} loads only the first {limit} of {doc.path}: this line and "
                        f"the ones below it are never in its context ({cap.source})",
                    )
                )
                break
        else:
            # A line the index holds in pieces only: the file's own size says it is over.
            if cap.max_bytes is not None and doc.size > cap.max_bytes and doc.cut:
                n = min(doc.cut)
                out.append(
                    Finding(
                        LOAD_CAP,
                        severity,
                        doc.path,
                        n,
                        n,
                        f"{cap.agent} loads only the first {cap.max_bytes:,} bytes of "
                        f"{doc.path}: it ends within this line or below it ({cap.source})",
                    )
                )
    return out


def front_matter(doc: Doc, today: date, severity: dict[str, str]) -> list[Finding]:
    """``front-matter`` (unreadable) and ``expired`` findings of one file; a check missing
    from ``severity`` is off."""
    fm = frontmatter.read(doc.lines, doc.cut)
    if fm is None:
        return []
    out: list[Finding] = []
    if fm.data is None:
        if FRONT_MATTER in severity:
            first, last = (fm.line, fm.line) if fm.line else (1, fm.end)
            message = fm.problem or ""
            out.append(
                Finding(FRONT_MATTER, severity[FRONT_MATTER], doc.path, first, last, message)
            )
        return out
    for key in frontmatter.EXPIRY_KEYS:
        if key not in fm.data:
            continue
        when = frontmatter.expiry(fm.data[key])
        line = frontmatter.key_line(doc.lines, fm.end, key) or 1
        if isinstance(when, str):
            if FRONT_MATTER in severity:
                message = f"{key}: {when}"
                out.append(
                    Finding(FRONT_MATTER, severity[FRONT_MATTER], doc.path, line, line, message)
                )
        elif when < today and EXPIRED in severity:
            days = (today - when).days
            message = f"expired on {when.isoformat()} ({key}), {days} days ago: update or remove it"
            out.append(Finding(EXPIRED, severity[EXPIRED], doc.path, 1, fm.end, message))
    return out


_MD_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?")
_BARE = re.compile(r"(?<![\w(/.-])((?:\.{0,2}/)?[\w.\-/%]+\.md)\b", re.IGNORECASE)


def linked(doc: Doc) -> set[str]:
    """The workspace-relative .md paths a file links to (Markdown links and bare paths),
    resolved from its folder."""
    base = posixpath.dirname(doc.path)
    out: set[str] = set()
    for line in doc.lines:
        targets = _MD_LINK.findall(line) + _BARE.findall(line)
        for t in targets:
            t = unquote(t.split("#", 1)[0])
            if not t.lower().endswith(".md") or "://" in t:
                continue
            out.add(posixpath.normpath(posixpath.join(base, t)).lstrip("/"))
    return out


def orphans(docs: list[Doc], severity: str) -> list[Finding]:
    """Topic files under an index file's folder it never links to, when it links at least
    one (else the folder does not keep topic files that way). Dated notes are logs, not topic
    files: an index is not expected to list them."""
    out = []
    for index in (d for d in docs if posixpath.basename(d.path) in ROOT_FILES):
        base = posixpath.dirname(index.path)
        under = [
            d for d in docs
            if d is not index and d.date is None and posixpath.basename(d.path) not in ROOT_FILES
            and _below(d.path, base)
        ]  # fmt: skip
        links = linked(index)
        if not any(d.path in links for d in under):
            continue
        for d in under:
            if d.path not in links:
                message = (
                    f"{index.path} never links to this file: an agent that loads only "
                    f"{index.path} (Claude Code) does not know it is there"
                )
                out.append(
                    Finding(ORPHAN, severity, d.path, 1, 1, message, [Related(index.path, 1, 1)])
                )
    return out
