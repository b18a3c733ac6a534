"""BM25 of a few texts against another index's statistics, their words counted as FTS5 counts
them (Porter-stemmed, folded, CJK as grams): an editor's unsaved chunks scored on a team
index's scale (``engine/unsaved.py``), where the local index's own counts (one machine's files)
would give a word another weight than the team's, or none at all in a small folder.

The formula is FTS5's ``bm25()`` (and the PostgreSQL side's): for each term, its IDF
``log((N - df + 0.5) / (df + 0.5))`` (at least 1e-6) times ``tf (k1 + 1) / (tf + k1 (1 - b +
b len / avgdl))``, summed; returned negated, as ``bm25()`` ranks (lower is better).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..text import fts_text
from .schema import FTS_TOKENIZER, DatabaseError

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


def count_terms(
    conn: Any, texts: Mapping[int, str], terms: Sequence[tuple[str, bool]]
) -> tuple[dict[int, list[int]], dict[int, int]]:
    """(text id -> each term's occurrences in it, text id -> its length in tokens), tokenized
    by a connection-local FTS5 table with the index's tokenizer (a reader never writes the
    file). A term of several tokens counts as its rarest token in the text, a prefix term
    (``"限"*``) as every token it begins."""
    rows = [(cid, fts_text(t)) for cid, t in texts.items()]
    rows += [(-1 - i, w) for i, (w, _) in enumerate(terms)]  # query terms are already grams
    try:
        try:
            conn.executemany(_INSERT, rows)
        except DatabaseError:  # the connection's first time: made once, not on every search
            conn.executescript(_TABLES)
            conn.executemany(_INSERT, rows)
        found = conn.execute("SELECT doc, term FROM temp.scored_tokens").fetchall()
    finally:
        conn.execute("DELETE FROM temp.scored_text")
    per_text: dict[int, Counter[str]] = {cid: Counter() for cid in texts}
    term_tokens: list[list[str]] = [[] for _ in terms]
    for doc, token in found:
        if doc < 0:
            term_tokens[-1 - doc].append(token)
        else:
            per_text[doc][token] += 1
    tf: dict[int, list[int]] = {}
    for cid, counts in per_text.items():
        tf[cid] = [
            _occurrences(counts, tokens, prefix)
            for tokens, (_, prefix) in zip(term_tokens, terms, strict=True)
        ]
    return tf, {cid: sum(c.values()) for cid, c in per_text.items()}


def _occurrences(counts: Counter[str], tokens: list[str], prefix: bool) -> int:
    if not tokens:
        return 0
    if prefix:
        return sum(n for token, n in counts.items() if token.startswith(tokens[-1]))
    return min(counts[t] for t in tokens)


def bm25(tf: Sequence[int], length: int, df: Sequence[int], chunks: int, avgdl: float) -> float:
    """FTS5's ``bm25()`` rank of one text (negative; 0.0 when no term occurs)."""
    norm = K1 * (1 - B + B * length / max(avgdl, 1.0))
    score = 0.0
    for n, d in zip(tf, df, strict=True):
        if n:
            idf = max(math.log((chunks - d + 0.5) / (d + 0.5)), MIN_IDF)
            score += idf * n * (K1 + 1) / (n + norm)
    return -score
