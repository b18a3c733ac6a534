"""Retrieval with the PostgreSQL team index against the SQLite index on every set in
../shared/eval/ (see bench/eval.py for the sets and the scores), keyword and hybrid mode.

Each eval workspace becomes one namespace, so workspaces never see each other's files, as
bench/eval.py's separate SQLite files. Keyword mode compares the keyword sides (PostgreSQL full
text vs FTS5). Hybrid mode (a local model: --model, default all-MiniLM-L6-v2) adds pgvector's
HNSW and the team index's line vectors; the SQLite side is bench/eval.py's cached index, and
each namespace's embedding cache is seeded from it, so only the line vectors are embedded again.

    python bench/pg_eval.py                       # starts PostgreSQL (tests/support/pg_server.sh)
    python bench/pg_eval.py --modes hybrid --sets locomo,scifact
    python bench/pg_eval.py --sets locomo --url postgresql://...
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    REPO,
    SharedProvider,
    env_isolate,
    find_default_model,
    log,
    md_table,
    postgres,
)
from eval import (  # noqa: E402
    MAX_RESULTS,
    aggregate,
    find_sets,
    index_key,
    index_workspace,
    load_set,
    materialise,
    open_workspace,
    resolve_model,
    save_index,
    score_query,
)


def pg_settings(s: Any, url: str, namespace: str) -> Any:
    s = copy.deepcopy(s)
    s.store.backend = "postgres"
    s.store.postgres.url = url
    s.store.postgres.namespace = namespace
    s.store.postgres.timeout_ms = 30_000  # measure slow queries, do not fall back on them
    return s


def search_all(engine: Any, queries: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    out = []
    for q in queries:
        resp = engine.search(q["query"], max_results=MAX_RESULTS, min_score=0.0, mode=mode)
        if "team index unavailable" in (resp.fallback_reason or ""):
            raise SystemExit(f"PostgreSQL did not answer: {resp.fallback_reason}")
        out.append({**score_query(resp.results, q["relevant"]), "ms": resp.took_ms})
    return out


def run_keyword(es: Any, root: Path, url: str) -> dict[str, dict[str, Any]]:
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ws, queries in by_workspace(es).items():
        s = Settings(provider="none")
        for backend, settings in (
            ("sqlite", s),
            ("postgres", pg_settings(s, url, f"eval-{es.name}-{ws}-{uuid.uuid4().hex[:6]}")),
        ):
            index = root / f"{backend}-{ws}.sqlite"
            with MemoryEngine(root / "ws" / ws, settings, index_path=index) as engine:
                engine.sync("eval")
                rows[backend] += search_all(engine, queries, "keyword")
    return {b: aggregate(r) for b, r in rows.items()}


def run_hybrid(
    es: Any, root: Path, url: str, settings: Any, provider: Any, cache_dir: Path
) -> dict[str, dict[str, Any]]:
    """SQLite: bench/eval.py's cached index. PostgreSQL: a namespace whose embedding cache is
    seeded from it, synced and embedded (its line vectors) before the queries."""
    from memory_ls.engine import MemoryEngine
    from memory_ls.index.postgres import store as pg_store

    key, key_info = index_key(es, settings, provider)
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ws, queries in by_workspace(es).items():
        engine, run, idx = open_workspace(es, ws, root, settings, provider, cache_dir, key)
        try:
            index_workspace(engine, run, f"{es.name}/{ws} sqlite")
            rows["sqlite"] += search_all(engine, queries, "hybrid")
            store = engine.indexer.writer
            hashes = [h for (h,) in store.conn.execute("SELECT hash FROM chunks")]
            cache_key = engine.indexer.ctx.cache_key
            assert cache_key is not None, "hybrid mode without a provider"
            seed = store.cache.get(cache_key, hashes)
        finally:
            save_index(engine, idx, run, es, cache_dir, key, key_info)
        pg = pg_settings(settings, url, f"eval-{es.name}-{ws}-{uuid.uuid4().hex[:6]}")
        with MemoryEngine(
            root / "ws" / es.name / ws, pg, provider=provider, index_path=root / f"pg-{ws}.sqlite"
        ) as e:
            db = e.primary.connect() if e.primary else None
            if db is None:
                raise SystemExit(f"PostgreSQL did not answer: {e.fallback_reason}")
            with pg_store.reader(db) as r:
                r.cache.put(cache_key, list(seed.items()))
            e.sync("eval", embed=False)
            embedded = e.embed_pending()
            st = e.status()
            log(
                f"  {es.name}/{ws} postgres: {st['chunks']} chunks, {embedded} chunks embedded "
                f"(cache seeded with {len(seed)}), {st['pendingLineVectors']} without lines"
            )
            rows["postgres"] += search_all(e, queries, "hybrid")
    return {b: aggregate(r) for b, r in rows.items()}


def by_workspace(es: Any) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in es.queries:
        out[q["workspace"]].append(q)
    return dict(sorted(out.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--eval-dir", type=Path, default=REPO.parent / "shared" / "eval")
    ap.add_argument("--sets", default="", help="comma-separated names or prefixes (default: all)")
    ap.add_argument("--limit", type=int, default=0, help="queries per set (default: all)")
    ap.add_argument("--url", default=os.environ.get("MEMORY_LS_PG_URL", ""))
    ap.add_argument("--modes", default="keyword", help="keyword, hybrid or both (comma-separated)")
    ap.add_argument("--model", default="", help="GGUF path or model name for hybrid mode")
    ap.add_argument("--cache-dir", type=Path, default=REPO / ".cache" / "eval")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if set(modes) - {"keyword", "hybrid"}:
        raise SystemExit(f"unknown mode in {args.modes}: keyword, hybrid")
    settings = provider = None
    if "hybrid" in modes:
        from memory_ls.embeddings.factory import create_provider
        from memory_ls.settings import Settings

        settings = Settings(provider="local")
        settings.local.model_path = str(
            resolve_model(args.model) if args.model else find_default_model()
        )
        made, why = create_provider(settings)
        if made is None:
            raise SystemExit(f"no model for hybrid mode: {why}")
        provider = SharedProvider(made)
    table = []
    with (
        postgres(args.url) as url,
        tempfile.TemporaryDirectory(prefix="memory-ls-pgeval-") as name,
    ):
        tmp = Path(name)
        env_isolate(tmp)
        wanted = [s.strip() for s in args.sets.split(",") if s.strip()]
        for folder in find_sets(args.eval_dir.resolve(), wanted):
            es = load_set(folder, args.limit or None)
            root = tmp / es.name
            for mode in modes:
                if mode == "keyword":
                    for ws, files in es.corpus.items():
                        materialise(files, root / "ws" / ws)
                    res = run_keyword(es, root, url)
                else:
                    res = run_hybrid(es, root, url, settings, provider, args.cache_dir)
                a, b = res["sqlite"], res["postgres"]
                log(f"{es.name} {mode}: nDCG@10 sqlite {a['nDCG@10']:.3f}, pg {b['nDCG@10']:.3f}")
                table.append(
                    [
                        f"{es.name} ({a['queries']})",
                        mode,
                        *(f"{a[m]:.3f} / {b[m]:.3f}" for m in ("R@5", "MRR@10", "nDCG@10")),
                        f"{b['nDCG@10'] - a['nDCG@10']:+.3f}",
                        f"{a['p50_ms']:.1f} / {b['p50_ms']:.1f}",
                    ]
                )
    header = ["set", "mode", "R@5 sqlite / pg", "MRR@10", "nDCG@10", "nDCG diff", "p50 ms"]
    print(md_table(header, table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
