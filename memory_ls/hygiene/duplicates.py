"""``duplicate``: a passage that says what an earlier passage already says.

Cheap first. Candidate pairs come from keys two passages share (``keys``): their 5-word
shingles and pairs of their rarest words, found by sorting the keys of every passage at once
(a key held by more than ``MAX_GROUP`` passages is too common to point at a copy). Each pair is
then judged on its words (``judge``): the same words, most of the later one's shingles in the
earlier one, or most of its (IDF-weighted) words; a pair short of that but close is confirmed
by the index's line vectors when both have them. Precision first: a pair where one passage
names something the other does not (a number, a version, a name, an identifier) or where only
one is negated is never a duplicate, however close its words: "search runs Postgres 16" does
not repeat "billing runs Postgres 14".

The finding sits on the later copy (``Doc.order``) and points at the earlier one; adjacent
copies of one passage become one finding. Which pairs are judged, and the best match of each
passage, is kept up to date file by file in ``incremental.py``.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Mapping

from .findings import DUPLICATE, Finding, Related
from .passages import STOPWORDS, Passage, fold

SHINGLE = 5
RARE = 5  # a passage's rarest words, whose pairs are its keys
MAX_GROUP = 64
SAME_SHINGLES = 0.6  # of the later passage's shingles, in the earlier one
SAME_WORDS = 0.7  # weighted Jaccard of their words, without vectors
CONTAINED = 0.85  # of the later passage's weighted words, in the earlier one
CLOSE_WORDS = 0.3  # a pair this close is asked of the line vectors
COSINE = 0.8  # line vectors' cosine that confirms a close pair
RANK = {"verbatim": 0, "near": 1, "paraphrase": 2}
FILLER = 6  # fewer content words, and nothing named: "Your kind words really mean a lot."
COMPARABLE = 0.6  # content words of the shorter passage, of the longer one's: a part of it
ENOUGH = 12  # content words that make a shorter passage a claim of its own, contained or not


def keys(p: Passage, df: Mapping[str, int]) -> Iterator[int]:
    yield hash(p.words)
    for i in range(len(p.words) - SHINGLE + 1):
        yield hash(p.words[i : i + SHINGLE])
    rare = sorted(p.stems, key=lambda w: (df.get(w, 0), w))[:RARE]
    for a, b in itertools.combinations(sorted(rare), 2):
        yield hash((a, b))


class Weights:
    """IDF weights of words, each computed once (a check judges each word thousands of
    times: the sum of logs was two thirds of a check from scratch)."""

    def __init__(self, df: Mapping[str, int], n: int):
        self.df, self.n = df, max(n, 1)
        self.of: dict[str, float] = {}

    def __call__(self, words: frozenset[str]) -> float:
        of, total = self.of, 0.0
        for w in words:
            v = of.get(w)
            if v is None:
                v = of[w] = math.log(1 + self.n / max(self.df.get(w, 0), 1))
            total += v
        return total


def _shingles(p: Passage) -> set[tuple[str, ...]]:
    return {p.words[i : i + SHINGLE] for i in range(len(p.words) - SHINGLE + 1)}


def filler(p: Passage) -> bool:
    """A pleasantry, not a fact: too few content words, and nothing named but the person
    spoken to ("Thanks for always being there, Maria."; "We chose PostgreSQL for the ledger"
    names something). Said again, it is not memory written twice."""
    if p.content >= FILLER:
        return False
    spoken_to = {fold(m) for m in _VOCATIVE.findall(p.text)}
    # "I" and the "C." of "C. elegans" are capitals inside a sentence, not names.
    return not any(len(w) > 1 or w.isdigit() for w in p.specific - spoken_to)


# A name set off as the one spoken to: ", Maria!", "Hey Tom,", "Wow, Caroline, that's it".
_VOCATIVE = re.compile(
    r"(?:,\s*|^\s*(?:(?:[Hh]ey|[Hh]i|[Hh]ello|[Tt]hanks|[Tt]hank you|[Ww]ow|[Oo]h)\s+)?)"
    r"([A-Z][\w\-]*)\s*(?=[,.!?;]|$)"
)


def comparable(later: Passage, earlier: Passage) -> bool:
    """Whether the later passage may be judged "contained" in the earlier: about as long, or
    long enough to say something whole (a short sentence whose words sit in a long one, "the
    complications were similar" in a sentence listing what was measured, is not a copy)."""
    if later.content >= earlier.content:
        return True
    return later.content >= max(COMPARABLE * earlier.content, 1) or later.content >= ENOUGH


def judge(later: Passage, earlier: Passage, weight: Weights) -> str | None:
    """verbatim / near / paraphrase, ``maybe`` (for the vectors to say), or None."""
    if filler(later):  # what is flagged; an earlier short one can still be repeated at length
        return None
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
    part = comparable(later, earlier)  # else neither shingles nor words "contained" count
    if not earlier.specific <= set(later.words) and (contained < CONTAINED or not part):
        return None  # the earlier one names more: only a later part of it repeats it
    if by_shingles >= SAME_SHINGLES and part:
        return "near"
    jaccard = weight(common) / max(weight(later.stems | earlier.stems), 1e-9)
    if jaccard >= SAME_WORDS or (part and contained >= CONTAINED and len(later.stems) >= 4):
        return "paraphrase"
    return "maybe" if jaccard >= CLOSE_WORDS else None


_CAPITAL = re.compile(r"\b[A-Z][\w\-]*")


def capitals(p: Passage) -> frozenset[str]:
    """Its capitalised words but stop words ("The", "We"), folded: at a sentence's start too,
    where ``specific`` cannot tell a name ("Bob is pairing with Dana") from any first word."""
    return frozenset(w for m in _CAPITAL.findall(p.text) if (w := fold(m)) not in STOPWORDS)


def names_agree(later: Passage, earlier: Passage) -> bool:
    """For a pair whose words are only close (``maybe``), before the vectors confirm it: the
    later one's capitalised words are words of the earlier. The vectors take "Bob is pairing
    with Dana on the refund API" for "Dana is working on the refund API": a name apart. (Not
    the other way: the earlier one's first word, "Decided to cache ...", is no name.)"""
    return capitals(later) <= set(earlier.words)


def finding_of(run: list[tuple[Passage, Passage]], severity: str, draft: bool) -> Finding:
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
