"""BM25 of a few texts against another index's statistics, their words counted as FTS5 counts
them (Porter-stemmed, folded, CJK as grams): an editor's unsaved chunks scored on a team
index's scale (``engine/team/unsaved.py``), where the local index's own counts (one machine's files)
would give a word another weight than the team's, or none at all in a small folder.

The formula is FTS5's ``bm25()`` (and the PostgreSQL side's): for each term, its IDF
``log((N - df + 0.5) / (df + 0.5))`` (at least 1e-6) times ``tf (k1 + 1) / (tf + k1 (1 - b +
b len / avgdl))``, summed; returned negated, as ``bm25()`` ranks (lower is better).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ..text import fts_text
from .schema import FTS_TOKENIZER, DatabaseError

K = TypeVar("K", bound=Hashable)
K1, B = 1.2, 0.75
MIN_IDF = 1e-6
_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.scored_text USING fts5("
    f"  t, tokenize = '{FTS_TOKENIZER}');"
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.scored_tokens USING fts5vocab("
    "  'temp', 'scored_text', 'instance');"
)
_INSERT = "INSERT INTO temp.scored_text(rowid, t) VALUES (?, ?)"


def parse_match(expr: str) -> list[tuple[str, bool]]:
    """The terms of a MATCH expression built by ``search.query.match_expression``:
    ``"a" OR "b c" OR "限"*`` -> [("a", False), ("b c", False), ("限", True)]."""
    return [
        (m.group(1).replace('""', '"'), bool(m.group(2)))
        for m in re.finditer(r'"((?:[^"]|"")*)"(\*?)', expr)
    ]


def tokenize(conn: Any, texts: Mapping[K, str]) -> dict[K, Counter[str]]:
    """Each text's tokens and how often each occurs, as the index's tokenizer makes them (a
    connection-local FTS5 table: a reader never writes the file). Texts as FTS5 stores them:
    ``fts_text`` of a document, a query term as it is (its CJK grams are made)."""
    keys = list(texts)
    rows = [(i, t) for i, t in enumerate(texts.values(), start=1)]
    try:
        try:
            conn.executemany(_INSERT, rows)
        except DatabaseError:  # the connection's first time: made once, not on every search
            conn.executescript(_TABLES)
            conn.executemany(_INSERT, rows)
        found = conn.execute("SELECT doc, term FROM temp.scored_tokens").fetchall()
    finally:
        conn.execute("DELETE FROM temp.scored_text")
    out: dict[K, Counter[str]] = {k: Counter() for k in keys}
    for doc, token in found:
        out[keys[doc - 1]][token] += 1
    return out


def frequencies(
    counts: Counter[str], term_tokens: Sequence[Iterable[str]], terms: Sequence[tuple[str, bool]]
) -> list[int]:
    """Each term's occurrences in a text of ``counts``: a term of several tokens as its
    rarest token there, a prefix term (``"限"*``) as every token it begins."""
    out = []
    for tokens, (_, prefix) in zip(term_tokens, terms, strict=True):
        toks = list(tokens)
        if not toks:
            out.append(0)
        elif prefix:
            out.append(sum(n for token, n in counts.items() if token.startswith(toks[-1])))
        else:
            out.append(min(counts[t] for t in toks))
    return out


def count_terms(
    conn: Any, texts: Mapping[int, str], terms: Sequence[tuple[str, bool]]
) -> tuple[dict[int, list[int]], dict[int, int]]:
    """(text id -> each term's occurrences in it, text id -> its length in tokens)."""
    counts = tokenize(conn, {cid: fts_text(t) for cid, t in texts.items()})
    term_tokens = tokenize(conn, dict(enumerate(w for w, _ in terms))).values()
    tf = {cid: frequencies(c, list(term_tokens), terms) for cid, c in counts.items()}
    return tf, {cid: sum(c.values()) for cid, c in counts.items()}


def bm25(tf: Sequence[int], length: int, df: Sequence[int], chunks: int, avgdl: float) -> float:
    """FTS5's ``bm25()`` rank of one text (negative; 0.0 when no term occurs)."""
    norm = K1 * (1 - B + B * length / max(avgdl, 1.0))
    score = 0.0
    for n, d in zip(tf, df, strict=True):
        if n:
            idf = max(math.log((chunks - d + 0.5) / (d + 0.5)), MIN_IDF)
            score += idf * n * (K1 + 1) / (n + norm)
    return -score
