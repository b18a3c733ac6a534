"""Keyword search of one team namespace alone on a PostgreSQL server and beside others' chunks.

A team server holds many namespaces in one table and one GIN index. The benchmark syncs one
namespace from bench/perf.py's generator (keyword side only, no model), measures keyword
latency (after a VACUUM ANALYZE, as autovacuum leaves a table a while after a bulk sync),
then syncs the same files into ``--others`` more namespaces (the same words: the
worst case for a shared index) and measures the first namespace again. With ``--baseline REV``
the same runs first on that revision (checked out with `git worktree`), each side in a database
of its own on the same server, so the two are measured side by side in one run.

    python bench/pg_keyword.py --chunks 50000 --others 2 [--baseline REV] [--unsettled]
    python bench/pg_keyword.py --url postgresql://...     # or MEMORY_LS_PG_URL
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, baseline_tree, env_isolate, log, md_table, postgres  # noqa: E402
from perf import Corpus, lat  # noqa: E402


def keyword_ms(engine: Any, queries: list[str]) -> dict[str, float]:
    for q in queries[:5]:
        engine.search(q, mode="keyword")
    took = [engine.search(q, mode="keyword").took_ms for q in queries]
    store = engine.status()["store"]
    if store["answering"] != "postgres":  # it fell back to the local index meanwhile
        raise RuntimeError(f"the team index did not answer: {store['problem']}")
    return lat(took)


def settle(url: str) -> None:
    """What autovacuum does a while after a bulk sync: GIN's pending list merged, statistics
    taken (measured at once, a search reads the whole pending list)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memory_chunks")


def side(
    code: Path, url: str, chunks: int, others: int, n_queries: int, seed: int, wait: bool
) -> dict[str, Any]:
    """The run of the ``memory_ls`` in folder ``code`` on the database at ``url``."""
    sys.path.insert(0, str(code))  # before common.py's entry for this tree
    import memory_ls
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    log(f"  code: {Path(memory_ls.__file__).parent}")

    def settings(ns: str) -> Settings:
        s = Settings(provider="none")
        s.store.backend = "postgres"
        s.store.postgres.url = url
        s.store.postgres.namespace = ns
        s.store.postgres.timeout_ms = 30_000  # measure slow queries, do not fall back on them
        return s

    with tempfile.TemporaryDirectory(prefix="memory-ls-pgkw-") as name:
        tmp = Path(name)
        env_isolate(tmp)
        corpus = Corpus(seed)
        corpus.write_workspace(tmp / "ws", max(1000, chunks // 11), chunks)
        queries = corpus.queries(n_queries)
        out: dict[str, Any] = {}
        mine = f"bench-{uuid.uuid4().hex[:8]}"
        with MemoryEngine(tmp / "ws", settings(mine), index_path=tmp / "mine.sqlite") as e:
            t0 = time.perf_counter()
            e.sync("bench")
            out["syncS"] = time.perf_counter() - t0
            out["chunks"] = e.status()["chunks"]
            if wait:
                settle(url)
            out["alone"] = keyword_ms(e, queries)
            log(f"  alone: {out['alone']['p50']:.1f} / {out['alone']['p95']:.1f} ms")
        for k in range(others):
            ns = f"{mine}-other{k}"
            with MemoryEngine(tmp / "ws", settings(ns), index_path=tmp / f"o{k}.sqlite") as e:
                e.sync("bench")
        if wait:
            settle(url)
        with MemoryEngine(tmp / "ws", settings(mine), index_path=tmp / "mine.sqlite") as e:
            e.sync("bench")  # nothing changed: a no-op
            out["beside"] = keyword_ms(e, queries)
            log(f"  beside: {out['beside']['p50']:.1f} / {out['beside']['p95']:.1f} ms")
        return out


@contextmanager
def scratch_db(url: str) -> Iterator[str]:
    """A database of its own on the server at ``url``, with pgvector; dropped afterwards."""
    import psycopg
    from psycopg import conninfo

    name = f"pgkw_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        db = conninfo.make_conninfo(url, dbname=name)
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield db
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--chunks", type=int, default=50_000, help="the namespace's chunks")
    ap.add_argument("--others", type=int, default=2, help="namespaces of the same files beside")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--baseline", help="git revision to compare against")
    ap.add_argument(
        "--unsettled", action="store_true", help="measure right after the syncs, no VACUUM ANALYZE"
    )
    ap.add_argument("--url", default=os.environ.get("MEMORY_LS_PG_URL", ""))
    ap.add_argument("--side", help=argparse.SUPPRESS)  # internal: run one side at this URL
    ap.add_argument("--code", default=str(REPO), help=argparse.SUPPRESS)  # ... with this code
    args = ap.parse_args(argv)
    if args.side:
        res = side(
            Path(args.code),
            args.side,
            args.chunks,
            args.others,
            args.queries,
            args.seed,
            not args.unsettled,
        )
        print(json.dumps(res))
        return 0
    results: dict[str, Any] = {}
    with (
        postgres(args.url) as url,
        tempfile.TemporaryDirectory() as tmp,
        baseline_tree(args.baseline, Path(tmp) / "baseline") as base,
    ):
        sides = ({f"baseline {args.baseline}": base} if base else {}) | {"this tree": REPO}
        for label, tree in sides.items():
            log(f"{label}:")
            cmd = [sys.executable, str(Path(__file__).resolve()), "--code", str(tree)]
            cmd += ["--chunks", str(args.chunks), "--others", str(args.others)]
            cmd += ["--queries", str(args.queries), "--seed", str(args.seed)]
            cmd += ["--unsettled"] if args.unsettled else []
            with scratch_db(url) as db:
                run = [*cmd, "--side", db]
                done = subprocess.run(run, check=True, stdout=subprocess.PIPE, text=True)
            results[label] = json.loads(done.stdout.strip().splitlines()[-1])
    rows = []
    for label, r in results.items():
        a, b = r["alone"], r["beside"]
        rows.append(
            [
                label,
                r["chunks"],
                f"{a['p50']:.1f} / {a['p95']:.1f}",
                f"{b['p50']:.1f} / {b['p95']:.1f}",
                f"{b['p95'] / a['p95']:.2f}",
            ]
        )
    others = args.others * next(iter(results.values()))["chunks"]
    print(f"\nkeyword p50 / p95 ms, one namespace alone and beside {others} chunks of others\n")
    print(md_table(["code", "chunks", "alone", "beside others", "p95 ratio"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
