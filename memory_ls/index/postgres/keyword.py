"""Keyword candidates in PostgreSQL, ranked by the same BM25 as FTS5.

``ts_rank`` has no IDF: a broad OR query would rank a chunk full of a common word above one with
the rare word the query is about. So BM25 (k1 1.2, b 0.75, FTS5's IDF) is computed here from
each matching chunk's term positions, with document frequencies counted through the GIN index
and cached for a few seconds. Ranks are negative, lower is better, like FTS5's ``bm25()``, so
the search layer normalises both backends' ranks the same way.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

import psycopg
from psycopg import errors, sql

from ...text import CJK_RUN
from ..term_counts import K1, B, parse_match
from .database import Session
from .migrations import TS_CONFIG
from .tokens import term_tokens

log = logging.getLogger(__name__)
EXACT_DF = 2000
# From this many of the namespace's chunks (by pg_stats' share of the table, when the
# namespace is most of it: ``_common``), a word's share stands for its count.
STATS_DF_FROM = 1000
# ... and from this many where the share cannot be far off: the rows it may wrongly hold (other
# namespaces' rows and those changed since ANALYZE) are at most MAX_DF_ERROR of the estimate.
# By default the statistics keep only lexemes in about 1,450 of 113,757 chunks or more; with
# the column's statistics target raised to 1000 by its owner (docs/guides/team.md: ten
# thousand lexemes, down to about 230 there), 200 new questions counted 179 words in 121 ms
# instead of 392 in 372.
BOUNDED_DF_FROM = 200
MAX_DF_ERROR = 0.25
# The namespace test is written so that no index on ns can serve it: the GIN index on tsv must
# drive keyword queries. A new namespace has no statistics yet, and the planner would otherwise
# walk every one of its chunks through the (ns, path) index, testing each tsvector.
IN_NAMESPACE = "ns || '' = %s"
SCORE_BUDGET = 1500  # chunks scored by one keyword search, when its rarer words allow
# Chunks a push writes before it merges GIN's pending list (a few hundred ms for a full one).
MERGE_AFTER = 100
MERGE_BUDGET_MS = 10_000
ZETA2 = math.pi**2 / 6
RANK_TF1 = 0.1 / ZETA2  # ts_rank of one occurrence


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def term_queries(
    store: Session, terms: Sequence[tuple[str, bool]]
) -> list[tuple[str, tuple[str, ...]]]:
    """(tsquery text, its lexemes) of each term, "" for a term with no words; cached."""
    db = store.db
    known = {t: db.terms[t] for t in terms if t in db.terms}
    todo = [t for t in dict.fromkeys(terms) if t not in known and not t[1]]
    if todo:
        texts = [" ".join(term_tokens(w)) for w, _ in todo]
        rows = store.q(
            f"SELECT phraseto_tsquery('{TS_CONFIG}', t)::text, "
            f"tsvector_to_array(to_tsvector('{TS_CONFIG}', t)) FROM unnest(%s::text[]) t",
            (texts,),
        ).fetchall()
        fresh = {t: (q or "", tuple(lex or ())) for t, (q, lex) in zip(todo, rows, strict=True)}
        known.update(fresh)
        with db.lock:
            if len(db.terms) > 10_000:  # a long-running server meets many words
                db.terms.clear()
            db.terms.update(fresh)
    out: list[tuple[str, tuple[str, ...]]] = []
    for term in terms:
        w, prefix = term
        if prefix:  # a single CJK character: every gram starting with it
            toks = term_tokens(w)
            out.append((f"{_quote(toks[0])}:*", (toks[0],)) if toks else ("", ()))
        else:
            out.append(known[term])
    return out


def totals(store: Session) -> tuple[int, float]:
    """The namespace's chunks and their average length, counted at most every STATS_SECONDS."""
    db = store.db
    t = db.totals
    if t is None or not db.fresh(t[2]):
        row = store.q(
            "SELECT count(*), coalesce(avg(len), 0) FROM memory_chunks WHERE ns = %s", (store.ns,)
        ).fetchone()
        assert row is not None  # an aggregate always has a row
        t = db.totals = (int(row[0]), float(row[1]), time.monotonic())
    return t[0], t[1]


