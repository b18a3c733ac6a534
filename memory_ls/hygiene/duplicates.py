"""``duplicate``: a passage that says what an earlier passage already says.

Cheap first. Candidate pairs come from keys two passages share (``candidates``): their 5-word
shingles and pairs of their rarest words, found by sorting the keys of every passage at once
(a key held by more than ``MAX_GROUP`` passages is too common to point at a copy). Each pair is
then judged on its words (``judge``): the same words, most of the later one's shingles in the
earlier one, or most of its (IDF-weighted) words; a pair short of that but close is confirmed
by the index's line vectors when both have them. Precision first: a pair where one passage
names something the other does not (a number, a version, a name, an identifier) or where only
one is negated is never a duplicate, however close its words: "search runs Postgres 16" does
not repeat "billing runs Postgres 14".

The finding sits on the later copy (``Doc.order``) and points at the earlier one; adjacent
copies of one passage become one finding.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .corpus import Doc, LineVectors
from .findings import DUPLICATE, Finding, Related
from .passages import Passage, passages

SHINGLE = 5
RARE = 5  # a passage's rarest words, whose pairs are its keys
MAX_GROUP = 64
SAME_SHINGLES = 0.6  # of the later passage's shingles, in the earlier one
SAME_WORDS = 0.7  # weighted Jaccard of their words, without vectors
CONTAINED = 0.85  # of the later passage's weighted words, in the earlier one
CLOSE_WORDS = 0.3  # a pair this close is asked of the line vectors
COSINE = 0.8  # line vectors' cosine that confirms a close pair
RANK = {"verbatim": 0, "near": 1, "paraphrase": 2}


@dataclass(frozen=True)
class Match:
    later: int  # passage numbers, in order
    earlier: int
    how: str  # verbatim | near | paraphrase


def _keys(p: Passage, df: Counter[str]) -> Iterator[int]:
    yield hash(p.words)
    for i in range(len(p.words) - SHINGLE + 1):
        yield hash(p.words[i : i + SHINGLE])
    rare = sorted(p.stems, key=lambda w: (df[w], w))[:RARE]
    for a, b in itertools.combinations(sorted(rare), 2):
        yield hash((a, b))


def candidates(
    ps: list[Passage], df: Counter[str], later: set[int] | None = None
) -> set[tuple[int, int]]:
    """(earlier, later) pairs of passages that share a key; ``later``: only pairs whose later
    passage is one of these (a draft's)."""
    keys: list[int] = []
    owners: list[int] = []
    for n, p in enumerate(ps):
        ks = set(_keys(p, df))
        keys += ks
        owners += [n] * len(ks)
    k = np.array(keys, dtype=np.int64)
    o = np.array(owners, dtype=np.int64)
    order = np.argsort(k, kind="stable")
    k, o = k[order], o[order]
    bounds = np.flatnonzero(np.diff(k)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(k)]))
    pairs: set[tuple[int, int]] = set()
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        if not 2 <= e - s <= MAX_GROUP:
            continue
        members = sorted(set(o[s:e].tolist()))
        if later is None:
            pairs.update(itertools.combinations(members, 2))
        else:
            pairs.update((a, b) for b in members if b in later for a in members if a < b)
    return pairs


class Weights:
    def __init__(self, df: Counter[str], n: int):
        self.df, self.n = df, max(n, 1)

    def __call__(self, words: frozenset[str]) -> float:
        return sum(math.log(1 + self.n / max(self.df[w], 1)) for w in words)


def _shingles(p: Passage) -> set[tuple[str, ...]]:
    return {p.words[i : i + SHINGLE] for i in range(len(p.words) - SHINGLE + 1)}


