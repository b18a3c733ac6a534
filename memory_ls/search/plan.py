"""Stage 1, plan: which sides search (the mode), how many candidates each side takes, the
keyword side's FTS5 expression over the query's terms, and what the index can tell of the
filters (the scope)."""

from __future__ import annotations

from ..index.chunk_reads import Scope
from .context import Inputs, KeywordPlan, Plan
from .query import Filters, drop_common, match_expression
from .request import SearchRequest, Term

# Candidates taken from each side at most (SQLite LIMITs are 64-bit; no index is this large).
POOL_CAP = 2**31


def plan(inp: Inputs) -> Plan:
    req, qs = inp.req, inp.qs
    use_vec = inp.qvec is not None and inp.vectors is not None and req.mode != "keyword"
    # Degrade, never fail: a vector search with no query vector answers with keywords.
    use_text = req.mode != "vector" or not use_vec
    if req.mode == "auto" and not qs.hybrid.enabled and use_vec:
        use_text = False
    mode = "hybrid" if use_text and use_vec else ("vector" if use_vec else "keyword")
    keywords = keyword_plan(inp) if use_text else KeywordPlan()
    vector_side = use_vec and bool(req.parsed.words.strip())
    return Plan(mode, vector_side, pool_size(inp), keywords, scope_of(req.parsed.filters, req))


def pool_size(inp: Inputs) -> int:
    req, hy = inp.req, inp.qs.hybrid
    pool = max(req.limit * hy.candidate_multiplier, hy.min_candidates)
    if req.parsed.filters.active() or req.sources or req.path_prefix:
        pool *= 4  # filters are applied after retrieval
    return min(pool, POOL_CAP)  # huge settings (query.maxResults = 1e18) must not overflow SQL


def keyword_plan(inp: Inputs) -> KeywordPlan:
    """The keyword side's expression. FTS5 sums BM25 over the phrases in the expression's
    order, and the backend may score the kept words, then those left out: so prefixes (never
    left out) go first, then the words rarest first, the first one the budget would leave out
    (drop_common: the most common, the earliest of equals) last, and scores and ties are those
    of the whole query."""
    every = list(inp.req.parsed.terms)
    words = [w for w, _ in every]
    if not every:
        return KeywordPlan()
    df, total = inp.store.doc_frequencies(words)
    searched: list[Term] = every
    budgeted: list[Term] = []
    if len(every) > 1:
        qs = inp.qs
        searched, budgeted = drop_common(
            every, df, total, qs.common_term_fraction, qs.keyword_postings_budget
        )
    rarity = {t: (not t[1], n, -i) for i, (t, n) in enumerate(zip(every, df, strict=True))}
    whole = sorted(rarity, key=rarity.__getitem__)
    return KeywordPlan(
        terms=tuple(every),
        df=tuple(df),
        total=total,
        expr=match_expression([t for t in whole if t in searched]),
        postings=sum(n for t, n in zip(every, df, strict=True) if t in searched),
        left_out=match_expression([t for t in whole if t in budgeted]) or "",
    )


def scope_of(f: Filters, req: SearchRequest) -> Scope | None:
    """What the index can tell of the query's filters (all but +/- words); None: none."""
    sources: frozenset[str] | None = None
    for given in (req.sources, f.sources):
        if given:
            sources = frozenset(given) if sources is None else sources & frozenset(given)
    prefixes = tuple(p.removeprefix("./") for p in (req.path_prefix, f.path_prefix) if p)
    if sources is None and not prefixes and not f.after and not f.before and not f.tags:
        return None
    return Scope(sources, prefixes, f.after, f.before, tuple(f.tags))
