"""The values the search pipeline passes along (``pipeline.py``): what a search is given
(``Inputs``), what the plan stage decides (``Plan``), the one working value every stage reads
and fills (``Context``), and what a search answers (``Outcome``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Protocol

import numpy as np

from ..index.backend import SearchSource
from ..index.chunk_reads import Scope
from ..index.rows import ChunkRow
from ..settings import QuerySettings
from .calibrate import Background, Moments, Policy
from .fusion import Candidate
from .highlight import Highlight
from .request import SearchRequest, Term
from .results import SearchHit
from .vector import VectorSource


class Rerank(Protocol):
    """A reranker as a search sees it (``engine/reranking.py`` makes one per search): how many
    fused candidates it reads, how much of each, and one relevance per text (None: it failed,
    and the fused order stands)."""

    top_n: int
    max_chars: int

    def __call__(self, query: str, texts: Sequence[str]) -> list[float] | None: ...


@dataclass(frozen=True)
class Inputs:
    """One search as the pipeline is given it: where its candidates come from (``store``
    and ``vectors``: one index, or the team index with an editor's unsaved text,
    ``engine/team/sources.py``), the query's vector, the resolved request, the folder's query
    settings. ``reference``: the model's vectors of the calibration passages (calibrate.py),
    so even a tiny corpus gives each query a background to stand out from. ``rerank``: the
    reranker that reorders the best fused candidates (select.py), if any."""

    store: SearchSource
    vectors: VectorSource | None
    qvec: np.ndarray | None
    req: SearchRequest  # resolved
    qs: QuerySettings
    reference: np.ndarray | None = None
    rerank: Rerank | None = None
    today: date = field(default_factory=lambda: datetime.now(UTC).date())  # temporal decay's


@dataclass(frozen=True)
class KeywordPlan:
    """The keyword side's query: every term (coverage counts them all), their document
    frequencies among ``total`` chunks, the FTS5 expression of the terms searched, their
    postings, and the terms the postings budget left out (the backend may score them back)."""

    terms: tuple[Term, ...] = ()
    df: tuple[int, ...] = ()
    total: int = 0
    expr: str | None = None
    postings: int = 0
    left_out: str = ""

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(w for w, _ in self.terms)


@dataclass(frozen=True)
class Plan:
    mode: str  # "hybrid" | "keyword" | "vector"
    vector_side: bool  # a query vector to search with, and words it was made of
    pool: int  # candidates taken from each side
    keywords: KeywordPlan
    scope: Scope | None  # what the index can tell of the filters; None: no filter


@dataclass
class Context:
    """The one value the stages pass along: the inputs and plan, then what each stage finds."""

    inputs: Inputs
    plan: Plan
    cands: dict[int, Candidate] = field(default_factory=dict)  # retrieve: by chunk id
    bm25: dict[int, float] = field(default_factory=dict)  # retrieve: FTS5 rank by chunk id
    corpus: Moments | None = None  # retrieve: the corpus's cosines (the background)
    kept: list[tuple[Candidate, ChunkRow]] = field(default_factory=list)  # past the filters
    background: Background | None = None  # score: what the query's cosines stand out from
    policy: Policy = "off"
    closest: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    best_bm25: float = 0.0  # score: the best keyword match (FTS5 rank; 0.0: none)
    cover: float = 0.0  # ... and how much of the query it holds
    used_lines: bool = False  # whether cosines were re-scored by line vectors
    lift: float = 1.0
    scored: list[tuple[Candidate, ChunkRow]] = field(default_factory=list)  # select
    picked: list[tuple[Candidate, ChunkRow]] = field(default_factory=list)
    below: int = 0  # candidates under minScore's tail
    best_below: float = 0.0
    expired: int = 0  # select: expired notes left out (query.expired = exclude)
    fused: dict[int, float] = field(default_factory=dict)  # reranked: chunk id -> fused score
    marks: dict[int, Highlight] = field(default_factory=dict)  # chunk id -> best line, terms

    @property
    def explain(self) -> bool:
        return self.inputs.req.explain


@dataclass(frozen=True)
class Outcome:
    hits: list[SearchHit]
    mode: str  # "hybrid" | "keyword" | "vector"
    below_min_score: int = 0  # candidates that matched but scored under minScore
    best_below: float | None = None  # the best of those
    explain: dict[str, Any] | None = None  # the search's plan and stages, when asked