def _common(store: Session) -> tuple[dict[str, float], float]:
    """Lexeme -> share of the table's chunks holding it, for the most common lexemes (the
    statistics ANALYZE keeps: a thousand, ten times that with the target at 1000), read at
    most every STATS_SECONDS, and how many rows a share times the namespace's chunks may be
    off by (other namespaces' rows and rows changed since ANALYZE). Empty while the namespace
    is under half the table (the shares are the whole table's, and other namespaces may use
    other words) or the statistics are out of reach (none yet, or row security on the table
    hides them)."""
    db = store.db
    c = db.common
    if c is None or not db.fresh(c[3]):
        row = store.q(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, t.reltuples, "
            "pg_stat_get_mod_since_analyze(t.oid) "
            "FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace LEFT JOIN pg_stats s "
            "ON s.schemaname = n.nspname AND s.tablename = t.relname AND s.attname = 'tsv' "
            "WHERE t.oid = to_regclass('memory_chunks')"
        ).fetchone()
        lexemes, freqs, table, changed = (
            (row[0] or [], row[1] or [], float(row[2]), float(row[3] or 0))
            if row
            else ([], [], 0, 0)
        )
        shares = dict(zip(lexemes, freqs, strict=False))
        c = db.common = (shares, table, changed, time.monotonic())
    chunks = totals(store)[0]
    if chunks < c[1] / 2:
        return {}, 0.0
    return c[0], max(0.0, c[1] - chunks) + c[2]


def _single_lexeme(tsq: str) -> str | None:
    """The lexeme of a tsquery of one word (``'lexem'``), None for phrases and prefixes."""
    body = tsq[1:-1] if len(tsq) > 2 and tsq[0] == tsq[-1] == "'" else ""
    return body.replace("''", "'") if body and "'" not in body.replace("''", "") else None


def _frequencies(store: Session, queries: Sequence[str]) -> list[int]:
    """Chunks of the namespace matching each tsquery: counted up to ``EXACT_DF`` (a rare word's
    IDF matters, and counting it is cheap), all in one statement; a word matching more gets the
    planner's estimate from the tsvector statistics, scaled to the namespace (its IDF is low,
    and counting 30,000 rows per query would cost more than the search). A word the statistics
    show in ``STATS_DF_FROM`` chunks or more (``BOUNDED_DF_FROM`` where the share cannot be far
    off) is not counted at all: a count visits a heap row per match (the namespace is in the
    heap) after building the bitmap of every posting."""
    db = store.db
    known = {q: db.df[q] for q in queries if q in db.df and db.fresh(db.df[q][1])}
    new = [q for q in dict.fromkeys(queries) if q not in known]
    if new:
        (common, slack), chunks, now = _common(store), totals(store)[0], time.monotonic()
        for tsq in new:
            share = common.get(_single_lexeme(tsq) or "")
            df = share * chunks if share is not None else 0.0
            if df >= STATS_DF_FROM or (df >= BOUNDED_DF_FROM and slack <= MAX_DF_ERROR * df):
                known[tsq] = (int(df), now)
    todo = [q for q in new if q not in known]
    if todo:
        rows = store.q(
            f"SELECT (SELECT count(*) FROM (SELECT 1 FROM memory_chunks WHERE {IN_NAMESPACE} "
            "AND tsv @@ t::tsquery LIMIT %s) m) FROM unnest(%s::text[]) WITH ORDINALITY u(t, i) "
            "ORDER BY i",
            (store.ns, EXACT_DF, todo),
        ).fetchall()
        now = time.monotonic()
        for tsq, (n,) in zip(todo, rows, strict=True):
            known[tsq] = (max(int(n), _estimate(store, tsq)) if n >= EXACT_DF else int(n), now)
    if new:
        with db.lock:
            if len(db.df) > 10_000:
                db.df.clear()
            db.df.update({q: known[q] for q in new})
    return [known[q][0] for q in queries]


def _estimate(store: Session, tsq: str) -> int:
    plan = store.q(
        sql.SQL(
            "EXPLAIN (FORMAT JSON) SELECT 1 FROM memory_chunks WHERE tsv @@ {}::tsquery"
        ).format(sql.Literal(tsq))
    ).fetchone()
    rows = float(plan[0][0]["Plan"]["Plan Rows"]) if plan else 0.0
    total = store.q("SELECT reltuples FROM pg_class WHERE oid = to_regclass('memory_chunks')")
    table = float(total.fetchone()[0] or 0)  # type: ignore[index]
    if table <= 0:
        return 0  # never analysed: no statistics to go by, count instead
    return int(rows * totals(store)[0] / table)


def doc_frequencies(store: Session, words: Sequence[str]) -> tuple[list[int], int]:
    terms = [(w, len(w) == 1 and bool(CJK_RUN.fullmatch(w))) for w in words]
    queries = [q for q, _ in term_queries(store, terms)]
    found = _frequencies(store, [q for q in queries if q])
    it = iter(found)
    return [next(it) if q else 0 for q in queries], totals(store)[0]


def _tf(rank: str, prefix: bool) -> str:
    """The term frequency behind ``ts_rank`` of a one-lexeme query over a tsvector without
    weights: that rank is 0.1 * sum(1/k^2, k = 1..tf) / (pi^2 / 6), so tf is read back from it
    (the tail of the sum after tf terms is about 1 / (tf + 1/2)); a prefix query adds one such
    rank per matching lexeme, counted as one occurrence each. Unlike unnesting every matching
    tsvector, this costs one decompression and a binary search per row and lexeme."""
    if prefix:
        return f"round({rank} / {RANK_TF1!r})"
    return f"round(1 / ({ZETA2!r} - {ZETA2 / 0.1!r} * {rank}) - 0.5)"


