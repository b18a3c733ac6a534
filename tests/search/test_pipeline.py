"""The search pipeline stage by stage (plan -> retrieve -> score -> select -> present) on a
real SQLite index, and ``explain``: each hit's trace must add up to the score it was given."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from conftest import write
from model_util import ensure_test_model, model_engine

from memory_ls.engine import MemoryEngine
from memory_ls.search.context import Context, Inputs
from memory_ls.search.fusion import KEYWORD_ALONE, fuse_weighted
from memory_ls.search.pipeline import run
from memory_ls.search.plan import plan
from memory_ls.search.present import present
from memory_ls.search.request import SearchRequest
from memory_ls.search.retrieve import keep, retrieve
from memory_ls.search.score import score
from memory_ls.search.select import select
from memory_ls.settings import Settings

NOTES = {
    "MEMORY.md": "# Memory\n\nUser prefers dark mode in every editor.\n",
    "memory/2026-01-10-api.md": "# API\n\nWe rate limit with a token bucket in Redis.\n"
    "Clients over the limit get HTTP 429.\n",
    "memory/2026-02-01-cache.md": "# Cache\n\nRedis also caches the session tokens.\n",
    "memory/team/2026-03-01-deploy.md": "# Deploy\n\nDeploys go through GitHub Actions.\n",
}


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    for rel, text in NOTES.items():
        write(tmp_path / "ws", rel, text)
    e = MemoryEngine(tmp_path / "ws", Settings(provider="none"), index_path=tmp_path / "i.sqlite")
    e.sync("test")
    yield e
    e.close()


def inputs(e: MemoryEngine, store: object, query: str, **fields: object) -> Inputs:
    qs = e.settings.query
    req = SearchRequest(query=query, **fields).resolved(qs)  # type: ignore[arg-type]
    return Inputs(store, None, None, req, qs, today=date(2026, 12, 5))  # type: ignore[arg-type]


def test_plan_parses_once_and_orders_the_rarest_term_first(engine: MemoryEngine):
    with engine.indexer.reader() as store:
        inp = inputs(engine, store, "redis bucket file:memory/ -deploy")
        p = plan(inp)
    assert inp.req.parsed.words == "redis bucket"
    assert inp.req.parsed.filters.path_prefix == "memory/"
    assert inp.req.parsed.filters.excluded == ["deploy"]
    assert p.mode == "keyword" and not p.vector_side
    assert dict(zip(p.keywords.words, p.keywords.df, strict=True)) == {"redis": 2, "bucket": 1}
    # bucket (in 1 chunk) before redis (in 2): FTS5 sums BM25 in the expression's order
    assert p.keywords.expr == '"bucket" OR "redis"'
    hy = engine.settings.query.hybrid
    assert p.pool == 4 * max(inp.req.limit * hy.candidate_multiplier, hy.min_candidates)
    assert p.scope is not None and p.scope.prefixes == ("memory/",)


def test_retrieve_and_keep_apply_the_filters(engine: MemoryEngine):
    with engine.indexer.reader() as store:
        ctx = Context(inp := inputs(engine, store, "redis file:memory/team/"), plan(inp))
        retrieve(ctx)
        assert ctx.cands == {}  # no chunk under memory/team/ holds "redis"
        ctx = Context(inp := inputs(engine, store, "redis -bucket"), plan(inp))
        retrieve(ctx)
        assert len(ctx.cands) == 2
        keep(ctx)
    assert [r.path for _, r in ctx.kept] == ["memory/2026-02-01-cache.md"]


def test_score_normalises_bm25_and_weighs_coverage(engine: MemoryEngine):
    with engine.indexer.reader() as store:
        ctx = Context(inp := inputs(engine, store, "redis bucket walrus"), plan(inp))
        retrieve(ctx)
        keep(ctx)
        score(ctx)
    by_path = {r.path: c for c, r in ctx.kept}
    best = by_path["memory/2026-01-10-api.md"]
    assert best.text_rel == 1.0  # the best keyword match
    assert 0 < ctx.cover < 1  # it lacks "walrus"
    assert best.text == pytest.approx(ctx.cover)
    other = by_path["memory/2026-02-01-cache.md"]
    assert 0 < other.text_rel < 1
    assert other.score == max(other.text, KEYWORD_ALONE * other.text_rel)


def test_select_gates_on_the_best_score(engine: MemoryEngine):
    with engine.indexer.reader() as store:
        # "walrus" is in no note: the best match holds half the query, under minScore 0.9
        ctx = Context(inp := inputs(engine, store, "redis walrus", min_score=0.9), plan(inp))
        retrieve(ctx)
        keep(ctx)
        score(ctx)
        select(ctx)
        out = present(ctx)
    assert ctx.picked == [] and out.hits == []
    best = max(ctx.cover, KEYWORD_ALONE)  # the best keyword match's floor
    assert out.below_min_score == 2 and out.best_below == pytest.approx(best)


def test_a_keyword_trace_adds_up_to_each_score(engine: MemoryEngine):
    with engine.indexer.reader() as store:
        out = run(inputs(engine, store, "redis bucket", explain=True, min_score=0.0))
    assert out.explain is not None and out.explain["stages"][0] == "plan"
    assert out.explain["counts"]["picked"] == len(out.hits) == 2
    for rank, hit in enumerate(out.hits, start=1):
        e = hit.explain
        assert e is not None and e["vector"] is None and e["rank"]["final"] == rank
        kw = e["keyword"]
        assert kw["score"] == pytest.approx(kw["relative"] * kw["coverage"], abs=1e-6)
        assert e["score"] == pytest.approx(hit.score, abs=1e-6)
        assert e["fused"] == pytest.approx(max(kw["score"], KEYWORD_ALONE * kw["relative"]))
    with engine.indexer.reader() as store:
        plain = run(inputs(engine, store, "redis bucket", min_score=0.0))
    assert plain.explain is None and all(h.explain is None for h in plain.hits)
    assert [h.score for h in plain.hits] == [h.score for h in out.hits]


@pytest.mark.model
def test_a_hybrid_trace_shows_each_side_and_the_fusion(tmp_path: Path):
    for rel, text in NOTES.items():
        write(tmp_path / "ws", rel, text)
    with model_engine(tmp_path / "ws", tmp_path / "i.sqlite", ensure_test_model()) as e:
        e.sync()
        resp = e.search("how do we throttle clients with redis", explain=True, min_score=0)
    hy = e.settings.query.hybrid
    assert resp.mode == "hybrid" and resp.results and resp.explain is not None
    plan_trace = resp.explain[0]
    assert plan_trace["vector"]["calibration"] in ("scores", "lift", "off")
    assert plan_trace["folder"] == str((tmp_path / "ws").resolve())
    for hit in resp.results:
        e_ = hit.explain
        assert e_ is not None and e_["vector"] is not None
        vec, kw = e_["vector"], e_["keyword"]
        # the fused score is the weighted sum of the two sides' scores, as fusion.py says
        from memory_ls.search.fusion import Candidate

        c = Candidate(0, vector=vec["score"], text=kw["score"] if kw else 0.0)
        c.text_rel = kw["relative"] if kw else 0.0
        want = fuse_weighted(c, hy.vector_weight, hy.text_weight)
        assert e_["fused"] == pytest.approx(want, abs=1e-5)
        assert e_["score"] == pytest.approx(hit.score, abs=1e-6)


def test_a_line_in_two_chunks_is_one_answer(tmp_path: Path):
    """A line in the overlap of two chunks is one answer, not two hits of one file with the
    same best line: they become one hit citing both ranges, and the slot goes to another
    answer (issue 38, part 4)."""
    lines = [f"Filler line {i} about nothing in particular at all." for i in range(1, 25)]
    lines[11] = "The walrus quota was raised to forty per enclosure."  # line 12
    write(tmp_path / "ws", "memory/notes.md", "\n".join(lines) + "\n")
    write(tmp_path / "ws", "memory/other.md", "# Other\n\nA walrus exhibit opens in May.\n")
    s = Settings(provider="none")
    s.chunking.tokens, s.chunking.overlap = 60, 30
    with MemoryEngine(tmp_path / "ws", s, index_path=tmp_path / "i.sqlite") as e:
        e.sync("test")
        with e.indexer.reader() as store:
            rows = store.chunk_rows("memory/notes.md")
            holding = [r for r in rows if r.start_line <= 12 <= r.end_line]
        assert len(holding) == 2  # the walrus line is in two chunks' overlap
        hits = e.search("walrus quota enclosure", min_score=0, max_results=3).results
    notes = [h for h in hits if h.path == "memory/notes.md"]
    assert len(notes) == 1 and notes[0].best_line == 12
    start = min(r.start_line for r in holding)
    end = max(r.end_line for r in holding)
    assert (notes[0].start_line, notes[0].end_line) == (start, end)  # both ranges, one hit
    assert "memory/other.md" in [h.path for h in hits]  # the slot went to another answer
