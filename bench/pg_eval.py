"""Retrieval with the PostgreSQL team index against the SQLite index, keyword side, on every
set in ../shared/eval/ (see bench/eval.py for the sets and the scores).

Each eval workspace becomes one namespace, so workspaces never see each other's files, as
bench/eval.py's separate SQLite files. Vectors are left out: the two backends share the fusion
code, and pgvector's HNSW returns the exact neighbours at these sizes (bench/pg.py measures its
recall); what differs is the keyword side (PostgreSQL full text vs FTS5).

    python bench/pg_eval.py                       # starts a PostgreSQL with tests/pg_server.sh
    python bench/pg_eval.py --sets locomo --url postgresql://...
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, env_isolate, log, md_table, postgres  # noqa: E402
from eval import MAX_RESULTS, aggregate, find_sets, load_set, materialise, score_query  # noqa: E402


def run_backend(es: Any, root: Path, backend: str, url: str) -> dict[str, Any]:
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    by_ws: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in es.queries:
        by_ws[q["workspace"]].append(q)
    rows = []
    for ws in sorted(by_ws):
        s = Settings(provider="none")
        if backend == "postgres":
            s.store.backend = "postgres"
            s.store.postgres.url = url
            s.store.postgres.namespace = f"eval-{es.name}-{ws}-{uuid.uuid4().hex[:6]}"
        index = root / f"{backend}-{ws}.sqlite"
        with MemoryEngine(root / "ws" / ws, s, index_path=index) as engine:
            engine.sync("eval")
            for q in by_ws[ws]:
                resp = engine.search(q["query"], max_results=MAX_RESULTS, min_score=0.0)
                if "team index unavailable" in (resp.fallback_reason or ""):
                    raise SystemExit(f"PostgreSQL did not answer: {resp.fallback_reason}")
                rows.append({**score_query(resp.results, q["relevant"]), "ms": resp.took_ms})
    return aggregate(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--eval-dir", type=Path, default=REPO.parent / "shared" / "eval")
    ap.add_argument("--sets", default="", help="comma-separated names or prefixes (default: all)")
    ap.add_argument("--limit", type=int, default=0, help="queries per set (default: all)")
    ap.add_argument("--url", default=os.environ.get("MEMORY_LS_PG_URL", ""))
    args = ap.parse_args(argv)
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
            for ws, files in es.corpus.items():
                materialise(files, root / "ws" / ws)
            res = {b: run_backend(es, root, b, url) for b in ("sqlite", "postgres")}
            a, b = res["sqlite"], res["postgres"]
            log(f"{es.name}: nDCG@10 sqlite {a['nDCG@10']:.3f}, postgres {b['nDCG@10']:.3f}")
            table.append(
                [
                    f"{es.name} ({a['queries']})",
                    *(f"{a[m]:.3f} / {b[m]:.3f}" for m in ("R@5", "MRR@10", "nDCG@10")),
                    f"{b['nDCG@10'] - a['nDCG@10']:+.3f}",
                    f"{a['p50_ms']:.1f} / {b['p50_ms']:.1f}",
                ]
            )
    header = ["set", "R@5 sqlite / pg", "MRR@10", "nDCG@10", "nDCG diff", "p50 ms"]
    print(md_table(header, table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
