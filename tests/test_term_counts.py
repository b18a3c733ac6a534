"""Scoring text against another index's statistics (``index/term_counts.py``), merging the
unsaved text's hits into a team search (``engine/team/unsaved.merge``) and the caches of its
vectors, on a real SQLite index."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from conftest import write

from memory_ls.engine import MemoryEngine
from memory_ls.engine.team import unsaved
from memory_ls.engine.team.unsaved import keep_recent, merge
from memory_ls.index.line_vectors import ChunkLines
from memory_ls.index.term_counts import bm25, count_terms, parse_match
from memory_ls.search.context import Outcome
from memory_ls.search.query import match_expression, query_terms
from memory_ls.search.results import SearchHit
from memory_ls.settings import Settings

NOTES = {
    "MEMORY.md": "# Memory\n\nDeploys run through GitHub Actions to fly.io every Friday.\n",
    "memory/a.md": "# Rate limits\n\nWe chose a token bucket. Tokens refill; buckets drain.\n",
    "memory/b.md": "# Limits\n\nThe limiting factor is the database, not the limiter.\n",
    "memory/c.md": "# 限流\n\n我们使用令牌桶限流算法保护接口，限制每分钟请求数。\n",
    "memory/d.md": "# Garden\n\nPlanted tomatoes and basil; deploying the sprinkler.\n",
}


@pytest.mark.parametrize(
    "query",
    ["token bucket limits", "deploying to fly.io", "限流 接口", "限", "limiter databases"],
)
def test_bm25_from_counted_terms_is_fts5s(tmp_path: Path, query: str) -> None:
    """With the index's own statistics, the counts give exactly FTS5's bm25() ranks: so with
    a team's statistics they give what the team's BM25 would."""
    root = tmp_path / "ws"
    for rel, text in NOTES.items():
        write(root, rel, text)
    with MemoryEngine(root, Settings(provider="none"), index_path=tmp_path / "i.sqlite") as e:
        e.sync()
        with e.indexer.reader() as store:
            terms = query_terms(query)
            expr = match_expression(terms)
            assert expr is not None and parse_match(expr) == terms
            want = dict(store.fts_search(expr, 100))
            assert want  # the query matches something
            rows = store.chunks_by_ids(range(1, 1000))
            tf, length = count_terms(store.conn, {i: r.text for i, r in rows.items()}, terms)
            df, total = [], len(rows)
            for i in range(len(terms)):
                df.append(sum(1 for c in rows if tf[c][i]))
            avgdl = sum(length.values()) / total
            got = {c: bm25(tf[c], length[c], df, total, avgdl) for c in rows if any(tf[c])}
    assert got.keys() == want.keys()
    for cid, rank in want.items():
        assert got[cid] == pytest.approx(rank, rel=1e-9, abs=1e-12)


def hit(path: str, score: float, line: int = 1) -> SearchHit:
    return SearchHit(path, line, line, score, "text", "memory", f"{path}#L{line}")


def test_merge_places_unsaved_hits_by_score_and_gates_the_whole_list() -> None:
    team = Outcome([hit("a.md", 0.9), hit("b.md", 0.5), hit("c.md", 0.1)], "hybrid")
    mine = Outcome(
        [hit("draft.md", 0.7, 3), hit("draft.md", 0.3, 9), hit("draft.md", 0.1, 12)],
        "hybrid",
        below_min_score=2,
        best_below=0.05,
    )
    out = merge(team, mine, limit=3, threshold=0.35)
    # the unsaved hits take their places by score among the team's; the 0.1s are under half
    # of minScore and counted with what each side already left out; cut to the limit
    assert [(h.path, h.score) for h in out.hits] == [
        ("a.md", 0.9),
        ("draft.md", 0.7),
        ("b.md", 0.5),
    ]
    assert out.below_min_score == 4 and out.best_below == 0.1
    # nothing reaches minScore: no answer, and the counts say what fell short
    weak = merge(
        Outcome([hit("b.md", 0.3)], "hybrid"), Outcome([hit("draft.md", 0.25)], "hybrid"), 6, 0.35
    )
    assert weak.hits == [] and weak.below_min_score == 2 and weak.best_below == 0.3
    # an unsaved hit that reaches minScore answers even where the team had nothing
    alone = merge(Outcome([], "hybrid"), Outcome([hit("draft.md", 0.6)], "hybrid"), 6, 0.35)
    assert [h.path for h in alone.hits] == ["draft.md"]


def test_merge_balances_sources_over_both_lists() -> None:
    def hits(source: str, *scores: float) -> list[SearchHit]:
        return [
            SearchHit(f"{source}-{i}.md", 1, 1, s, "t", source, f"{source}-{i}.md#L1")
            for i, s in enumerate(scores)
        ]

    team = Outcome(hits("memory", 0.9, 0.8, 0.7, 0.6) + hits("sessions", 0.5, 0.45), "hybrid")
    mine = Outcome(hits("unsaved", 0.95, 0.85), "hybrid")
    for h in mine.hits:
        h.source = "memory"
    out = merge(team, mine, limit=6, threshold=0.35)
    # a chatty source keeps at most two thirds of the list when others have candidates
    assert [h.source for h in out.hits].count("sessions") == 2
    assert [h.score for h in out.hits] == [0.95, 0.9, 0.85, 0.8, 0.5, 0.45]
    unbalanced = merge(team, mine, limit=6, threshold=0.35, balance=False)
    assert [h.score for h in unbalanced.hits] == [0.95, 0.9, 0.85, 0.8, 0.7, 0.6]


def test_kept_vectors_of_unsaved_text_stay_within_their_byte_budget() -> None:
    """Line vectors of a 3,072-dimension model: 1,024 chunks of 20 lines would be 250 MB."""
    cache: OrderedDict[bytes, ChunkLines] = OrderedDict()
    for i in range(200):
        lines = ChunkLines(np.arange(20), np.zeros((20, 3072), dtype=np.float32))
        keep_recent(cache, {str(i).encode(): lines})
    held = sum(c.rows.nbytes + c.vectors.nbytes for c in cache.values())
    assert held <= unsaved.KEPT_BYTES < 200 * 20 * 3072 * 4
    assert len(cache) == unsaved.KEPT_BYTES // (20 * 3072 * 4 + 20 * 8)  # as many as fit
    assert list(cache)[-1] == b"199"  # the least recent went
    small: OrderedDict[bytes, np.ndarray] = OrderedDict()
    for i in range(unsaved.KEPT + 5):  # small vectors: the entry count bounds them
        keep_recent(small, {str(i).encode(): np.zeros(384, dtype=np.float32)})
    assert len(small) == unsaved.KEPT and b"0" not in small
    huge = np.zeros(unsaved.KEPT_BYTES // 4 + 1, dtype=np.float32)
    keep_recent(small, {b"huge": huge})  # the newest stays, whatever its size
    assert list(small) == [b"huge"]
