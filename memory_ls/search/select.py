"""Stage 4, select: temporal decay, the minScore gate and its tail, then MMR and source
balance pick the ``maxResults`` hits; with a reranker, it reorders the best ``rerank.topN``
fused candidates and its relevance becomes their score, gated the same way."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from .context import Context, Rerank
from .front_matter import FrontMatterWeights
from .fusion import balance_sources, decay, mmr
from .present import marks_for, snippet

# minScore gates the best result; once a search answers, results down to TAIL x minScore come
# along (on LoCoMo, a plain per-result cut hid a relevant hit from a tenth of the answers).
TAIL = 0.5


def select(ctx: Context) -> None:
    """``ctx.scored`` (past decay and the tail, best first) and ``ctx.picked`` (the hits)."""
    _decay(ctx)
    # Deterministic: score, then path and line, so equal scores never flip between calls.
    ctx.scored.sort(key=lambda cr: (-cr[0].score, cr[1].path, cr[1].start_line))
    rerank = ctx.inputs.rerank
    if rerank is not None and ctx.scored and _reranked(ctx, rerank):
        return
    _tail(ctx)
    threshold = ctx.inputs.req.threshold
    if ctx.scored and ctx.scored[0][0].score < threshold:
        # no answer: nothing reaches minScore
        ctx.below += len(ctx.scored)
        ctx.best_below = max(ctx.best_below, ctx.scored[0][0].score)
        ctx.scored = []
    _pick(ctx, ctx.inputs.req.limit)


def _reranked(ctx: Context, rerank: Rerank) -> bool:
    """The best ``topN`` picks (no minScore yet) reordered by the reranker, which reads each
    one's text; its relevance is their score, then minScore gates the best and its tail cuts
    as without a reranker. False (nothing changed) when the reranker fails: the fused order
    stands, exactly as without one."""
    req = ctx.inputs.req
    _pick(ctx, max(rerank.top_n, req.limit))
    wide = ctx.picked
    scores = rerank(req.parsed.words, [snippet(r.text, rerank.max_chars) for _, r in wide])
    if scores is None:
        return False
    ranked = sorted(zip(scores, wide, strict=True), key=lambda sc: -sc[0])  # ties: fused order
    for fused_rank, (c, _) in enumerate(wide, start=1):
        ctx.fused[c.chunk_id] = c.score
        c.note(fusedRank=fused_rank, fusedScore=c.score)
    for s, (c, _) in ranked:
        c.score = s
        c.note(rerank=s)
    floor = req.threshold * TAIL
    if ranked[0][0] < req.threshold:  # no answer: nothing reaches minScore
        ctx.below, ctx.best_below, ctx.picked = len(ranked), ranked[0][0], []
        return True
    dropped = [s for s, _ in ranked if s < floor]
    ctx.below, ctx.best_below = len(dropped), max(dropped, default=0.0)
    ctx.picked = [cr for s, cr in ranked if s >= floor][: req.limit]
    return True


def _decay(ctx: Context) -> None:
    """Temporal decay, then what the notes' front matter says: expired notes demoted (or
    left out) and tagged or aliased ones boosted (``front_matter``)."""
    inp = ctx.inputs
    td, qs = inp.qs.temporal_decay, inp.qs
    words = inp.req.parsed.words.lower()
    weigh = FrontMatterWeights(words, inp.today, qs.expired, qs.tag_boost)
    ctx.scored = []
    for c, row in ctx.kept:
        if td.enabled:
            before = c.score
            c.score = decay(c.score, row.date, inp.today, td.half_life_days)
            c.note(decay=c.score / before if before else 1.0, date=row.date)
        factor = weigh(row.path, row.meta)
        if factor is None:
            ctx.expired += 1
            continue
        c.score *= factor
        ctx.scored.append((c, row))


def _tail(ctx: Context) -> None:
    """Candidates under half of minScore are counted, not shown."""
    floor = ctx.inputs.req.threshold * TAIL
    below = [c.score for c, _ in ctx.scored if c.score < floor]
    ctx.below += len(below)
    ctx.best_below = max([ctx.best_below, *below])
    ctx.scored = [cr for cr in ctx.scored if cr[0].score >= floor]


def _pick(ctx: Context, k: int) -> None:
    qs, scored = ctx.inputs.qs, ctx.scored
    order = list(range(len(scored)))
    if qs.mmr.enabled and len(scored) > 1:
        pool_items = [(c.score, r.text) for c, r in scored[: max(k * 4, 20)]]
        order = mmr(pool_items, len(pool_items), qs.mmr.lambda_)
    order = _one_per_answer(ctx, order, k)
    if qs.source_balance:
        order = balance_sources(order, lambda i: scored[i][1].source, k)
    ctx.picked = [scored[i] for i in order[:k]]
    if not qs.mmr.enabled:
        ctx.picked.sort(key=lambda cr: (-cr[0].score, cr[1].path, cr[1].start_line))
    for i in order[:k]:
        scored[i][0].note(scoreRank=i + 1)


# Two hits of one file whose best lines are the same line are one answer: they become one hit
# citing both ranges when those span at most this many lines together, else the better one.
MERGED_LINES = 30


def _one_per_answer(ctx: Context, order: list[int], k: int) -> list[int]:
    """``order`` with one hit per answer: a later hit of a file whose best line is an earlier
    hit's (a line in the overlap of two chunks) joins it, and its slot goes to another answer.
    Best lines are found only for hits sharing a file with another, and only for as many
    candidates as it takes to fill ``k``."""
    kept: list[int] = []
    answers: dict[tuple[str, int], int] = {}  # (path, best line) -> the kept hit that has it
    at = 0
    while at < len(order) and len(kept) < k:
        window = order[at : at + 2 * (k - len(kept))]
        at += len(window)
        files = Counter(ctx.scored[i][1].path for i in kept + window)
        shared = [i for i in kept + window if files[ctx.scored[i][1].path] > 1]
        marks = marks_for(ctx, [ctx.scored[i] for i in shared])
        best = {i: m.best_line for i, m in zip(shared, marks, strict=True)}
        answers.update(((ctx.scored[j][1].path, best[j]), j) for j in kept if j in best)
        for i in window:
            key = (ctx.scored[i][1].path, best.get(i, -1))
            if i in best and key in answers:
                _join(ctx, answers[key], i)
                continue
            if i in best:
                answers[key] = i
            kept.append(i)
    return kept + order[at:]


def _join(ctx: Context, into: int, other: int) -> None:
    """Hit ``into`` cites ``other``'s lines too, when both together stay short."""
    c, row = ctx.scored[into]
    o = ctx.scored[other][1]
    start, end = min(row.start_line, o.start_line), max(row.end_line, o.end_line)
    if end - start + 1 <= MERGED_LINES:
        ctx.scored[into] = (c, replace(row, start_line=start, end_line=end))
