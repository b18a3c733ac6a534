"""Citations in open documents (``memory/x.md#L3-L9``): resolved in the workspace folders, and
what the editor gets from them: definition, hover, document links and diagnostics.

Needs no running server: the folders, the buffer text (by URI) and the position codec are
given, so it is tested on real engines over a workspace on disk.
"""

from __future__ import annotations

import asyncio
import itertools
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from ..chunking import lsp_lines
from ..engine import MemoryEngine
from ..engine.excerpts import FileLines
from ..search.citations import Citation
from ..search.results import Excerpt
from ..sources import SourceError
from ..workspace import PathError
from . import convert
from .folder import FolderUnavailable
from .folders import Folders

# The most diagnostics a document gets: pygls turns each into JSON on the event loop (100,000
# bad citations held it for a second, every keystroke waiting), and VS Code shows 1,000 a
# file at most anyway.
MAX_DIAGNOSTICS = 1000


@dataclass
class CiteCheck:
    citation: Citation
    excerpt: Excerpt | None = None
    root: Path | None = None
    problem: str | None = None  # a diagnostic message, None when the citation is good
    missing: bool = False  # the file does not exist (vs. not memory: no diagnostic)


def check_citation(
    engine: MemoryEngine,
    cite: Citation,
    doc_dir: str | None,
    reads: dict[str, FileLines | PathError] | None = None,
) -> CiteCheck:
    """Resolve one citation in one engine (worker thread). Paths are workspace-relative;
    a path relative to the citing document's folder is tried second. ``reads``: the files
    this check has read so far (see ``MemoryEngine.get``)."""
    candidates = [cite.path]
    if doc_dir:
        rel = posixpath.normpath(posixpath.join(doc_dir, cite.path))
        if rel != cite.path and not rel.startswith("../"):
            candidates.append(rel)
    for path in candidates:
        try:
            ex = engine.get(path, cite.start, cite.end - cite.start + 1, reads=reads)
        except (PathError, SourceError, ValueError):
            continue
        out = CiteCheck(cite, ex, engine.root)
        if cite.start > ex.total_lines:
            out.problem = f"{cite}: line {cite.start} is past the end ({ex.total_lines} lines)"
        elif cite.end > ex.total_lines:
            out.problem = f"{cite}: lines past the end ({ex.total_lines} lines)"
        return out
    exists = any(_is_file(engine.workspace.file_path(p)) for p in candidates)
    return CiteCheck(
        cite, problem=None if exists else f"{cite.path}: no such memory file", missing=not exists
    )


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long for the file system: no such file
        return False


def _check_all(
    engine: MemoryEngine, cites: list[Citation], todo: list[int], doc_dir: str | None
) -> list[tuple[int, CiteCheck]]:
    """Check citations ``todo`` (indexes into ``cites``) in one engine, each distinct one once."""
    memo: dict[Citation, CiteCheck] = {}
    reads: dict[str, FileLines | PathError] = {}
    out = []
    for i in todo:
        c = cites[i]
        if c not in memo:
            memo[c] = check_citation(engine, c, doc_dir, reads)
        out.append((i, memo[c]))
    return out


