"""Scoring text against another index's statistics (``index/term_counts.py``), merging the
unsaved text's vectors into a team search (``engine/team/sources.py``) and the caches of its
vectors, on a real SQLite index."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from conftest import write

from memory_ls.engine import MemoryEngine
from memory_ls.engine.team import unsaved
from memory_ls.engine.team.sources import BothVectors, mine, split
from memory_ls.engine.team.unsaved import keep_recent
from memory_ls.index.line_vectors import ChunkLines
from memory_ls.index.term_counts import bm25, count_terms, parse_match
from memory_ls.search.query import match_expression, query_terms
from memory_ls.search.vector import VectorIndex
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


def unit(*rows: list[float]) -> np.ndarray:
    m = np.array(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_team_and_unsaved_vectors_meet_by_cosine_on_the_teams_background() -> None:
    """The vector side of a team search with unsaved text: the team's nearest and every
    unsaved chunk in one list by cosine, local ids told apart (-(i + 1)), and the team's corpus
    as the query's background."""
    team_m = unit([1, 0, 0], [0, 1, 0], [0.7, 0.7, 0])
    mine_m = unit([0.9, 0.1, 0], [0, 0, 1])
    team = VectorIndex(lambda _large: (np.array([10, 11, 12]), team_m))
    local = VectorIndex(lambda _large: (np.array([1, 2]), mine_m))
    both = BothVectors(team, local, 2)
    q = unit([1, 0, 0])[0]
    found, corpus = both.knn(q, 2)
    assert [i for i, _ in found] == [10, mine(1), 12, mine(2)]
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    _, team_corpus = team.knn(q, 2)
    assert corpus == team_corpus
    sims = both.similarity(q, [11, mine(2), mine(1)])
    assert sims[11] == pytest.approx(0.0, abs=1e-6) and sims[mine(1)] > 0.99
    assert split([10, mine(1), mine(2), 0]) == ([10, 0], [1, 2])


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
