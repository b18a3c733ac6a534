"""Search as a pipeline of named stages, each a plain function over one ``Context``:

    plan -> retrieve (+ keep: the filters) -> score -> select -> present

``plan.py`` decides the mode, the pool and the keyword expression; ``retrieve.py`` finds the
candidates of both sides and applies the filters; ``score.py`` normalises, re-scores by lines,
calibrates and fuses; ``select.py`` decays, gates and picks (MMR, source balance);
``present.py`` makes the hits. The stage names are what ``--explain`` reports.
"""

from __future__ import annotations

from .context import Context, Inputs, Outcome
from .plan import plan
from .present import nothing_found, present
from .retrieve import keep, retrieve
from .score import score
from .select import select


def run(inputs: Inputs) -> Outcome:
    """The hits for one resolved request, the mode that produced them, and what fell short."""
    ctx = Context(inputs, plan(inputs))
    retrieve(ctx)
    if not ctx.cands:
        return nothing_found(ctx)
    keep(ctx)
    score(ctx)
    select(ctx)
    return present(ctx)
