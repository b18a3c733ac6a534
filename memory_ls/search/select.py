"""Stage 4, select: temporal decay, the minScore gate and its tail, then MMR and source
balance pick the ``maxResults`` hits."""

from __future__ import annotations

from .context import Context
from .fusion import balance_sources, decay, mmr

# minScore gates the best result; once a search answers, results down to TAIL x minScore come
# along (on LoCoMo, a plain per-result cut hid a relevant hit from a tenth of the answers).
TAIL = 0.5


def select(ctx: Context) -> None:
    """``ctx.scored`` (past decay and the tail, best first) and ``ctx.picked`` (the hits)."""
    _decay(ctx)
    # Deterministic: score, then path and line, so equal scores never flip between calls.
    ctx.scored.sort(key=lambda cr: (-cr[0].score, cr[1].path, cr[1].start_line))
    threshold = ctx.inputs.req.threshold
    if ctx.scored and ctx.scored[0][0].score < threshold:
        # no answer: nothing reaches minScore
        ctx.below += len(ctx.scored)
        ctx.best_below = max(ctx.best_below, ctx.scored[0][0].score)
        ctx.scored = []
    _pick(ctx)


def _decay(ctx: Context) -> None:
    inp = ctx.inputs
    td = inp.qs.temporal_decay
    floor = inp.req.threshold * TAIL
    for c, row in ctx.kept:
        if td.enabled:
            before = c.score
            c.score = decay(c.score, row.date, inp.today, td.half_life_days)
            c.note(decay=c.score / before if before else 1.0, date=row.date)
        if c.score >= floor:
            ctx.scored.append((c, row))
        else:
            ctx.below += 1
            ctx.best_below = max(ctx.best_below, c.score)


def _pick(ctx: Context) -> None:
    qs, k, scored = ctx.inputs.qs, ctx.inputs.req.limit, ctx.scored
    order = list(range(len(scored)))
    if qs.mmr.enabled and len(scored) > 1:
        pool_items = [(c.score, r.text) for c, r in scored[: max(k * 4, 20)]]
        order = mmr(pool_items, len(pool_items), qs.mmr.lambda_)
    if qs.source_balance:
        order = balance_sources(order, lambda i: scored[i][1].source, k)
    ctx.picked = [scored[i] for i in order[:k]]
    if not qs.mmr.enabled:
        ctx.picked.sort(key=lambda cr: (-cr[0].score, cr[1].path, cr[1].start_line))
    for i in order[:k]:
        scored[i][0].note(scoreRank=i + 1)
