"""The search settings: fusion, MMR, temporal decay, scores and reranking (``query.*``,
``rerank.*``), declared like every other setting (see ``schema.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .spec import setting


@dataclass
class HybridSettings:
    enabled: bool = setting(
        True,
        "Combine keyword (BM25) and vector search. Off: a search in `auto` mode is vector-only "
        "when a query vector is available.",
    )
    vector_weight: float = setting(
        0.7,
        "Weight of the vector score in `weighted` fusion (the two weights are divided by "
        "their sum).",
        minimum=0,
        maximum=1,
    )
    text_weight: float = setting(
        0.3, "Weight of the keyword (BM25) score in `weighted` fusion.", minimum=0, maximum=1
    )
    candidate_multiplier: int = setting(
        4,
        "Candidates taken from each side: `query.maxResults` times this, but at least "
        "`query.hybrid.minCandidates` (and 4 times more when the search has filters).",
        minimum=0,
    )
    min_candidates: int = setting(
        50,
        "The candidate pool of each side never shrinks below this, so the top hit does not "
        "depend on `query.maxResults`.",
        minimum=0,
    )
    fusion: str = setting(
        "weighted",
        "How keyword and vector scores are fused: `weighted` (the weighted mean of the two "
        "scores) or `rrf` (reciprocal rank fusion); `weighted` scored better on LoCoMo.",
        choices=("weighted", "rrf"),
    )
    rrf_k: int = setting(
        60,
        "The `k` constant of reciprocal rank fusion: larger values flatten the difference "
        "between ranks.",
        minimum=0,
    )


@dataclass
class MmrSettings:
    enabled: bool = setting(
        False,
        "Re-rank with maximal marginal relevance (word overlap between results) to diversify them.",
    )
    lambda_: float = setting(
        0.7, "MMR trade-off between relevance (1) and diversity (0).", minimum=0, maximum=1
    )


@dataclass
class DecaySettings:
    enabled: bool = setting(
        False,
        "Lower the score of dated notes (`memory/**/YYYY-MM-DD*.md`) by age; undated "
        "(evergreen) files never decay.",
    )
    half_life_days: float = setting(
        30.0, "Age in days at which a dated note's score is halved (0: no decay).", minimum=0
    )


@dataclass
class LineSettings:
    max_chunks: int = setting(
        20_000,
        "Indexes of up to this many chunks also embed every line of every chunk (in the "
        "background, after the chunk vectors; a line over 600 characters as its sentences), "
        "and a search re-scores its 30 best candidates by their best-matching line, so a "
        "question answered by one line of a long chunk finds it (LoCoMo R@5 +0.011, line "
        "Hit@5 +0.019; see the manual, Evaluation). It adds about 0.8 times the chunks' embedding "
        "time (and a remote provider's tokens) and about 4 KB a chunk to the index. Past this "
        "size, and whenever `remote.batchApi` is on with a provider that has a batch API (they "
        "would go through the full-price endpoint), the line vectors are dropped; `0` turns "
        "them off. On a team index (`store.backend` `postgres`) they are shared: a client past "
        "its own limit neither embeds nor uses them, and leaves them to the others.",
        minimum=0,
    )
    weight: float = setting(
        0.5,
        "How much a candidate's best line counts against its own vector: its vector score "
        "becomes `(1 - weight) x chunk + weight x best line` (cosines).",
        minimum=0,
        maximum=1,
    )


@dataclass
class QuerySettings:
    max_results: int = setting(
        6, "Results per search (a request's own `maxResults` wins).", minimum=1
    )
    min_score: float = setting(
        0.35,
        "A search answers only when its best result scores at least this (after fusion and "
        "decay); then results down to half of it come along. A request's own `minScore` wins. "
        "Under 0.5 is a weak match, under 0.35 junk (see `query.calibrate`).",
        minimum=0,
        maximum=1,
    )
    calibrate: str = setting(
        "auto",
        "Score the vector side by how far a similarity stands out from the query's own "
        "background (its similarity to the rest of the corpus and to a fixed set of unrelated "
        "passages), so a score means the same whatever the model. `on`: every vector score is "
        "calibrated. `auto`: `on` for a model that gives unrelated text high cosines "
        "(multilingual-e5-small: 0.77 on average), where raw cosines would let everything pass "
        "`minScore`; for other models (all-MiniLM-L6-v2: 0.07) the raw fusion keeps its order "
        "and the best hit's calibrated score lifts the whole list when it is higher, so a note "
        "that stands out by meaning alone answers (`on` would cost SciFact 0.028 nDCG@10 with "
        "all-MiniLM-L6-v2; see the manual, Evaluation). `off`: raw cosine.",
        choices=("auto", "on", "off"),
    )
    snippet_max_chars: int = setting(
        700, "Maximum length of a result's snippet, in characters.", minimum=1
    )
    hybrid: HybridSettings = field(default_factory=HybridSettings)
    mmr: MmrSettings = field(default_factory=MmrSettings)
    temporal_decay: DecaySettings = field(default_factory=DecaySettings)
    lines: LineSettings = field(default_factory=LineSettings)
    expired: str = setting(
        "demote",
        "Notes whose front matter says they expired (`expires:` or `valid_until:` before "
        "today): `demote` halves their score, `exclude` leaves them out of results, `keep` "
        "treats them as any other note. The `expired` check flags them either way.",
        choices=("demote", "exclude", "keep"),
    )
    tag_boost: float = setting(
        0.2,
        "A result whose front matter `tags:` hold a word of the query, or whose `aliases:` "
        "one of the query's phrases, scores this much more (0.2: x1.2; 0: no boost). "
        "`tag:deploy` in a query keeps only notes tagged `deploy`.",
        minimum=0,
        maximum=1,
    )
    source_balance: bool = setting(
        True,
        "When notes and transcripts both match, one source takes at most 2/3 of the results "
        "while the other has candidates.",
    )
    common_term_fraction: float = setting(
        0.3,
        "Keyword side, on indexes of 1,000 chunks or more: query words found in more than "
        "this share of all chunks are left out (their IDF is near zero and BM25 over them is "
        "slow), unless that would leave none; `1` keeps every word.",
        minimum=0,
        maximum=1,
    )
    keyword_postings_budget: int = setting(
        30_000,
        "Keyword side: while the query's words match more chunks than this in all, the most "
        "common of them (if in more than 1% of all chunks) no longer picks chunks, so that BM25 "
        "stays fast on a million chunks (scoring 30,000 chunks takes about 20 ms). The chunks "
        "found by the other words still count it in their score; only a chunk holding none of "
        "them is missed: scaled to SciFact's size that cost 0.011 keyword and 0.007 hybrid nDCG@10 "
        "(the manual, Evaluation: Scale). No query of the evaluation sets (up to 7,477 chunks) "
        "reaches it; `0` turns it off.",
        minimum=0,
    )


RERANK_PROVIDERS = ("none", "voyage", "jina", "cohere", "cohere-compatible", "local")


@dataclass
class RerankSettings:
    provider: str = setting(
        "none",
        "Rerank the best fused candidates with a cross-encoder: `voyage`, `jina` or `cohere` "
        "(their hosted APIs), `cohere-compatible` (any server with a Cohere-style `/rerank`, "
        "`rerank.baseUrl` required), `local` (a GGUF reranker file, `rerank.modelPath`) or "
        "`none`. With a reranker, a result's score is the reranker's relevance; a failed "
        "rerank returns the fused order and says why in `fallbackReason`.",
        choices=RERANK_PROVIDERS,
    )
    model: str = setting(
        "",
        "The rerank model (empty: `rerank-2.5` for Voyage, `jina-reranker-v2-base-multilingual` "
        "for Jina, `rerank-v3.5` for Cohere; `cohere-compatible` needs one).",
    )
    base_url: str = setting(
        "",
        "Base URL of the rerank API; `/rerank` is appended (empty: the provider's own, e.g. "
        "`https://api.cohere.com/v2`).",
    )
    api_key: str = setting(
        "",
        "API key for the rerank API (empty: `VOYAGE_API_KEY`, `JINA_API_KEY` or "
        "`COHERE_API_KEY`, the provider's own; `cohere-compatible` uses this key only). "
        "Prefer the environment: settings files are often shared.",
        secret=True,
    )
    model_path: str = setting(
        "",
        "A GGUF reranker (a cross-encoder with a classification head, e.g. a bge-reranker "
        "conversion) for the `local` provider; `~` is expanded and a relative path is relative "
        "to the workspace folder. Embedding models are refused.",
    )
    top_n: int = setting(
        20,
        "How many fused candidates are reranked (at least the request's `maxResults`); "
        "`query.minScore` and `query.maxResults` apply after reranking.",
        minimum=1,
        maximum=100,
    )
    timeout_ms: int = setting(
        2000,
        "The whole time budget of one rerank, retries included (`remote.retries` and its "
        "backoff apply), in milliseconds; past it the search answers in fused order, and "
        "reranking pauses for 30 s after a failure.",
        minimum=0,
    )
    context_size: int = setting(
        512,
        "`local` provider: llama.cpp context size in tokens for one query and document pair "
        "(capped at the model's trained length); longer documents are cut.",
        minimum=64,
    )
