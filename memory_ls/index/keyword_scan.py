"""FTS5 BM25 search; a query matching many chunks is split by rowid range over the cores.

FTS5 scores every row that matches (BM25 needs each row's length: a B-tree lookup per row,
about 0.6 µs here), so a query whose words are in 50,000 of a million chunks costs 35-40 ms
on one core. The IDFs, the row count and the average length that BM25 uses come from the
whole table whatever rowid range a query asks for, so the best rows of each range carry the
same scores as in one query over all of it, and the best of the ranges' best is exactly that
query's answer. Each range runs on a connection of its own: SQLite releases the GIL while it
steps, so the ranges run at the same time.

The connections of one search may read different snapshots when a write commits meanwhile,
as the separate statements of a search already may: then BM25's table-wide figures may differ
slightly from one range to the next. The ranges never overlap, and the first and last are
open-ended, so a chunk re-inserted under a new id meanwhile is still in one of them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from ..embeddings.threads import MAX_THREADS, usable_cores
from .schema import Connection, connect

# Postings (the chunks matching each query word, summed) per range: below about this many, a
# thread hop costs more than the range saves.
SPLIT_FROM = 2_000

# rowid breaks ties, so a split gives the same order as one range over all.
_RANGE = (
    "SELECT rowid, bm25(chunks_fts) AS r FROM chunks_fts WHERE chunks_fts MATCH ? "
    "AND rowid BETWEEN ? AND ? ORDER BY r, rowid LIMIT ?"
)
# One pass over the ids' range; "+rowid": an IN list handed to FTS5 runs the query once per id,
# each run counting every phrase's rows again for its IDF (70 ms for 775 ids at 100k chunks,
# against 0.5 ms like this; bench/filtered.py).
_WITHIN = (
    "SELECT rowid, bm25(chunks_fts) AS r FROM chunks_fts WHERE chunks_fts MATCH ? "
    "AND rowid BETWEEN ? AND ? AND +rowid IN (SELECT value FROM json_each(?)) "
    "ORDER BY r, rowid LIMIT ?"
)
# Two subqueries: SQLite reads min() or max() off the end of the B-tree only when it is alone.
ID_BOUNDS = "SELECT (SELECT min(rowid) FROM chunks), (SELECT max(rowid) FROM chunks)"
_PARTS = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="memory-ls-keyword")

Row = tuple[int, float]
_FIRST, _LAST = -(2**63), 2**63 - 1  # SQLite's rowid range


class KeywordScan:
    """The BM25 search of one store connection, with its own extra connections for ranges."""

    def __init__(self, conn: Connection, path: Path, cores: int | None = None):
        self.conn = conn
        self.path = path
        self.cores = min(cores or usable_cores(), MAX_THREADS)
        self._siblings: list[Connection] = []

    def search(self, expr: str, limit: int, postings: int = 0, left_out: str = "") -> list[Row]:
        """(chunk id, bm25 rank) best first (ranks are negative, lower is better).

        ``postings``: how many chunks the query's words are in, summed (0: unknown); it
        decides how many ranges the search is split into. ``left_out``: an OR expression of
        words the query also had, left out of ``expr`` because scoring every chunk holding
        them costs too much (see ``search.query.drop_common``); the chunks that hold one of
        ``expr``'s words get their BM25 over the whole query (see ``_with_left_out``)."""
        rows = self._search(expr, limit, postings)
        return _with_left_out(self.conn, rows, expr, left_out, limit) if left_out else rows

    def _search(self, expr: str, limit: int, postings: int) -> list[Row]:
        parts = min(self.cores, postings // SPLIT_FROM)
        if parts > 1:
            lo, hi = self.conn.execute(ID_BOUNDS).fetchone()
            if lo is not None and hi - lo >= parts:
                return self._split(expr, limit, lo, hi + 1, parts)
        return _range(self.conn, expr, _FIRST, _LAST, limit)

    def search_within(self, expr: str, ids: Sequence[int], limit: int) -> list[Row]:
        """``search`` among the chunks ``ids`` only (BM25's statistics stay the table's)."""
        if not ids:
            return []
        wanted = [int(i) for i in ids]
        return self.conn.execute(
            _WITHIN, (expr, min(wanted), max(wanted), json.dumps(wanted), limit)
        ).fetchall()

    def _split(self, expr: str, limit: int, lo: int, end: int, parts: int) -> list[Row]:
        # Inclusive bounds; the outer ones reach past any id, as the bounds are only a hint.
        cuts = [lo + (end - lo) * k // parts for k in range(parts + 1)]
        cuts[0], cuts[-1] = _FIRST, _LAST + 1
        while len(self._siblings) < parts - 1:
            self._siblings.append(connect(self.path, vec=False)[0])
        futures = [
            _PARTS.submit(_range, c, expr, cuts[i + 1], cuts[i + 2] - 1, limit)
            for i, c in enumerate(self._siblings[: parts - 1])
        ]
        try:
            rows = _range(self.conn, expr, cuts[0], cuts[1] - 1, limit)  # the first: here
        finally:
            wait(futures)  # a sibling is never left running into the next search
        for f in futures:
            rows += f.result()
        rows.sort(key=lambda r: (r[1], r[0]))
        return rows[:limit]

    def close(self) -> None:
        for c in self._siblings:
            with contextlib.suppress(Exception):
                c.close()
        self._siblings = []


def _range(conn: Connection, expr: str, first: int, last: int, limit: int) -> list[Row]:
    return conn.execute(_RANGE, (expr, first, last, limit)).fetchall()


def _with_left_out(
    conn: Connection, rows: list[Row], expr: str, left_out: str, limit: int
) -> list[Row]:
    """The best ``limit`` chunks by BM25 over ``expr OR left_out``, among the chunks that hold
    a word of ``expr``, given ``rows``: the best ``limit`` by BM25 over ``expr`` alone.

    BM25 sums one term per query word, so a chunk holding no left-out word scores the same
    over both, and one holding some scores more over the whole query. The chunks that hold
    both kinds come from ``(expr) AND (left_out)``, scored over every word and cut to the best
    ``limit``: FTS5 steps through the rarer words' chunks and skips ahead in the common
    words' lists, scoring only the chunks holding both (it still reads each left-out word's
    whole list once, for its IDF: 2-16 ms for words in 60,000-270,000 chunks; run beside the
    search over ``expr``, on a connection of its own, it gained nothing on 2 cores). A chunk
    of the true best ``limit`` is either among those or holds no left-out word, and then
    fewer than ``limit`` chunks score above it over ``expr`` alone: it is in ``rows``."""
    both = _range(conn, f"({expr}) AND ({left_out})", _FIRST, _LAST, limit)
    merged = dict(rows)
    merged.update(both)
    return sorted(merged.items(), key=lambda r: (r[1], r[0]))[:limit]
