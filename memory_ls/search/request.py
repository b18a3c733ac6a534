"""The one shape of a search request, from the wire (LSP, MCP, CLI) down to the pipeline.

Parsed once where it enters; defaults come from a folder's settings in ``resolved`` (once per
folder, so each folder of a multi-root workspace applies its own ``maxResults``), and so does
the query text's one parse into words, filters and terms (``ParsedQuery``), which every stage
of the pipeline, the query's embedding and the reranker read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from ..settings import QuerySettings
from .query import Filters, parse_filters, query_terms

Term = tuple[str, bool]  # (word or CJK gram, is a prefix), as query_terms gives them

SOURCES = ("memory", "sessions")
MODES = ("auto", "hybrid", "keyword", "vector")
Mode = Literal["auto", "hybrid", "keyword", "vector"]
MAX_QUERY_CHARS = 2000
MAX_RESULTS_CAP = 1000


@dataclass(frozen=True)
class ParsedQuery:
    """A query text split once: ``words`` (what is embedded and matched: the text without its
    filters), ``filters`` (``file:``, ``after:``, ``before:``, ``source:``, ``+word``,
    ``-word``) and ``terms`` (the words as the index matches them: CJK as grams, capped)."""

    words: str
    filters: Filters
    terms: tuple[Term, ...]

    @classmethod
    def of(cls, query: str) -> ParsedQuery:
        words, filters = parse_filters(query)
        return cls(words, filters, tuple(query_terms(words)))


@dataclass(frozen=True)
class SearchRequest:
    query: str
    max_results: int | None = None  # None: the folder's query.maxResults
    min_score: float | None = None  # None: the folder's query.minScore
    sources: tuple[str, ...] | None = None
    path_prefix: str | None = None
    mode: Mode = "auto"
    folder: str | None = None  # LSP only: search one workspace folder (URI or path)
    explain: bool = False  # answer with each stage's part in every hit's score
    # set by ``resolved``: the query text parsed once
    parsed_query: ParsedQuery | None = field(default=None, compare=False, repr=False)

    def resolved(self, qs: QuerySettings) -> SearchRequest:
        """This request with every default filled in from ``qs`` and the query clamped."""
        query = self.query[:MAX_QUERY_CHARS]
        return dataclasses.replace(
            self,
            query=query,
            max_results=max(
                1, self.max_results if self.max_results is not None else qs.max_results
            ),
            min_score=self.min_score if self.min_score is not None else qs.min_score,
            sources=tuple(self.sources) if self.sources else None,
            path_prefix=self.path_prefix or None,
            parsed_query=ParsedQuery.of(query),
        )

    @property
    def parsed(self) -> ParsedQuery:
        """The query text of a resolved request, parsed."""
        assert self.parsed_query is not None, "resolve the request first"
        return self.parsed_query

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
