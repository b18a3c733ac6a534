"""Engine results -> LSP types and JSON, in one place.

Ranges of hits and excerpts cover whole lines (character 0), so they need no position
encoding. Columns inside a line (citations, headings) are given in code points by the caller's
text and converted here with the client's ``PositionCodec`` (UTF-16 by default).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from ..search.citations import Citation, find_citations, format_citation
from ..search.results import Excerpt, SearchHit, SearchResponse, line_span, response_json

HOVER_MAX_LINES = 40
HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def whole_lines(start_line: int, end_line: int) -> types.Range:
    """The LSP range covering 1-based inclusive lines start..end (the one ``line_span``)."""
    start, end = line_span(start_line, end_line)
    return types.Range(
        start=types.Position(line=start, character=0), end=types.Position(line=end, character=0)
    )


# -- memory/search ---------------------------------------------------------------------------
def rank_hits(answers: Sequence[tuple[Path, SearchResponse]]) -> list[tuple[Path, SearchHit]]:
    """The hits of several workspace folders in one ranking.

    Scores are comparable across folders (same fusion, same normalisation), so the merge is by
    score; ties keep folder order, then each folder's own rank, so the order is deterministic.
    """
    ranked: list[tuple[float, int, int, Path, SearchHit]] = []
    for fi, (root, resp) in enumerate(answers):
        for ri, hit in enumerate(resp.results):
            ranked.append((-hit.score, fi, ri, root, hit))
    ranked.sort(key=lambda t: t[:3])
    return [(root, hit) for *_, root, hit in ranked]


def merge_search(
    answers: Sequence[tuple[Path, SearchResponse]], max_results: int, took_ms: float
) -> dict[str, Any]:
    """One ``memory/search`` result from the answers of several workspace folders."""
    ranked = rank_hits(answers)[:max_results]
    modes = {resp.mode for _, resp in answers}
    mode = modes.pop() if len(modes) == 1 else ("hybrid" if "hybrid" in modes else "keyword")
    reasons = list(dict.fromkeys(r.fallback_reason for _, r in answers if r.fallback_reason))
    below = [r for _, r in answers if r.why_empty()]  # every folder empty: the sum, the best
    explained = [e for _, r in answers for e in r.explain or ()]
    summary = SearchResponse(
        results=[],
        mode=mode or "keyword",
        provider=next((resp.provider for _, resp in answers if resp.provider), None),
        fallback_reason="; ".join(reasons) or None,
        took_ms=took_ms,
        below_min_score=sum(r.below_min_score for r in below),
        best_below=max((r.best_below or 0.0 for r in below), default=None),
        explain=explained if any(r.explain is not None for _, r in answers) else None,
    )
    return response_json(ranked, summary)


# -- workspace/symbol ------------------------------------------------------------------------
def symbol_name(snippet: str) -> tuple[str, bool]:
    """(the first heading, else the first non-empty line; whether it was a heading)."""
    first = ""
    for line in snippet.splitlines():
        m = HEADING_RE.match(line)
        if m and m.group(2):
            return m.group(2).strip(), True
        if not first and line.strip():
            first = line.strip()
    name = first or "(empty)"
    return (name[:117] + "...") if len(name) > 120 else name, False


def hit_symbol(root: Path, hit: SearchHit) -> types.WorkspaceSymbol:
    name, heading = symbol_name(hit.snippet)
    return types.WorkspaceSymbol(
        name=name,
        kind=types.SymbolKind.Namespace if heading else types.SymbolKind.String,
        container_name=hit.citation,
        location=types.Location(uri=hit.uri(root), range=whole_lines(hit.start_line, hit.end_line)),
    )


# -- citations -------------------------------------------------------------------------------
@dataclass(frozen=True)
class CitationSpan:
    line: int  # 0-based
    start: int  # code points
    end: int
    citation: Citation


def citation_spans(lines: Sequence[str]) -> Iterator[CitationSpan]:
    for i, line in enumerate(lines):
        if "#L" not in line:  # cheap pre-filter: most lines cite nothing
            continue
        for start, end, cite in find_citations(line):
            yield CitationSpan(i, start, end, cite)


def citation_at(line: str, column: int) -> tuple[int, int, Citation] | None:
    """The citation under ``column`` (code points) in ``line``, inclusive of its end."""
    for start, end, cite in find_citations(line):
        if start <= column <= end:
            return start, end, cite
    return None


def span_range(
    lines: Sequence[str], line: int, start: int, end: int, codec: PositionCodec
) -> types.Range:
    text = lines[line] if line < len(lines) else ""
    return types.Range(
        start=types.Position(line=line, character=codec.client_num_units(text[:start])),
        end=types.Position(line=line, character=codec.client_num_units(text[:end])),
    )


def excerpt_location(root: Path, ex: Excerpt) -> types.Location:
    # A citation past the end of its file goes to the last line: a client puts its cursor at the
    # range's start (Neovim failed with "Cursor position outside buffer").
    last = max(ex.total_lines, 1)
    start = min(ex.from_line, last)
    return types.Location(uri=ex.uri(root), range=whole_lines(start, min(ex.to_line, last)))


def excerpt_hover(ex: Excerpt, rng: types.Range | None) -> types.Hover:
    lines = ex.text.split("\n")
    cut = len(lines) > HOVER_MAX_LINES
    body = "\n".join(lines[:HOVER_MAX_LINES])
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)  # a fence longer than any backtick run inside
    lang = "json" if ex.path.endswith(".jsonl") else "markdown"
    title = format_citation(ex.path, ex.from_line, max(ex.from_line, ex.to_line))
    more = f"\n\n... {len(lines) - HOVER_MAX_LINES} more lines" if cut else ""
    value = (
        f"**{title}** (lines {ex.from_line}-{max(ex.from_line, ex.to_line)} "
        f"of {ex.total_lines})\n\n{fence}{lang}\n{body}\n{fence}{more}"
    )
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value), range=rng
    )


def citation_link(
    lines: Sequence[str], span: CitationSpan, target_uri: str, codec: PositionCodec
) -> types.DocumentLink:
    c = span.citation
    # VS Code opens file#L3-L9 at those lines; other clients ignore the fragment.
    return types.DocumentLink(
        range=span_range(lines, span.line, span.start, span.end, codec),
        target=f"{target_uri}#L{c.start}" + (f"-L{c.end}" if c.end != c.start else ""),
        tooltip=f"Open {c}",
    )


def citation_diagnostic(
    lines: Sequence[str], span: CitationSpan, message: str, codec: PositionCodec
) -> types.Diagnostic:
    return types.Diagnostic(
        range=span_range(lines, span.line, span.start, span.end, codec),
        message=message,
        severity=types.DiagnosticSeverity.Warning,
        source="memory-ls",
        code="citation",
    )


# -- textDocument/documentSymbol -------------------------------------------------------------
def heading_symbols(lines: Sequence[str], codec: PositionCodec) -> list[types.DocumentSymbol]:
    """Markdown ATX headings as a tree; a section runs until the next heading of its level."""
    found: list[tuple[int, int, str]] = []  # (line, level, title)
    fence: str | None = None
    for i, line in enumerate(lines):
        m = FENCE_RE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        if fence is not None or "#" not in line[:4]:
            continue
        h = HEADING_RE.match(line.rstrip("\r\n"))
        if h and h.group(2):
            found.append((i, len(h.group(1)), h.group(2).strip()))

    n = len(lines)
    # Where each section ends: the next heading of its level or higher, found in one pass (a
    # scan ahead per heading was quadratic: 100,000 headings took 20 s on the event loop).
    ends = [n] * len(found)
    open_: list[int] = []  # headings whose section is still open, levels increasing
    for idx, (row, level, _) in enumerate(found):
        while open_ and found[open_[-1]][1] >= level:
            ends[open_.pop()] = row
        open_.append(idx)
    roots: list[types.DocumentSymbol] = []
    stack: list[tuple[int, types.DocumentSymbol]] = []
    for idx, (row, level, title) in enumerate(found):
        last = max(row, ends[idx] - 1)
        text = lines[row].rstrip("\r\n")
        sym = types.DocumentSymbol(
            name=title,
            detail="#" * level,
            kind=types.SymbolKind.String,
            range=types.Range(
                start=types.Position(line=row, character=0),
                end=types.Position(
                    line=last,
                    character=codec.client_num_units(lines[last].rstrip("\r\n")) if last < n else 0,
                ),
            ),
            selection_range=types.Range(
                start=types.Position(line=row, character=0),
                end=types.Position(line=row, character=codec.client_num_units(text)),
            ),
            children=[],
        )
        while stack and stack[-1][0] >= level:
            stack.pop()
        (stack[-1][1].children if stack else roots).append(sym)  # type: ignore[union-attr]
        stack.append((level, sym))
    return roots
