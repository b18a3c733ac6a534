"""Keyword candidates in PostgreSQL, ranked by the same BM25 as FTS5.

``ts_rank`` has no IDF: a broad OR query would rank a chunk full of a common word above one with
the rare word the query is about. So BM25 (k1 1.2, b 0.75, FTS5's IDF) is computed here from
each matching chunk's term positions, with document frequencies counted through the GIN index
and cached for a few seconds. Ranks are negative, lower is better, like FTS5's ``bm25()``, so
the search layer normalises both backends' ranks the same way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...text import CJK_RUN
from .migrations import TS_CONFIG
from .tokens import parse_match, term_tokens

if TYPE_CHECKING:
    from .store import PgStore

K1, B = 1.2, 0.75


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def term_queries(
    store: PgStore, terms: Sequence[tuple[str, bool]]
) -> list[tuple[str, tuple[str, ...]]]:
    """(tsquery text, its lexemes) of each term, "" for a term with no words; cached."""
    db = store.db
    todo = [t for t in dict.fromkeys(terms) if t not in db.terms and not t[1]]
    if todo:
        texts = [" ".join(term_tokens(w)) for w, _ in todo]
        rows = store.q(
            f"SELECT phraseto_tsquery('{TS_CONFIG}', t)::text, "
            f"tsvector_to_array(to_tsvector('{TS_CONFIG}', t)) FROM unnest(%s::text[]) t",
            (texts,),
        ).fetchall()
        with db.lock:
            if len(db.terms) > 10_000:
                db.terms.clear()
            for term, (tsq, lexemes) in zip(todo, rows, strict=True):
                db.terms[term] = (tsq or "", tuple(lexemes or ()))
    out = []
    for term in terms:
        w, prefix = term
        if prefix:  # a single CJK character: every gram starting with it
            toks = term_tokens(w)
            out.append((f"{_quote(toks[0])}:*", (toks[0],)) if toks else ("", ()))
        else:
            out.append(db.terms[term])
    return out


def _totals(store: PgStore) -> tuple[int, float]:
    db = store.db
    t = db.totals
    if t is None or not db.fresh(t[2]):
        row = store.q(
            "SELECT count(*), coalesce(avg(len), 0) FROM memory_chunks WHERE ns = %s", (store.ns,)
        ).fetchone()
        t = db.totals = (int(row[0]), float(row[1]), time.monotonic())
    return t[0], t[1]


def _frequencies(store: PgStore, queries: Sequence[str]) -> list[int]:
    db = store.db
    out = []
    for tsq in queries:
        hit = db.df.get(tsq)
        if hit is None or not db.fresh(hit[1]):
            row = store.q(
                "SELECT count(*) FROM memory_chunks WHERE ns = %s AND tsv @@ %s::tsquery",
                (store.ns, tsq),
            ).fetchone()
            hit = db.df[tsq] = (int(row[0]) if row else 0, time.monotonic())
        out.append(hit[0])
    return out


def doc_frequencies(store: PgStore, words: Sequence[str]) -> tuple[list[int], int]:
    terms = [(w, len(w) == 1 and bool(CJK_RUN.fullmatch(w))) for w in words]
    queries = [q for q, _ in term_queries(store, terms)]
    found = _frequencies(store, [q for q in queries if q])
    it = iter(found)
    return [next(it) if q else 0 for q in queries], _totals(store)[0]


def search(store: PgStore, expr: str, limit: int) -> list[tuple[int, float]]:
    """(chunk id, -BM25) best first for an FTS5-style OR expression of quoted terms."""
    terms = parse_match(expr)
    picked = [
        (q, lex, p) for (q, lex), (_, p) in zip(term_queries(store, terms), terms, strict=True) if q
    ]
    if not picked:
        return []
    n, avgdl = _totals(store)
    dfs = _frequencies(store, [q for q, _, _ in picked])
    idf = [max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6) for df in dfs]
    lex, term_of, prefix = [], [], []
    for i, (_, lexemes, p) in enumerate(picked):
        for x in lexemes:
            lex.append(x)
            term_of.append(i)
            prefix.append(p)
    rows = store.q(
        """WITH q(lex, term, prefix) AS (SELECT * FROM unnest(%(lex)s::text[], %(term)s::int[],
                                                              %(prefix)s::bool[])),
             t(term, idf, need) AS (SELECT * FROM unnest(%(tids)s::int[], %(idf)s::float8[],
                                                         %(need)s::int[])),
             m AS (SELECT id, tsv, len FROM memory_chunks
                   WHERE ns = %(ns)s AND tsv @@ %(tsq)s::tsquery),
             tf AS (SELECT m.id, m.len, q.term, sum(cardinality(u.positions)) AS n
                    FROM m CROSS JOIN LATERAL unnest(m.tsv) AS u(lexeme, positions, weights)
                    JOIN q ON u.lexeme = q.lex OR (q.prefix AND starts_with(u.lexeme, q.lex))
                    GROUP BY m.id, m.len, q.term, q.lex),
             per_term AS (SELECT id, len, term, min(n) AS n, count(*) AS found
                          FROM tf GROUP BY id, len, term)
           SELECT p.id, -sum(t.idf * p.n * %(k1p1)s
                             / (p.n + %(k1)s * (1 - %(b)s + %(b)s * p.len / %(avgdl)s))) AS r
           FROM per_term p JOIN t ON t.term = p.term AND p.found >= t.need
           GROUP BY p.id ORDER BY r, p.id LIMIT %(limit)s""",
        {
            "lex": lex,
            "term": term_of,
            "prefix": prefix,
            "tids": list(range(len(picked))),
            "idf": idf,
            "need": [1 if p else len(lexemes) for _, lexemes, p in picked],
            "ns": store.ns,
            "tsq": " | ".join(f"( {q} )" for q, _, _ in picked),
            "k1": K1,
            "k1p1": K1 + 1,
            "b": B,
            "avgdl": max(avgdl, 1.0),
            "limit": limit,
        },
    ).fetchall()
    return [(int(i), float(r)) for i, r in rows]
