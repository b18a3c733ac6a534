"""Stage 2, retrieve: candidates from the keyword side (FTS5 BM25) and the vector side (KNN),
merged by chunk id, each with its exact cosine; then their rows, and the query's filters.

When few chunks pass the path, date and source filters (the scope), those are the candidates,
each of them scored: a folder's or a month's notes that ranked past the candidates were never
found otherwise (``file:memory/b/`` in a memory of a few hundred notes said nothing).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..index.rows import ChunkRow
from ..sources.frontmatter import FileMeta
from .context import Context
from .fusion import Candidate
from .highlight import with_words
from .query import Filters
from .request import SearchRequest
from .vector import VectorIndex

# From this many vectors the vector side runs on ``_SIDES`` while the keyword side runs here
# (below it both sides take a few milliseconds and a thread hop is not worth it).
PARALLEL_FROM = 100_000
# Up to this many chunks passing the query's path, date and source filters are scored alone;
# past it the filters apply to the candidates (many pass: the candidates hold enough of them).
SCOPE_MAX = 10_000
_SIDES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memory-ls-vector-side")


def retrieve(ctx: Context) -> None:
    """Fill ``ctx.cands`` (and ``ctx.bm25``, ``ctx.corpus``); nothing when no side found any."""
    inp, p = ctx.inputs, ctx.plan
    beside = _vector_beside(ctx)
    within = inp.store.chunks_in(p.scope, SCOPE_MAX) if p.scope is not None else None
    if p.keywords.expr:
        _keyword_side(ctx, within)
    if p.vector_side:
        _vector_side(ctx, within, beside)


def _vector_beside(ctx: Context) -> Future[Any] | None:
    """On a large in-memory matrix the vector side runs beside the keyword side: FTS5 and
    numpy both release the GIL, so a hybrid search costs the slower side, not both."""
    inp, p = ctx.inputs, ctx.plan
    vectors = inp.vectors
    large = isinstance(vectors, VectorIndex) and vectors.size >= PARALLEL_FROM
    if not (p.vector_side and p.keywords.expr and large):
        return None
    assert isinstance(vectors, VectorIndex) and inp.qvec is not None
    return _SIDES.submit(vectors.knn, inp.qvec, p.pool)


def _keyword_side(ctx: Context, within: list[int] | None) -> None:
    store, kw, pool = ctx.inputs.store, ctx.plan.keywords, ctx.plan.pool
    assert kw.expr is not None
    if within is None:
        found = store.fts_search(kw.expr, pool, kw.postings, kw.left_out)
    else:  # the words left out count in full among the few
        expr = f"{kw.expr} OR {kw.left_out}" if kw.left_out else kw.expr
        found = store.fts_within(expr, within, pool)
    for rank, (cid, bm) in enumerate(found, start=1):
        ctx.cands[cid] = Candidate(cid, text_rank=rank, trace={} if ctx.explain else None)
        ctx.bm25[cid] = bm


def _vector_side(ctx: Context, within: list[int] | None, beside: Future[Any] | None) -> None:
    """The KNN's candidates with their ranks, then the exact cosine of every candidate: on the
    keyword side, a chunk outside a keyword pool that was not full holds none of the words
    searched (text 0 is exact, but for one holding only words the postings budget left out);
    past a full pool its BM25 is below the pool's last one, and computing it would cost a
    second BM25 pass over every matching row (~100 ms at 100k chunks), so it counts as 0."""
    vectors, qvec, pool = ctx.inputs.vectors, ctx.inputs.qvec, ctx.plan.pool
    assert vectors is not None and qvec is not None
    knn, ctx.corpus = beside.result() if beside is not None else vectors.knn(qvec, pool)
    if within is not None:  # the filter's chunks, each scored; the corpus stays the background
        sims = vectors.similarity(qvec, within)
        knn = sorted(sims.items(), key=lambda h: (-h[1], h[0]))[:pool]
    for rank, (cid, sim) in enumerate(knn, start=1):
        c = ctx.cands.setdefault(cid, Candidate(cid, trace={} if ctx.explain else None))
        c.vector, c.vector_rank = sim, rank
    missing = [cid for cid, c in ctx.cands.items() if c.vector is None]
    for cid, sim in vectors.similarity(qvec, missing).items():
        ctx.cands[cid].vector = sim
    for c in ctx.cands.values():
        c.note(cosine=c.vector, vectorRank=c.vector_rank)


def keep(ctx: Context) -> None:
    """``ctx.kept``: the candidates whose rows exist and pass the query's filters."""
    inp = ctx.inputs
    f = inp.req.parsed.filters
    rows = inp.store.chunks_by_ids(ctx.cands)
    ctx.kept = [
        (c, rows[cid])
        for cid, c in ctx.cands.items()
        if cid in rows and passes(rows[cid], f, inp.req)
    ]
    if f.required or f.excluded:
        holds = with_words([r.text for _, r in ctx.kept], f.required, f.excluded)
        ctx.kept = [cr for i, cr in enumerate(ctx.kept) if i in holds]


def passes(row: ChunkRow, f: Filters, req: SearchRequest) -> bool:
    """Whether a row passes the request's and the query's path, date, source and tag filters
    (+required and -excluded words: ``with_words``, for all the candidates at once)."""
    if req.sources and row.source not in req.sources:
        return False
    if f.sources and row.source not in f.sources:
        return False
    for p in (req.path_prefix, f.path_prefix):
        if p and not row.path.startswith(p.removeprefix("./")):
            return False
    if (f.after or f.before) and not row.date:
        return False  # a date range asks for dated notes
    if f.after and row.date and row.date < f.after:
        return False
    if f.before and row.date and row.date > f.before:
        return False
    return not f.tags or has_tags(row.meta, f.tags)


def has_tags(meta: str | None, tags: list[str]) -> bool:
    fm = FileMeta.from_json(meta)
    return fm is not None and all(t in fm.tags for t in tags)
