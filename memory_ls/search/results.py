"""Plain result types shared by the engine, the server and the CLI, with their JSON shapes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The scheme of a file that only the team index has (its machine is another one): editors open
# it read-only through memory/get. The rest is the file URI the file would have here.
TEAM_SCHEME = "memory-ls"


def file_uri(root: Path, path: str, file: Path | None, remote: bool) -> str:
    uri = (file or root / path).as_uri()
    return TEAM_SCHEME + uri.removeprefix("file") if remote else uri


def line_span(start_line: int, end_line: int) -> tuple[int, int]:
    """The 0-based start line and exclusive end line covering 1-based inclusive lines
    start..end; never empty (an empty file or a reversed span still covers its first line)."""
    return max(0, start_line - 1), max(start_line, end_line)


def line_range(start_line: int, end_line: int) -> dict[str, Any]:
    """The LSP range (JSON) covering whole lines start..end (1-based inclusive)."""
    start, end = line_span(start_line, end_line)
    return {"start": {"line": start, "character": 0}, "end": {"line": end, "character": 0}}


def response_json(
    hits: Iterable[tuple[Path, SearchHit]], summary: SearchResponse
) -> dict[str, Any]:
    """A search result (``memory/search``, ``memory_search``, ``memory-ls search --json``) from
    ranked hits, each with the workspace folder it was found in; the rest from ``summary``
    (its own ``results`` are not read: the hits of several folders come ranked together)."""
    out: dict[str, Any] = {
        "results": [hit.to_json(root) for root, hit in hits],
        "mode": summary.mode,
        "provider": summary.provider,
        "tookMs": round(summary.took_ms, 2),
    }
    if summary.fallback_reason:
        out["fallbackReason"] = summary.fallback_reason
    if not out["results"] and (below := summary.why_empty()):
        out["belowMinScore"] = below  # nothing passed: how many fell short, and the best
    if summary.explain is not None:
        out["explain"] = summary.explain
    return out


@dataclass
class SearchHit:
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str
    citation: str
    vector_score: float | None = None
    text_score: float | None = None
    best_line: int | None = None  # the line best matching the query; None: start_line
    matched_terms: list[str] = field(default_factory=list)
    fused_score: float | None = None  # with a reranker: the fused score ``score`` replaced
    file: Path | None = None  # a transcript under sessions.roots: its file, outside ``root``
    remote: bool = False  # the file is not on this machine, only in the team index
    explain: dict[str, Any] | None = None  # each stage's part in the score, when asked

    def uri(self, root: Path) -> str:
        return file_uri(root, self.path, self.file, self.remote)

    def to_json(self, root: Path) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uri": self.uri(root),
            "path": self.path,
            "range": line_range(self.start_line, self.end_line),
            "startLine": self.start_line,
            "endLine": self.end_line,
            "score": round(self.score, 6),
            "snippet": self.snippet,
            "source": self.source,
            "citation": self.citation,
            "bestLine": self.start_line if self.best_line is None else self.best_line,
            "matchedTerms": self.matched_terms,
        }
        if self.vector_score is not None:
            out["vectorScore"] = round(self.vector_score, 6)
        if self.text_score is not None:
            out["textScore"] = round(self.text_score, 6)
        if self.fused_score is not None:
            out["fusedScore"] = round(self.fused_score, 6)
        if self.remote:
            out["remote"] = True
        if self.explain is not None:
            out["explain"] = self.explain
        return out


@dataclass
class SearchResponse:
    results: list[SearchHit]
    mode: str  # "hybrid" | "keyword" | "vector"
    provider: dict[str, str] | None
    fallback_reason: str | None = None
    took_ms: float = 0.0
    warnings: list[str] = field(default_factory=list)
    below_min_score: int = 0  # candidates that matched but scored under minScore
    best_below: float | None = None
    # with ``explain``: each searched folder's plan and stages (``search/present.py``)
    explain: list[dict[str, Any]] | None = None

    def why_empty(self) -> dict[str, Any] | None:
        """When nothing passed minScore: how many candidates fell short and the best score."""
        if self.results or not self.below_min_score or self.best_below is None:
            return None
        return {"count": self.below_min_score, "bestScore": round(self.best_below, 6)}

    def to_json(self, root: Path) -> dict[str, Any]:
        return response_json(((root, h) for h in self.results), self)


@dataclass
class Excerpt:
    path: str
    from_line: int
    to_line: int
    total_lines: int
    text: str
    file: Path | None = None  # a transcript under sessions.roots: its file, outside ``root``
    remote: bool = False  # read from the team index: the file is not on this machine

    def uri(self, root: Path) -> str:
        return file_uri(root, self.path, self.file, self.remote)

    def to_json(self, root: Path) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uri": self.uri(root),
            "path": self.path,
            "from": self.from_line,
            "to": self.to_line,
            "totalLines": self.total_lines,
            "text": self.text,
        }
        if self.remote:
            out["remote"] = True
        return out
