"""Stage 3, score: BM25 normalised against the best match and weighted by how much of the
query it holds, the vector side's cosines re-scored by their best line and calibrated against
the query's background, both sides fused, then the "lift" calibration's one factor.

Every candidate of one search is scored on one ``Scale``; a search given another's scale
(unsaved text beside the team index) scores its candidates as if they had been among that
search's own.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..index.backend import LineReader, SearchSource
from ..settings.query import LineSettings
from .calibrate import Moments, background, lift, policy
from .context import Context, Scale
from .fusion import KEYWORD_ALONE, Candidate, bm25_score, coverage, fuse_rrf, fuse_weighted
from .highlight import terms_in

# How many of the best fused candidates ``by_lines`` re-scores (LoCoMo: 30 and 50 score alike).
LINE_CANDIDATES = 30


def score(ctx: Context) -> None:
    """Give every kept candidate its ``score``, and ``ctx.measured`` the search's scale."""
    best_bm, cover = _keyword_scores(ctx)
    used_lines = True  # no vector side: nothing to re-score, nothing for others to follow
    if ctx.plan.vector_side:
        _background(ctx)
        used_lines = _vector_scores(ctx)
    for c, _ in ctx.kept:
        c.score = fused(ctx, c)
        c.note(fused=c.score)
    best_raw, best_calibrated = _lift(ctx)
    kw = ctx.plan.keywords
    ctx.measured = Scale(
        best_bm,
        cover,
        ctx.background,
        best_raw,
        best_calibrated,
        kw.words,
        kw.df,
        kw.total,
        lines=used_lines,
    )


def fused(ctx: Context, c: Candidate) -> float:
    mode, hy = ctx.plan.mode, ctx.inputs.qs.hybrid
    if mode == "keyword":
        return max(c.text, KEYWORD_ALONE * c.text_rel)
    if mode == "vector":
        return max(c.vector or 0.0, 0.0)
    if hy.fusion == "rrf":
        return fuse_rrf(c, hy.rrf_k)
    return fuse_weighted(c, hy.vector_weight, hy.text_weight)


def _keyword_scores(ctx: Context) -> tuple[float, float]:
    """Normalise BM25 against the best match that survived the filters, so that the best
    keyword hit of a filtered search still scores 1.0 and passes minScore; weigh it by how much
    of the query that match holds (IDF-weighted): a match on one common word of a long
    question is no answer, however well it ranks among the matches."""
    kw, bm25, scale = ctx.plan.keywords, ctx.bm25, ctx.inputs.scale
    best_bm = min((bm25[c.chunk_id] for c, _ in ctx.kept if c.chunk_id in bm25), default=0.0)
    best_text = next((r.text for c, r in ctx.kept if bm25.get(c.chunk_id) == best_bm), None)
    terms = list(kw.terms)
    cover = coverage(terms_in(best_text, terms), terms, kw.df, kw.total) if best_text else 0.0
    if scale is not None and scale.best_bm25 < best_bm:
        best_bm, cover = scale.best_bm25, scale.cover
    for c, _ in ctx.kept:
        if c.chunk_id in bm25:
            c.text_rel = bm25_score(bm25[c.chunk_id], best_bm)
            c.text = cover * c.text_rel
            c.note(bm25=bm25[c.chunk_id], relative=c.text_rel, coverage=cover, text=c.text)
    return best_bm, cover


def _background(ctx: Context) -> None:
    """What the query's cosines stand out from: the corpus (and the reference passages)."""
    inp = ctx.inputs
    assert inp.qvec is not None
    ref = inp.reference
    moments = Moments.of(ref @ inp.qvec) if ref is not None and len(ref) else None
    ctx.policy = policy(inp.qs.calibrate, ref)
    bg = background(ctx.corpus, moments) if ctx.policy != "off" else None
    if inp.scale is not None and inp.scale.background is not None and bg is not None:
        bg = inp.scale.background
    ctx.background = bg


def _vector_scores(ctx: Context) -> bool:
    """Re-score by lines, then calibrate ("scores" policy); whether lines were used."""
    inp, bg = ctx.inputs, ctx.background
    assert inp.qvec is not None
    calibrating = bg is not None and ctx.policy == "scores"

    def prelim(c: Candidate) -> float:  # the fused score as it will be: calibrated or raw
        if calibrating and bg is not None and c.vector is not None:
            return fused(ctx, replace(c, vector=bg.score(c.vector)))
        return fused(ctx, c)

    # Candidates from elsewhere are re-scored by lines only as the other search's were.
    scale = inp.scale
    lines = line_reader(inp.store, inp.qs.lines) if scale is None or scale.lines else None
    if lines is not None:
        ctx.closest = by_lines(lines, inp.qvec, [c for c, _ in ctx.kept], inp.qs.lines, prelim)
    for c, _ in ctx.kept:
        c.note(lines=c.vector if c.chunk_id in ctx.closest else None)
        if calibrating and bg is not None and c.vector is not None:
            c.vector = bg.score(c.vector)
        c.note(vector=c.vector, vectorRank=c.vector_rank)
    return lines is not None


def _lift(ctx: Context) -> tuple[float, float]:
    """Under the "lift" policy one factor takes the best raw score to the best calibrated one
    (the order stays the raw one); the best of each before, for another search to follow."""
    bg, mode, kept = ctx.background, ctx.plan.mode, ctx.kept
    weighted = mode == "vector" or ctx.inputs.qs.hybrid.fusion == "weighted"
    if bg is None or ctx.policy != "lift" or not weighted:
        return 0.0, 0.0
    calibrated = [
        fused(ctx, replace(c, vector=bg.lift_score(c.vector)))
        for c, _ in kept
        if c.vector is not None
    ]
    best_raw = max((c.score for c, _ in kept), default=0.0)
    best_calibrated = max(calibrated, default=0.0)
    if (scale := ctx.inputs.scale) is not None:
        best_raw = max(best_raw, scale.best_raw)
        best_calibrated = max(best_calibrated, scale.best_calibrated)
    ctx.lift = lift([best_raw], [best_calibrated])
    for c, _ in kept:
        c.score = min(1.0, c.score * ctx.lift)
    return best_raw, best_calibrated


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