def _selective(dfs: Sequence[int]) -> list[int]:
    """The terms whose chunks are scored: the rarest ones, up to ``SCORE_BUDGET`` chunks (at
    least one term). A chunk holding only the query's common words is left out when rarer ones
    match enough chunks: scoring every chunk that holds a common word is what makes a broad
    query slow, and such a chunk rarely makes a keyword pool of 50 anyway."""
    order = sorted(range(len(dfs)), key=lambda i: dfs[i])
    out: list[int] = []
    total = 0
    for i in order:
        if out and total + dfs[i] > SCORE_BUDGET:
            break
        out.append(i)
        total += dfs[i]
    return out


def search(
    store: Session, expr: str, limit: int, only: Sequence[int] | None = None
) -> list[tuple[int, float]]:
    """(chunk id, -BM25) best first for an FTS5-style OR expression of quoted terms; among
    the chunks ``only`` when given (every word then finds chunks: they are few)."""
    terms = parse_match(expr)
    picked = [
        (q, lex, p) for (q, lex), (_, p) in zip(term_queries(store, terms), terms, strict=True) if q
    ]
    if not picked:
        return []
    n, avgdl = totals(store)
    dfs = _frequencies(store, [q for q, _, _ in picked])
    if max(dfs) > n:
        # The count of chunks is older than a word's (each is kept STATS_SECONDS): another
        # client pushed chunks between them. Counted again; never under a word's count.
        store.db.totals = None
        n, avgdl = totals(store)
        n = max(n, *dfs)
    params: dict[str, object] = {"ns": store.ns, "limit": limit}
    chosen = range(len(dfs)) if only is not None else _selective(dfs)
    params["tsq"] = " | ".join(f"( {picked[i][0]} )" for i in chosen)
    params["only"] = list(only) if only is not None else None
    tfs, score = [], []
    for i, ((_, lexemes, prefix), df) in enumerate(zip(picked, dfs, strict=True)):
        per_lexeme = []
        for j, lexeme in enumerate(lexemes):
            params[f"l{i}_{j}"] = _quote(lexeme) + (":*" if prefix else "")
            per_lexeme.append(_tf(f"ts_rank(tsv, %(l{i}_{j})s::tsquery)", prefix))
        tfs.append(f"least({', '.join(per_lexeme)}) AS t{i}")  # a phrase: its rarest word
        idf = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
        norm = f"{K1!r} * ({1 - B!r} + {B!r} * len / {max(avgdl, 1.0)!r})"
        score.append(f"{idf!r} * t{i} * {K1 + 1!r} / (t{i} + {norm})")
    rows = store.q(
        f"SELECT id, -({' + '.join(score)}) AS r FROM ("
        f"SELECT id, len, {', '.join(tfs)} FROM memory_chunks "
        f"WHERE {IN_NAMESPACE.replace('%s', '%(ns)s')} AND tsv @@ %(tsq)s::tsquery "
        + ("AND id = ANY(%(only)s) " if only is not None else "")
        + "OFFSET 0) m "  # OFFSET 0: rank each row once
        "ORDER BY r, id LIMIT %(limit)s",
        params,
    ).fetchall()
    return [(int(i), float(r)) for i, r in rows]


def merge_pending(store: Session, chunks: int) -> None:
    """Merge the GIN index's pending list into the index after a push of at least MERGE_AFTER
    ``chunks``. New entries wait in that list (up to 4 MB) until autovacuum comes by, and every
    keyword statement reads all of it: right after a sync of 57k chunks keyword p50 / p95 was
    19.5 / 44.5 ms, 14.2 / 32.1 with the merge (bench/pg_keyword.py). Only the table's owner
    may merge: another role says so in the log once per connection and leaves it to
    autovacuum. The merge is an optimisation, never a reason to leave the primary: one that
    fails or waits past its budget is skipped, unless the connection itself broke."""
    db = store.db
    if chunks < MERGE_AFTER or not db.may_merge:
        return
    try:
        with store.conn.transaction():
            store.q(f"SET LOCAL statement_timeout = {MERGE_BUDGET_MS}")
            store.q(f"SET LOCAL lock_timeout = {MERGE_BUDGET_MS // 10}")
            store.q("SELECT gin_clean_pending_list('memory_chunks_tsv'::regclass)")
    except errors.InsufficientPrivilege as exc:
        db.may_merge = False
        log.info("GIN pending list left to autovacuum: %s", exc.diag.message_primary)
    except psycopg.Error as exc:
        if store.conn.broken or store.conn.closed:
            raise
        log.warning("GIN pending list merge skipped: %s", exc)
