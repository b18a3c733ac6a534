"""Hybrid search: keyword BM25 + vector KNN -> fusion -> decay -> filters -> MMR -> hits."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import date

import numpy as np

from ..index.backend import LineReader, SearchSource
from ..index.chunk_reads import Scope
from ..index.rows import ChunkRow
from ..settings import QuerySettings
from ..settings.query import LineSettings
from .calibrate import Background, Moments, Policy, background, lift, policy
from .citations import format_citation
from .highlight import highlight_rows, terms_in, with_words
from .query import Filters, drop_common, match_expression, parse_filters, query_terms
from .request import SearchRequest
from .rerank import (
    KEYWORD_ALONE,
    Candidate,
    balance_sources,
    bm25_score,
    coverage,
    decay,
    fuse_rrf,
    fuse_weighted,
    mmr,
)
from .results import SearchHit
from .vector import SqliteVecIndex, VectorIndex

# minScore gates the best result; once a search answers, results down to TAIL x minScore come
# along (on LoCoMo, a plain per-result cut hid a relevant hit from a tenth of the answers).
TAIL = 0.5
# From this many vectors the vector side runs on ``_SIDES`` while the keyword side runs here
# (below it both sides take a few milliseconds and a thread hop is not worth it).
PARALLEL_FROM = 100_000
# How many of the best fused candidates ``by_lines`` re-scores (LoCoMo: 30 and 50 score alike).
LINE_CANDIDATES = 30
# Candidates taken from each side at most (SQLite LIMITs are 64-bit; no index is this large).
POOL_CAP = 2**31
# Up to this many chunks passing the query's path, date and source filters are scored alone;
# past it the filters apply to the candidates (many pass: the candidates hold enough of them).
SCOPE_MAX = 10_000
_SIDES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memory-ls-vector-side")


@dataclass(frozen=True)
class Scale:
    """What one search's scores were measured against, so that candidates from another
    source (an editor's unsaved text beside the team index) are scored as they would have
    been among its own: the best keyword match (BM25 rank, lower is better; 0.0: none) and how
    much of the query it holds, the vector side's background, the best fused score before and
    after calibration (the "lift" policy's factor is their ratio) and the words' frequencies."""

    best_bm25: float = 0.0
    cover: float = 0.0
    background: Background | None = None
    best_raw: float = 0.0
    best_calibrated: float = 0.0
    # the query words' document frequencies and the chunk count they were counted among
    words: tuple[str, ...] = ()
    df: tuple[int, ...] = ()
    total: int = 0
    lines: bool = True  # whether vector scores were re-scored by line vectors
    avgdl: float = 1.0  # the index's average chunk length in tokens (set by its owner)


@dataclass(frozen=True)
class Outcome:
    hits: list[SearchHit]
    mode: str  # "hybrid" | "keyword" | "vector"
    below_min_score: int = 0  # candidates that matched but scored under minScore
    best_below: float | None = None  # the best of those
    scale: Scale = Scale()


def snippet(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", int(limit * 0.8), limit - 1)
    return text[: cut if cut > 0 else limit - 1].rstrip() + "…"


def _passes(row: ChunkRow, f: Filters, sources: tuple[str, ...] | None, prefix: str | None) -> bool:
    if sources and row.source not in sources:
        return False
    if f.sources and row.source not in f.sources:
        return False
    for p in (prefix, f.path_prefix):
        if p and not row.path.startswith(p.removeprefix("./")):
            return False
    if (f.after or f.before) and not row.date:
        return False  # a date range asks for dated notes
    if f.after and row.date and row.date < f.after:
        return False
    # +required and -excluded words: with_words, for all the candidates at once
    return not (f.before and row.date and row.date > f.before)


def _scope(f: Filters, req: SearchRequest) -> Scope | None:
    """What the index can tell of the query's filters (all but +/- words); None: none."""
    sources: frozenset[str] | None = None
    for given in (req.sources, f.sources):
        if given:
            sources = frozenset(given) if sources is None else sources & frozenset(given)
    prefixes = tuple(p.removeprefix("./") for p in (req.path_prefix, f.path_prefix) if p)
    if sources is None and not prefixes and not f.after and not f.before:
        return None
    return Scope(sources, prefixes, f.after, f.before)


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


def per_line(closest: tuple[np.ndarray, np.ndarray] | None) -> dict[int, float]:
    """Line -> its best cosine (a long line's sentences share their line), for a hit shown."""
    out: dict[int, float] = {}
    if closest is not None:
        for row, sim in zip(closest[0].tolist(), closest[1].tolist(), strict=True):
            out[row] = max(sim, out.get(row, -1.0))
    return out


def run(
    store: SearchSource,
    vectors: VectorIndex | SqliteVecIndex | None,
    qvec: np.ndarray | None,
    req: SearchRequest,
    qs: QuerySettings,
    today: date,
    reference: np.ndarray | None = None,
    scale: Scale | None = None,
    exclude: frozenset[str] = frozenset(),
    gate: bool = True,
) -> Outcome:
    """The hits for one resolved request, the mode that produced them, and what fell short.

    ``reference``: the model's vectors of the calibration passages (calibrate.py), so even a
    tiny corpus gives each query a background to stand out from. ``scale``: another search's
    (``Outcome.scale``) to score these candidates on: a better keyword match, its background
    and its best scores count as if they had been among these candidates. ``exclude``: files
    whose chunks are left out (their text is being searched elsewhere). ``gate=False``: the
    results stand even when the best is under minScore (the caller gates several lists as
    one)."""
    words, filters = parse_filters(req.query)
    use_vec = qvec is not None and vectors is not None and req.mode in ("auto", "hybrid", "vector")
    # Degrade, never fail: a vector search with no query vector answers with keywords.
    use_text = req.mode in ("auto", "hybrid", "keyword") or not use_vec
    if req.mode == "auto" and not qs.hybrid.enabled and use_vec:
        use_text = False
    mode = "hybrid" if use_text and use_vec else ("vector" if use_vec else "keyword")

    hy = qs.hybrid
    pool = max(req.limit * hy.candidate_multiplier, hy.min_candidates)
    if filters.active() or req.sources or req.path_prefix:
        pool *= 4  # filters are applied after retrieval
    pool = min(pool, POOL_CAP)  # huge settings (query.maxResults = 1e18) must not overflow SQL
    expr = None
    bg: Background | None = None
    how: Policy = "off"
    all_terms: list[tuple[str, bool]] = []
    df: list[int] = []
    total = postings = 0
    left_out = ""  # words the postings budget left out, which the backend may score back
    asked: tuple[str, ...] = ()
    if use_text:
        all_terms = terms = query_terms(words)
        asked = tuple(w for w, _ in terms)
        if asked and scale is not None and scale.words == asked:
            df, total = list(scale.df), scale.total  # the other search's counts
        elif asked:
            df, total = store.doc_frequencies(list(asked))
        budgeted: list[tuple[str, bool]] = []
        if len(terms) > 1:
            terms, budgeted = drop_common(
                terms, df, total, qs.common_term_fraction, qs.keyword_postings_budget
            )
        # FTS5 sums BM25 over the phrases in the expression's order, and the backend may score
        # the kept words, then those left out: so prefixes (never left out) go first, then the
        # words rarest first, the first one the budget would leave out (drop_common: the most
        # common, the earliest of equals) last, and scores and ties are those of the whole query.
        rarity = {t: (not t[1], n, -i) for i, (t, n) in enumerate(zip(all_terms, df, strict=True))}
        whole = sorted(rarity, key=rarity.__getitem__)
        expr = match_expression([t for t in whole if t in terms])
        postings = sum(n for t, n in zip(all_terms, df, strict=True) if t in terms)
        left_out = match_expression([t for t in whole if t in budgeted]) or ""

    cands: dict[int, Candidate] = {}
    bm25: dict[int, float] = {}
    closest: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    used_lines = True  # no vector side: nothing to re-score, nothing for others to follow
    # On a large in-memory matrix the vector side runs beside the keyword side: FTS5 and numpy
    # both release the GIL, so a hybrid search costs the slower side, not both.
    beside = None
    large = isinstance(vectors, VectorIndex) and vectors.size >= PARALLEL_FROM
    if use_vec and expr and words.strip() and large:
        assert vectors is not None and qvec is not None
        beside = _SIDES.submit(vectors.knn, qvec, pool)
    # Few chunks pass the path, date and source filters: those are scored, all of them (only
    # the candidates were filtered, and a folder's or a month's notes that ranked past them
    # were never found: ``file:memory/b/`` in a memory of a few hundred notes said nothing).
    scope = _scope(filters, req)
    within = store.chunks_in(scope, SCOPE_MAX) if scope is not None else None
    if expr:
        found = (
            store.fts_search(expr, pool, postings, left_out)
            if within is None  # the words left out count in full among the few
            else store.fts_within(f"{expr} OR {left_out}" if left_out else expr, within, pool)
        )
        for rank, (cid, bm) in enumerate(found, start=1):
            cands[cid] = Candidate(cid, text_rank=rank)
            bm25[cid] = bm
    if use_vec and words.strip():
        assert vectors is not None and qvec is not None
        knn, corpus = beside.result() if beside is not None else vectors.knn(qvec, pool)
        if within is not None:  # the filter's chunks, each scored; the corpus stays the background
            sims = vectors.similarity(qvec, within)
            knn = sorted(sims.items(), key=lambda h: (-h[1], h[0]))[:pool]
        ref = Moments.of(reference @ qvec) if reference is not None and len(reference) else None
        how = policy(qs.calibrate, reference)
        bg = background(corpus, ref) if how != "off" else None
        if scale is not None and scale.background is not None and bg is not None:
            bg = scale.background
        for rank, (cid, sim) in enumerate(knn, start=1):
            c = cands.setdefault(cid, Candidate(cid))
            c.vector, c.vector_rank = sim, rank
        # Each candidate gets its exact vector score. On the keyword side, a chunk outside a
        # keyword pool that was not full holds none of the words searched (text 0 is exact,
        # but for one holding only words the postings budget left out); past a full pool its
        # BM25 is below the pool's last one, and computing it would cost a second BM25 pass
        # over every matching row (~100 ms at 100k chunks), so it counts as 0.
        missing = [cid for cid, c in cands.items() if c.vector is None]
        for cid, sim in vectors.similarity(qvec, missing).items():
            cands[cid].vector = sim
    if not cands:  # what was counted still sets the scale for candidates found elsewhere
        counted = replace(scale or Scale(), words=asked, df=tuple(df), total=total)
        return Outcome([], mode, scale=counted)

    rows = store.chunks_by_ids(cands)
    kept = [
        (c, rows[cid])
        for cid, c in cands.items()
        if cid in rows
        and rows[cid].path not in exclude
        and _passes(rows[cid], filters, req.sources, req.path_prefix)
    ]
    if filters.required or filters.excluded:
        holds = with_words([r.text for _, r in kept], filters.required, filters.excluded)
        kept = [cr for i, cr in enumerate(kept) if i in holds]
    # Normalise BM25 against the best match that survived the filters, so that the best
    # keyword hit of a filtered search still scores 1.0 and passes minScore.
    best_bm = min((bm25[c.chunk_id] for c, _ in kept if c.chunk_id in bm25), default=0.0)
    # How much of the query the best keyword match holds (IDF-weighted): a match on one common
    # word of a long question is no answer, however well it ranks among the matches.
    best_text = next((r.text for c, r in kept if bm25.get(c.chunk_id) == best_bm), None)
    cover = coverage(terms_in(best_text, all_terms), all_terms, df, total) if best_text else 0.0
    if scale is not None and scale.best_bm25 < best_bm:
        best_bm, cover = scale.best_bm25, scale.cover

    def fused(c: Candidate) -> float:
        if mode == "keyword":
            return max(c.text, KEYWORD_ALONE * c.text_rel)
        if mode == "vector":
            return max(c.vector or 0.0, 0.0)
        if hy.fusion == "rrf":
            return fuse_rrf(c, hy.rrf_k)
        return fuse_weighted(c, hy.vector_weight, hy.text_weight)

    for c, _ in kept:
        if c.chunk_id in bm25:
            c.text_rel = bm25_score(bm25[c.chunk_id], best_bm)
            c.text = cover * c.text_rel
    if use_vec and words.strip():
        assert qvec is not None
        calibrating = bg is not None and how == "scores"

        def prelim(c: Candidate) -> float:  # the fused score as it will be: calibrated or raw
            if calibrating and bg is not None and c.vector is not None:
                return fused(replace(c, vector=bg.score(c.vector)))
            return fused(c)

        # Candidates from elsewhere are re-scored by lines only as the other search's were.
        lines = line_reader(store, qs.lines) if scale is None or scale.lines else None
        used_lines = lines is not None
        if lines is not None:
            closest = by_lines(lines, qvec, [c for c, _ in kept], qs.lines, prelim)
        if calibrating and bg is not None:
            for c, _ in kept:
                if c.vector is not None:
                    c.vector = bg.score(c.vector)
    for c, _ in kept:
        c.score = fused(c)
    best_raw = best_calibrated = 0.0
    if bg is not None and how == "lift" and (mode == "vector" or hy.fusion == "weighted"):
        calibrated = [
            fused(replace(c, vector=bg.lift_score(c.vector)))
            for c, _ in kept
            if c.vector is not None
        ]
        best_raw = max((c.score for c, _ in kept), default=0.0)
        best_calibrated = max(calibrated, default=0.0)
        if scale is not None:
            best_raw = max(best_raw, scale.best_raw)
            best_calibrated = max(best_calibrated, scale.best_calibrated)
        factor = lift([best_raw], [best_calibrated])
        for c, _ in kept:
            c.score = min(1.0, c.score * factor)
    measured = Scale(
        best_bm, cover, bg, best_raw, best_calibrated, asked, tuple(df), total, used_lines
    )
    scored: list[tuple[Candidate, ChunkRow]] = []
    below, best_below = 0, 0.0
    for c, row in kept:
        if qs.temporal_decay.enabled:
            c.score = decay(c.score, row.date, today, qs.temporal_decay.half_life_days)
        if c.score >= req.threshold * TAIL:
            scored.append((c, row))
        else:
            below += 1
            best_below = max(best_below, c.score)

    # Deterministic: score, then path and line, so equal scores never flip between calls.
    scored.sort(key=lambda cr: (-cr[0].score, cr[1].path, cr[1].start_line))
    if gate and scored and scored[0][0].score < req.threshold:  # no answer: nothing reaches it
        below += len(scored)
        best_below = max(best_below, scored[0][0].score)
        scored = []
    k = req.limit
    order = list(range(len(scored)))
    if qs.mmr.enabled and len(scored) > 1:
        pool_items = [(c.score, r.text) for c, r in scored[: max(k * 4, 20)]]
        order = mmr(pool_items, len(pool_items), qs.mmr.lambda_)
    if qs.source_balance:
        order = balance_sources(order, lambda i: scored[i][1].source, k)
    picked = [scored[i] for i in order[:k]]
    if not qs.mmr.enabled:
        picked.sort(key=lambda cr: (-cr[0].score, cr[1].path, cr[1].start_line))

    near = [per_line(closest.get(c.chunk_id)) for c, _ in picked]
    marks = highlight_rows(req.query, [r for _, r in picked], store, near)
    hits = [
        SearchHit(
            path=r.path,
            start_line=r.start_line,
            end_line=r.end_line,
            score=c.score,
            snippet=snippet(r.text, qs.snippet_max_chars),
            source=r.source,
            citation=format_citation(r.path, r.start_line, r.end_line),
            vector_score=c.vector if mode != "keyword" else None,
            text_score=c.text if mode != "vector" else None,
            best_line=m.best_line,
            matched_terms=m.matched_terms,
        )
        for (c, r), m in zip(picked, marks, strict=True)
    ]
    return Outcome(hits, mode, below, best_below if below else None, measured)
