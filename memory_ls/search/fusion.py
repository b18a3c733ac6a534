"""The formulas the pipeline scores with: BM25 normalisation, keyword coverage, weighted and
reciprocal-rank fusion, temporal decay, MMR and source balance (each a plain function)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

_TOKEN = re.compile(r"\w+", re.UNICODE)


def bm25_score(rank: float, best_rank: float) -> float:
    """FTS5 bm25() ranks are negative (better is more negative): score |rank| / |best rank|.

    ``1/(1+rank)`` on the raw value gave every hit 1.0 (OpenClaw PR #20994). Scaling by the
    query's best match keeps the order and lets the best keyword match reach 1.0 whatever the
    corpus size (absolute BM25 values are tiny in a small memory folder), so a perfect keyword
    hit can always pass minScore (OpenClaw #25183).
    """
    best = -best_rank
    if best <= 0:
        return 0.0
    return min(1.0, max(0.0, -rank) / best)


@dataclass
class Candidate:
    chunk_id: int
    vector: float | None = None  # cosine similarity, None when this chunk has no vector
    text: float = 0.0  # keyword score: text_rel x the query's keyword coverage
    text_rel: float = 0.0  # BM25 / the query's best BM25, 0 when no word matches
    vector_rank: int | None = None
    text_rank: int | None = None
    score: float = 0.0
    trace: dict[str, Any] | None = None  # each stage's figures, kept when a search explains

    def note(self, **figures: Any) -> None:
        """Keep figures for ``--explain`` (nothing when the search does not explain)."""
        if self.trace is not None:
            self.trace.update(figures)


# What the query's best keyword match scores at least, whatever its vector says: it always
# passes the default minScore (0.35), inside the "weak" band (< WEAK_BELOW) when the meaning
# does not stand out as well (OpenClaw #25183: 0.3 x a perfect keyword hit was dropped).
KEYWORD_ALONE = 0.4
WEAK_BELOW = 0.5


def fuse_weighted(c: Candidate, vector_weight: float, text_weight: float) -> float:
    """Weighted sum over the sides that exist for this chunk (a keyword hit on a chunk whose
    vector is not computed yet is scored by its keywords), never below KEYWORD_ALONE x text."""
    if c.vector is None:
        return max(c.text, KEYWORD_ALONE * c.text_rel)
    total = vector_weight + text_weight
    fused = (vector_weight * max(c.vector, 0.0) + text_weight * c.text) / total
    return max(fused, KEYWORD_ALONE * c.text_rel)


def coverage(
    matched: set[tuple[str, bool]], terms: Sequence[tuple[str, bool]], df: Sequence[int], total: int
) -> float:
    """The IDF-weighted share of the query's terms in ``matched`` (BM25's IDF)."""
    weights = [math.log(1 + (total - n + 0.5) / (n + 0.5)) for n in df]
    whole = sum(weights)
    if whole <= 0:
        return 1.0 if matched else 0.0
    return sum(w for t, w in zip(terms, weights, strict=True) if t in matched) / whole


def fuse_rrf(c: Candidate, k: int) -> float:
    """Reciprocal rank fusion, scaled so a chunk ranked first on both sides scores 1.0."""
    s = 0.0
    for rank in (c.vector_rank, c.text_rank):
        if rank is not None:
            s += 1.0 / (k + rank)
    return s / (2.0 / (k + 1))


def decay(score: float, file_date: str | None, today: date, half_life_days: float) -> float:
    if not file_date or half_life_days <= 0:
        return score  # evergreen
    try:
        age = (today - date.fromisoformat(file_date)).days
    except ValueError:
        return score
    return score * math.exp(-math.log(2) / half_life_days * max(age, 0))


def tokens(text: str) -> frozenset[str]:
    return frozenset(t.lower() for t in _TOKEN.findall(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def mmr(items: Sequence[tuple[float, str]], k: int, lam: float) -> list[int]:
    """Indices of ``items`` (relevance, text) chosen by maximal marginal relevance."""
    toks = [tokens(t) for _, t in items]
    chosen: list[int] = []
    left = list(range(len(items)))
    while left and len(chosen) < k:

        def value(i: int) -> tuple[float, int]:
            red = max((jaccard(toks[i], toks[j]) for j in chosen), default=0.0)
            return (lam * items[i][0] - (1 - lam) * red, -i)

        best = max(left, key=value)
        chosen.append(best)
        left.remove(best)
    return chosen


def balance_sources(order: Sequence[int], source_of: Callable[[int], str], k: int) -> list[int]:
    """The first k of ``order`` with no single source taking more than its share while other
    sources have candidates (a chatty transcript must not crowd out notes, OpenClaw #46570)."""
    sources = {source_of(i) for i in order}
    if len(sources) < 2:
        return list(order[:k])
    # At most 2/3 (rounded down: rounded up, 4 of 5 results or both of 2 were one source's).
    cap = max(1, k * 2 // 3)
    taken: dict[str, int] = {}
    out: list[int] = []
    spill: list[int] = []
    for i in order:
        s = source_of(i)
        if taken.get(s, 0) < cap:
            taken[s] = taken.get(s, 0) + 1
            out.append(i)
        else:
            spill.append(i)
        if len(out) == k:
            break
    out += spill[: k - len(out)]
    return out