def judge(later: Passage, earlier: Passage, weight: Weights) -> str | None:
    """verbatim / near / paraphrase, ``maybe`` (for the vectors to say), or None."""
    if later.words == earlier.words:
        return "verbatim"
    if later.negated != earlier.negated:
        return None
    held = set(earlier.words)
    if not later.specific <= held:  # the later one names something the earlier does not
        return None
    sh = _shingles(later)
    by_shingles = len(sh & _shingles(earlier)) / len(sh)
    common = later.stems & earlier.stems
    contained = weight(common) / max(weight(later.stems), 1e-9)
    if not earlier.specific <= set(later.words) and contained < CONTAINED:
        return None  # the earlier one names more: only a later part of it repeats it
    if by_shingles >= SAME_SHINGLES:
        return "near"
    jaccard = weight(common) / max(weight(later.stems | earlier.stems), 1e-9)
    if jaccard >= SAME_WORDS or (contained >= CONTAINED and len(later.stems) >= 4):
        return "paraphrase"
    return "maybe" if jaccard >= CLOSE_WORDS else None


def matches(
    docs: list[Doc], vectors: LineVectors | None, only: str | None = None
) -> list[tuple[int, Passage, Passage]]:
    """(its number, later, earlier) of every passage that repeats an earlier one, in order;
    ``only``: the later ones of that file alone."""
    ordered = sorted(docs, key=Doc.order)
    ps = [p for d in ordered for p in passages(d.path, d.lines)]
    df: Counter[str] = Counter()
    for p in ps:
        df.update(p.stems)
    weight = Weights(df, len(ps))
    found: dict[int, Match] = {}
    maybe: list[tuple[int, int]] = []
    mine = {n for n, p in enumerate(ps) if p.path == only} if only is not None else None
    for a, b in candidates(ps, df, mine):
        how = judge(ps[b], ps[a], weight)
        if how == "maybe":
            maybe.append((a, b))
        elif how is not None:
            _keep(found, Match(b, a, how))
    if maybe and vectors is not None:
        by_path = {d.path: d for d in docs}
        vectors.fetch(
            (by_path[ps[i].path], range(ps[i].start_line, ps[i].end_line + 1))
            for pair in maybe for i in pair
        )  # fmt: skip
        for a, b in maybe:
            cos = vectors.cosine(_lines(ps[b]), _lines(ps[a]))
            if cos is not None and cos >= COSINE:
                _keep(found, Match(b, a, "paraphrase"))
    return [(n, ps[m.later], ps[m.earlier]) for n, m in sorted(found.items())]


def _lines(p: Passage) -> tuple[str, range]:
    return p.path, range(p.start_line, p.end_line + 1)


def _keep(found: dict[int, Match], m: Match) -> None:
    """The best match of a passage: the closest, then the earliest."""
    old = found.get(m.later)
    if old is None or (RANK[m.how], m.earlier) < (RANK[old.how], old.earlier):
        found[m.later] = m


def findings(
    docs: list[Doc], vectors: LineVectors | None, severity: str, only: str | None = None
) -> list[Finding]:
    out: list[Finding] = []
    run: list[tuple[Passage, Passage]] = []

    def close() -> None:
        if run:
            out.append(_finding(run, severity, draft=only is not None))
            run.clear()

    last = -2
    for n, later, earlier in matches(docs, vectors, only):
        # The next passage of the same file, repeating the same file: one finding.
        if not (
            run
            and n == last + 1
            and (later.path, earlier.path) == (run[-1][0].path, run[-1][1].path)
        ):
            close()
        run.append((later, earlier))
        last = n
    close()
    return out


def _finding(run: list[tuple[Passage, Passage]], severity: str, draft: bool) -> Finding:
    first, last = run[0][0], run[-1][0]
    path = run[0][1].path
    start = min(e.start_line for _, e in run)
    end = max(e.end_line for _, e in run)
    where = Related(path, start, end)
    message = (
        f"already known at {where.citation}"
        if draft
        else f"says what {where.citation} already says"
    )
    return Finding(
        DUPLICATE, severity, first.path, first.start_line, last.end_line, message, [where]
    )
