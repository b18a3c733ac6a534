"""Queries: keywords extracted (stop words of seven languages dropped), CJK as grams, safe
FTS5 MATCH expressions, and the filters people type into the query text.

How CJK is indexed (and so must be queried) is explained in ``memory_ls.text``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache

from stopwords import get_stopwords

from ..text import CJK_CHARS, CJK_RUN, cjk_grams

STOP_LANGUAGES = ("english", "chinese", "japanese", "korean", "spanish", "portuguese", "arabic")

# A word is a CJK run or a run of other letters and digits: CJK characters are \w too, and
# the index splits "Redis缓存" into "Redis" and the grams of "缓存" (text.fts_text), so the
# query must split it there as well (one token "redis缓存" matched nothing).
_LETTERS = rf"[^\W_{CJK_CHARS}]+"
_WORD = re.compile(rf"[{CJK_CHARS}]+|{_LETTERS}(?:['’]{_LETTERS})*", re.UNICODE)
MAX_QUERY_TERMS = 64


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    words: set[str] = set()
    for lang in STOP_LANGUAGES:
        words.update(w.strip().lower() for w in get_stopwords(lang) if w.strip())
    return frozenset(words)


def keywords(query: str) -> list[str]:
    """Content words of a query in order, lower-cased, stop words dropped, deduplicated.

    CJK runs come back whole (their stop characters are dealt with gram by gram); when every
    word is a stop word, the words themselves are kept (a search for "the who" still means
    something).
    """
    words = [w.lower() for w in _WORD.findall(query)]
    out: list[str] = []
    stops = stop_words()
    for w in words:
        if CJK_RUN.fullmatch(w):
            if w not in stops:
                out.append(w)
        elif w not in stops and (len(w) > 1 or w.isdigit()):
            out.append(w)
    if not out:
        out = [w for w in words if w]
    return list(dict.fromkeys(out))


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _content_gram(gram: str) -> bool:
    # Cutting a CJK run at every stop character would break words (无 in 战国无双), so only
    # grams made of nothing but stop characters (是由, です) are dropped.
    stops = stop_words()
    return gram not in stops and not all(ch in stops for ch in gram)


def query_terms(query: str) -> list[tuple[str, bool]]:
    """The terms to match: (word, is_prefix); CJK as grams, a single CJK char as a prefix."""
    terms: list[tuple[str, bool]] = []
    for w in keywords(query):
        if CJK_RUN.fullmatch(w):
            if len(w) == 1:
                terms.append((w, True))
            else:
                grams = [g for g in cjk_grams(w)[:-1] if _content_gram(g)]
                terms += [(g, False) for g in grams or cjk_grams(w)[:-1]]
        else:
            terms.append((w, False))
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]


def word_expression(word: str) -> str | None:
    """An FTS5 expression that a text matches when it holds ``word`` as the index would find
    it (stemmed, diacritics folded, a CJK run by its grams): every token of the word, stop
    words too (``+the`` asks for "the"). None for a word without letters (an emoji)."""
    terms: list[tuple[str, bool]] = []
    for w in _WORD.findall(word.lower()):
        if CJK_RUN.fullmatch(w):
            terms += [(w, True)] if len(w) == 1 else [(g, False) for g in cjk_grams(w)[:-1]]
        else:
            terms.append((w, False))
    return " AND ".join(match_expression([t]) or "" for t in terms) or None


def match_expression(terms: list[tuple[str, bool]]) -> str | None:
    """An OR query over the terms (BM25 ranks chunks matching more and rarer terms higher);
    every term is quoted, so FTS5 syntax in a query is just text."""
    parts = [_quote(w) + ("*" if prefix else "") for w, prefix in terms]
    return " OR ".join(parts) if parts else None


# The postings budget leaves out only words in more than this share of all chunks. The chunks
# holding a kept word still get their BM25 over the words left out (keyword_scan.py), so what
# a floor costs is the chunks that hold only such words. Scaled to SciFact (a budget of 200
# postings over its 7,477 chunks, the default's share at a million chunks) keyword nDCG@10 is
# 0.689 with 1%, 0.694 with 2%, 0.700 with no budget; at 1.1M synthetic chunks keyword p95 is
# 17-20 ms with 1% in most rounds (docs/evaluation/scale.md).
DROP_FLOOR = 0.01


def drop_common(
    terms: list[tuple[str, bool]],
    df: list[int],
    total: int,
    fraction: float,
    postings: int = 0,
) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """(kept, left out by the bound): the terms minus those in more than ``fraction`` of all
    chunks, unless that would leave none; then, while the kept words match more than
    ``postings`` chunks in all (0: no bound), the most common one of them is left out if it is
    in more than DROP_FLOOR (1%) of all chunks.

    FTS5 computes BM25 for every chunk matching any OR'ed term, so one very common word costs
    a pass over a large part of the index while adding almost nothing to the ranking (its
    IDF is near zero): dropping it is what keeps hybrid p95 flat as the index grows. At a
    million chunks a word in a fifth of them is 220,000 BM25 scores (about 130 ms) for an IDF
    of 1.5, beside words of IDF 5-6 that decide the ranking: hence the bound on postings.
    Words left out by the bound (not those over ``fraction``) are scored back for the chunks
    that hold a kept word (``index/keyword_scan.py``).
    """
    if total < 1000:  # small indexes are fast anyway, and frequencies there are noisy
        return terms, []
    limit = fraction * total
    kept = [(t, n) for t, n in zip(terms, df, strict=True) if t[1] or n <= limit]
    if not kept:
        return terms, []
    left_out = []
    while postings and len(kept) > 1 and sum(n for t, n in kept if not t[1]) > postings:
        common = max((k for k in kept if not k[0][1]), key=lambda k: k[1], default=None)
        if common is None or common[1] <= DROP_FLOOR * total:
            break
        kept.remove(common)
        left_out.append(common[0])
    return [t for t, _ in kept], left_out


_FILTER = re.compile(r"(?<!\S)(file|path|after|before|source|tag):(\S+)|(?<!\S)([+-])([^\s+-]\S*)")


@dataclass
class Filters:
    path_prefix: str | None = None
    after: str | None = None  # ISO dates, inclusive
    before: str | None = None
    sources: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # front matter tags, lowercased: all of them
    required: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)

    def active(self) -> bool:
        return bool(
            self.path_prefix
            or self.after
            or self.before
            or self.sources
            or self.tags
            or self.required
            or self.excluded
        )


def _is_date(value: str) -> bool:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:  # a month 13 kept every dated note out, and said nothing
        return False
    return True


def parse_filters(query: str) -> tuple[str, Filters]:
    """Split ``file:memory/ after:2026-01-01 tag:deploy +must -never words`` into words and
    filters."""
    f = Filters()

    def take(m: re.Match[str]) -> str:
        key, value, sign, word = m.groups()
        if key in ("file", "path"):
            f.path_prefix = value.removeprefix("./")
        elif key in ("after", "before"):
            if not _is_date(value):
                return m.group()  # not a date (2026-13-45 neither): leave the text as words
            setattr(f, key, value)
        elif key == "source":
            f.sources.append(value)
        elif key == "tag":
            f.tags.append(value.lstrip("#").lower())
        elif sign == "+":
            f.required.append(word.lower())
            return word
        else:
            f.excluded.append(word.lower())
        return " "

    rest = _FILTER.sub(take, query)
    return " ".join(rest.split()), f
