"""The one shape of a search request, from the wire (LSP, MCP, CLI) down to ``hybrid.run``.

Parsed once where it enters; defaults come from a folder's settings in ``resolved`` (once per
folder, so each folder of a multi-root workspace applies its own ``maxResults``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from ..settings import QuerySettings

SOURCES = ("memory", "sessions")
MODES = ("auto", "hybrid", "keyword", "vector")
Mode = Literal["auto", "hybrid", "keyword", "vector"]
MAX_QUERY_CHARS = 2000
MAX_RESULTS_CAP = 1000


@dataclass(frozen=True)
class SearchRequest:
    query: str
    max_results: int | None = None  # None: the folder's query.maxResults
    min_score: float | None = None  # None: the folder's query.minScore
    sources: tuple[str, ...] | None = None
    path_prefix: str | None = None
    mode: Mode = "auto"
    folder: str | None = None  # LSP only: search one workspace folder (URI or path)

    def resolved(self, qs: QuerySettings) -> SearchRequest:
        """This request with every default filled in from ``qs`` and the query clamped."""
        return dataclasses.replace(
            self,
            query=self.query[:MAX_QUERY_CHARS],
            max_results=max(
                1, self.max_results if self.max_results is not None else qs.max_results
            ),
            min_score=self.min_score if self.min_score is not None else qs.min_score,
            sources=tuple(self.sources) if self.sources else None,
            path_prefix=self.path_prefix or None,
        )

    @property
    def limit(self) -> int:
        """``max_results`` of a resolved request."""
        assert self.max_results is not None, "resolve the request first"
        return self.max_results

    @property
    def threshold(self) -> float:
        """``min_score`` of a resolved request."""
        assert self.min_score is not None, "resolve the request first"
        return self.min_score