class Citations:
    def __init__(
        self, folders: Folders, text_of: Callable[[str], str | None], codec: PositionCodec
    ):
        self.folders = folders
        self.text_of = text_of  # document URI -> its open buffer's text
        self.codec = codec

    async def check(self, doc_uri: str, cites: list[Citation]) -> list[CiteCheck]:
        """Resolve citations: in the citing document's folder first, then in the others."""
        hit = self.folders.locate(doc_uri)
        home, doc_dir = (hit[0], posixpath.dirname(hit[1])) if hit else (None, None)
        results: dict[int, CiteCheck] = {}
        todo = list(range(len(cites)))
        for folder in self.folders.home_first(home):
            if not todo:
                break
            try:
                async with folder.use() as engine:
                    checked = await folder.read(
                        _check_all, engine, cites, todo, doc_dir if folder is home else None
                    )
            except FolderUnavailable:
                continue
            left = []
            for i, chk in checked:
                if chk.excerpt is not None or i not in results:
                    results[i] = chk
                if chk.excerpt is None and chk.missing:
                    left.append(i)  # maybe another folder has it
            todo = left
        return [
            results.get(i) or CiteCheck(c, problem=f"{c.path}: no workspace folder", missing=True)
            for i, c in enumerate(cites)
        ]

    def _cite_at(self, text: str, pos: types.Position) -> tuple[types.Range, Citation] | None:
        lines = lsp_lines(text)
        if pos.line >= len(lines):
            return None
        col = self.codec.position_from_client_units(lines, pos).character
        found = convert.citation_at(lines[pos.line], col)
        if not found:
            return None
        start, end, cite = found
        return convert.span_range(lines, pos.line, start, end, self.codec), cite

    async def at(self, uri: str, pos: types.Position) -> tuple[types.Range, CiteCheck] | None:
        """The citation under the cursor, resolved, with its range in the document."""
        text = self.text_of(uri)
        if text is None:
            return None
        # In a thread: splitting a document of megabytes into lines takes milliseconds.
        found = await asyncio.to_thread(self._cite_at, text, pos)
        if not found:
            return None
        rng, cite = found
        (chk,) = await self.check(uri, [cite])
        return rng, chk

    async def definition(self, uri: str, pos: types.Position) -> list[types.Location] | None:
        found = await self.at(uri, pos)
        if not found or found[1].excerpt is None or found[1].root is None:
            return None
        return [convert.excerpt_location(found[1].root, found[1].excerpt)]

    async def hover(self, uri: str, pos: types.Position) -> types.Hover | None:
        found = await self.at(uri, pos)
        if not found:
            return None
        rng, chk = found
        if chk.excerpt is None:
            if chk.problem is None:
                return None
            return types.Hover(
                contents=types.MarkupContent(
                    kind=types.MarkupKind.Markdown, value=f"memory-ls: {chk.problem}"
                ),
                range=rng,
            )
        return convert.excerpt_hover(chk.excerpt, rng)

    async def links(self, uri: str) -> list[types.DocumentLink]:
        lines, spans = await _scan(self.text_of(uri))
        if not spans:
            return []
        checks = await self.check(uri, [s.citation for s in spans])
        return await asyncio.to_thread(
            lambda: [
                convert.citation_link(lines, s, chk.excerpt.uri(chk.root), self.codec)
                for s, chk in zip(spans, checks, strict=True)
                if chk.excerpt is not None and chk.root is not None
            ]
        )

    async def diagnostics(self, uri: str, text: str) -> list[types.Diagnostic]:
        """A warning for each citation of ``text`` (the document ``uri``) to a missing memory
        file or to lines past its end, the first ``MAX_DIAGNOSTICS`` of them."""
        lines, spans = await _scan(text)
        if not spans:
            return []
        checks = await self.check(uri, [s.citation for s in spans])
        bad = ((s, chk.problem) for s, chk in zip(spans, checks, strict=True) if chk.problem)
        return await asyncio.to_thread(
            lambda: [
                convert.citation_diagnostic(lines, s, problem, self.codec)
                for s, problem in itertools.islice(bad, MAX_DIAGNOSTICS)
            ]
        )


async def _scan(text: str | None) -> tuple[list[str], list[convert.CitationSpan]]:
    """A document's lines and citations, found off the event loop (with what is built from
    them): 50,000 citations take a fifth of a second to find and as long again to turn into
    diagnostics, which the editor's keystrokes would wait for."""
    if not text or "#L" not in text:
        return [], []

    def scan() -> tuple[list[str], list[convert.CitationSpan]]:
        lines = lsp_lines(text)
        return lines, list(convert.citation_spans(lines))

    return await asyncio.to_thread(scan)
