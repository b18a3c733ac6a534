"""Stage 3, score: BM25 normalised against the best match and weighted by how much of the
query it holds, the vector side's cosines re-scored by their best line and calibrated against
the query's background, both sides fused, then the "lift" calibration's one factor. Every
candidate of a search is scored in one pass, on the same figures, whichever source found it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..index.backend import LineReader, SearchSource
from ..settings.query import LineSettings
from .calibrate import Moments, background, lift, policy
from .context import Context
from .fusion import KEYWORD_ALONE, Candidate, bm25_score, coverage, fuse_rrf, fuse_weighted
from .highlight import terms_in

# How many of the best fused candidates ``by_lines`` re-scores (LoCoMo: 30 and 50 score alike).
LINE_CANDIDATES = 30


def score(ctx: Context) -> None:
    """Give every kept candidate its ``score``."""
    _keyword_scores(ctx)
    if ctx.plan.vector_side:
        _background(ctx)
        _vector_scores(ctx)
    for c, _ in ctx.kept:
        c.score = fused(ctx, c)
        c.note(fused=c.score)
    _lift(ctx)


def fused(ctx: Context, c: Candidate) -> float:
    mode, hy = ctx.plan.mode, ctx.inputs.qs.hybrid
    if mode == "keyword":
        return max(c.text, KEYWORD_ALONE * c.text_rel)
    if mode == "vector":
        return max(c.vector or 0.0, 0.0)
    if hy.fusion == "rrf":
        return fuse_rrf(c, hy.rrf_k)
    return fuse_weighted(c, hy.vector_weight, hy.text_weight)


def _keyword_scores(ctx: Context) -> None:
    """Normalise BM25 against the best match that survived the filters, so that the best
    keyword hit of a filtered search still scores 1.0 and passes minScore; weigh it by how much
    of the query that match holds (IDF-weighted): a match on one common word of a long
    question is no answer, however well it ranks among the matches."""
    kw, bm25 = ctx.plan.keywords, ctx.bm25
    best_bm = min((bm25[c.chunk_id] for c, _ in ctx.kept if c.chunk_id in bm25), default=0.0)
    best_text = next((r.text for c, r in ctx.kept if bm25.get(c.chunk_id) == best_bm), None)
    terms = list(kw.terms)
    cover = coverage(terms_in(best_text, terms), terms, kw.df, kw.total) if best_text else 0.0
    for c, _ in ctx.kept:
        if c.chunk_id in bm25:
            c.text_rel = bm25_score(bm25[c.chunk_id], best_bm)
            c.text = cover * c.text_rel
            c.note(bm25=bm25[c.chunk_id], relative=c.text_rel, coverage=cover, text=c.text)
    ctx.best_bm25, ctx.cover = best_bm, cover


def _background(ctx: Context) -> None:
    """What the query's cosines stand out from: the corpus (and the reference passages)."""
    inp = ctx.inputs
    assert inp.qvec is not None
    ref = inp.reference
    moments = Moments.of(ref @ inp.qvec) if ref is not None and len(ref) else None
    ctx.policy = policy(inp.qs.calibrate, ref)
    ctx.background = background(ctx.corpus, moments) if ctx.policy != "off" else None


def _vector_scores(ctx: Context) -> None:
    """Re-score by lines, then calibrate ("scores" policy)."""
    inp, bg = ctx.inputs, ctx.background
    assert inp.qvec is not None
    calibrating = bg is not None and ctx.policy == "scores"

    def prelim(c: Candidate) -> float:  # the fused score as it will be: calibrated or raw
        if calibrating and bg is not None and c.vector is not None:
            return fused(ctx, replace(c, vector=bg.score(c.vector)))
        return fused(ctx, c)

    lines = line_reader(inp.store, inp.qs.lines)
    ctx.used_lines = lines is not None
    if lines is not None:
        ctx.closest = by_lines(lines, inp.qvec, [c for c, _ in ctx.kept], inp.qs.lines, prelim)
    for c, _ in ctx.kept:
        c.note(lines=c.vector if c.chunk_id in ctx.closest else None)
        if calibrating and bg is not None and c.vector is not None:
            c.vector = bg.score(c.vector)
        c.note(vector=c.vector, vectorRank=c.vector_rank)


def _lift(ctx: Context) -> None:
    """Under the "lift" policy one factor takes the best raw score to the best calibrated one
    (the order stays the raw one)."""
    bg, mode, kept = ctx.background, ctx.plan.mode, ctx.kept
    weighted = mode == "vector" or ctx.inputs.qs.hybrid.fusion == "weighted"
    if bg is None or ctx.policy != "lift" or not weighted:
        return
    calibrated = [
        fused(ctx, replace(c, vector=bg.lift_score(c.vector)))
        for c, _ in kept
        if c.vector is not None
    ]
    best_raw = max((c.score for c, _ in kept), default=0.0)
    best_calibrated = max(calibrated, default=0.0)
    ctx.lift = lift([best_raw], [best_calibrated])
    for c, _ in kept:
        c.score = min(1.0, c.score * ctx.lift)


def line_reader(store: SearchSource, ls: LineSettings) -> LineReader | None:
    """The line vectors a search re-scores with, None when it scores without: none kept,
    turned off, or a team index past this client's limit (scored as if it had none)."""
    lines = store.lines
    if lines is None or ls.max_chunks == 0 or ls.weight == 0:
        return None
    return None if lines.shared and lines.over(ls.max_chunks) else lines


def by_lines(
    lines: LineReader,
    qvec: np.ndarray,
    cands: list[Candidate],
    ls: LineSettings,
    rank: Callable[[Candidate], float],
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Re-score the best LINE_CANDIDATES candidates (by ``rank``, their fused score so far)
    by their best-matching line: each one's vector score becomes ``(1 - weight) x its own
    cosine + weight x its best line's``, and the vector ranks of the KNN's candidates follow
    the new scores (reciprocal rank fusion reads ranks). Chunks without line vectors (not
    embedded yet, or of one line) keep their own cosine. Returns, per re-scored chunk, its
    vectors' lines and cosines (for the line a hit points at)."""
    top = heapq.nlargest(LINE_CANDIDATES, (c for c in cands if c.vector is not None), key=rank)
    found = lines.get([c.chunk_id for c in top])
    closest: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for c in top:
        got = found.get(c.chunk_id)
        if got is None or c.vector is None:
            continue
        sims = got.vectors @ qvec
        c.vector = (1 - ls.weight) * c.vector + ls.weight * float(np.max(sims))
        closest[c.chunk_id] = (got.rows, sims)
    if closest:
        ranked = [c for c in cands if c.vector_rank is not None and c.vector is not None]
        ranks = sorted(c.vector_rank for c in ranked if c.vector_rank is not None)
        for r, c in zip(ranks, sorted(ranked, key=lambda c: -(c.vector or 0.0)), strict=True):
            c.vector_rank = r
    return closest
