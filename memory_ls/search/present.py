"""Stage 5, present: the picked candidates become hits (snippet, citation, the line that best
matches, the terms found) and, when the search explains, each hit's trace and the plan."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..index.rows import ChunkRow
from .citations import format_citation
from .context import Context, Outcome
from .fusion import Candidate
from .highlight import Highlight, highlight_rows
from .results import SearchHit

STAGES = ("plan", "retrieve", "score", "select", "present")


def present(ctx: Context) -> Outcome:
    inp, mode = ctx.inputs, ctx.plan.mode
    picked = ctx.picked
    marks = marks_for(ctx, picked)
    hits = [
        SearchHit(
            path=r.path,
            start_line=r.start_line,
            end_line=r.end_line,
            score=c.score,
            snippet=snippet(r.text, inp.qs.snippet_max_chars),
            source=r.source,
            citation=format_citation(r.path, r.start_line, r.end_line),
            vector_score=c.vector if mode != "keyword" else None,
            text_score=c.text if mode != "vector" else None,
            best_line=m.best_line,
            matched_terms=m.matched_terms,
            fused_score=ctx.fused.get(c.chunk_id),
            explain=hit_trace(c, rank) if c.trace is not None else None,
        )
        for rank, ((c, r), m) in enumerate(zip(picked, marks, strict=True), start=1)
    ]
    best_below = ctx.best_below if ctx.below else None
    explain = search_trace(ctx) if ctx.explain else None
    return Outcome(hits, mode, ctx.below, best_below, explain)


def marks_for(ctx: Context, pairs: list[tuple[Candidate, ChunkRow]]) -> list[Highlight]:
    """Each candidate's best line and the query's terms it holds (found once a search)."""
    todo = [(c, r) for c, r in pairs if c.chunk_id not in ctx.marks]
    if todo:
        near = [per_line(ctx.closest.get(c.chunk_id)) for c, _ in todo]
        words, store = ctx.inputs.req.parsed.words, ctx.inputs.store
        found = highlight_rows(words, [r for _, r in todo], store, near)
        ctx.marks.update((c.chunk_id, m) for (c, _), m in zip(todo, found, strict=True))
    return [ctx.marks[c.chunk_id] for c, _ in pairs]


def nothing_found(ctx: Context) -> Outcome:
    """No side found a candidate."""
    explain = search_trace(ctx) if ctx.explain else None
    return Outcome([], ctx.plan.mode, explain=explain)


def snippet(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", int(limit * 0.8), limit - 1)
    return text[: cut if cut > 0 else limit - 1].rstrip() + "…"


def per_line(closest: tuple[np.ndarray, np.ndarray] | None) -> dict[int, float]:
    """Line -> its best cosine (a long line's sentences share their line), for a hit shown."""
    out: dict[int, float] = {}
    if closest is not None:
        for row, sim in zip(closest[0].tolist(), closest[1].tolist(), strict=True):
            out[row] = max(sim, out.get(row, -1.0))
    return out


def _round(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def hit_trace(c: Candidate, rank: int) -> dict[str, Any]:
    """Why one hit scores what it does, stage by stage (the shape is in docs/protocol.md)."""
    t = {k: _round(v) for k, v in (c.trace or {}).items()}
    keyword = None
    if c.text_rank is not None and "bm25" in t:
        keyword = {
            "rank": c.text_rank,
            "bm25": t["bm25"],
            "relative": t["relative"],
            "coverage": t["coverage"],
            "score": t["text"],
        }
    vector = None
    if t.get("cosine") is not None:
        vector = {
            "rank": t.get("vectorRank"),
            "cosine": t["cosine"],
            "lines": t.get("lines"),
            "score": t.get("vector", t["cosine"]),
        }
    out = {
        "keyword": keyword,
        "vector": vector,
        "fused": t.get("fused"),
        "decay": {"factor": t["decay"], "date": t.get("date")} if "decay" in t else None,
        "score": _round(c.score),
        "rank": {"byScore": t.get("scoreRank", rank), "final": rank},
    }
    if "rerank" in t:  # the reranker's relevance replaced the fused score
        rerank = {"score": t["rerank"], "fusedScore": t["fusedScore"], "fusedRank": t["fusedRank"]}
        out["rerank"] = rerank
    return out


def search_trace(ctx: Context) -> dict[str, Any]:
    """The search's side of ``--explain``: the parsed query, the plan, each stage's figures."""
    p, qs = ctx.plan, ctx.inputs.qs
    return {
        "stages": list(STAGES),
        "query": _query_trace(ctx),
        "plan": {
            "mode": p.mode,
            "pool": p.pool,
            "fusion": qs.hybrid.fusion,
            "weights": {"vector": qs.hybrid.vector_weight, "text": qs.hybrid.text_weight},
            "scoped": p.scope is not None,
        },
        "keyword": _keyword_trace(ctx),
        "vector": _vector_trace(ctx) if p.vector_side else None,
        "select": {
            "decayHalfLifeDays": qs.temporal_decay.half_life_days
            if qs.temporal_decay.enabled
            else None,
            "mmrLambda": qs.mmr.lambda_ if qs.mmr.enabled else None,
            "sourceBalance": qs.source_balance,
            "minScore": ctx.inputs.req.threshold,
        },
        "counts": {
            "retrieved": len(ctx.cands),
            "passedFilters": len(ctx.kept),
            "belowMinScore": ctx.below,
            "expired": ctx.expired,
            "picked": len(ctx.picked),
        },
    }


def _query_trace(ctx: Context) -> dict[str, Any]:
    req = ctx.inputs.req
    f = req.parsed.filters
    given: dict[str, Any] = {"pathPrefix": f.path_prefix, "after": f.after, "before": f.before}
    given |= {"sources": f.sources, "tags": f.tags, "required": f.required, "excluded": f.excluded}
    filters = {k: v for k, v in given.items() if v}
    if req.path_prefix:
        filters["requestPathPrefix"] = req.path_prefix
    if req.sources:
        filters["requestSources"] = list(req.sources)
    terms = [w for w, _ in req.parsed.terms]
    return {"words": req.parsed.words, "terms": terms, "filters": filters}


def _keyword_trace(ctx: Context) -> dict[str, Any] | None:
    kw = ctx.plan.keywords
    if not kw.terms:
        return None
    return {
        "expression": kw.expr,
        "leftOut": kw.left_out or None,
        "documentFrequencies": dict(zip(kw.words, kw.df, strict=True)),
        "chunks": kw.total,
        "bestBm25": _round(ctx.best_bm25),
        "coverage": _round(ctx.cover),
    }


def _vector_trace(ctx: Context) -> dict[str, Any]:
    bg = ctx.background
    return {
        "calibration": ctx.policy,
        "background": {"mean": _round(bg.mean), "std": _round(bg.std)} if bg else None,
        "lift": _round(ctx.lift),
        "lines": ctx.used_lines,
    }
