"""One client's search latency on the team index at several ``shared_buffers`` sizes, side by
side: one namespace synced once (bench/perf.py's workspace and vectors, as bench/pg.py), then
rounds that restart the server with each size in turn, warm it with one pass of other queries,
and measure hybrid and keyword searches, each with queries of its own (a new engine each time,
so that no search finds its words' frequencies counted by an earlier one). Also prints the
buffer reads a search made (pages PostgreSQL had to copy in because its cache did not hold
them).

    python bench/pg_buffers.py --chunks 100000 --sizes 128MB,1GB --rounds 3

It starts (and deletes) its own server with tests/support/pg_server.sh: it must restart it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import PG_SCRIPT, env_isolate, log, md_table, pg_restart, pg_up  # noqa: E402
from perf import VECTOR_KINDS, Corpus, RandomProjectionProvider  # noqa: E402
from pg import fmt, latencies  # noqa: E402


def blocks_read(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        # Backends report their counters at most once a second (PostgreSQL 15 on), so a pass's
        # figure may hold a little of the pass before it.
        row = conn.execute(
            "SELECT blks_read FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--sizes", default="128MB,1GB", help="shared_buffers values, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--vectors", choices=VECTOR_KINDS, default="flat")
    args = ap.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]

    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    folder = tempfile.mkdtemp(prefix="memory-ls-bench-pg-", dir="/tmp")
    try:
        with tempfile.TemporaryDirectory(prefix="memory-ls-pgbuf-") as name:
            tmp = Path(name)
            env_isolate(tmp)
            corpus = Corpus(args.seed)
            corpus.write_workspace(tmp / "ws", max(1000, args.chunks // 11), args.chunks)
            n = args.queries
            every = corpus.queries(3 * n)
            warm, queries, words = every[:n], every[n : 2 * n], every[2 * n :]
            rp = RandomProjectionProvider(corpus.vocab, kind=args.vectors)
            s = Settings()
            s.store.backend = "postgres"
            s.store.postgres.url = url = pg_up(folder)
            s.store.postgres.namespace = f"bench-{uuid.uuid4().hex[:8]}"
            s.store.postgres.timeout_ms = 30_000  # measure slow queries, never fall back
            with MemoryEngine(tmp / "ws", s, provider=rp, index_path=tmp / "b.sqlite") as e:
                e.sync("bench")
                log(f"synced {e.status()['chunks']} chunks")
            rows: list[list[Any]] = []
            for r in range(args.rounds):
                for size in sizes:
                    s.store.postgres.url = url = pg_restart(folder, url, size)
                    with MemoryEngine(tmp / "ws", s, provider=rp, index_path=tmp / "b.sqlite") as e:
                        e.sync("bench")
                        latencies(e, warm, "hybrid", 1)  # the pages searches need, read once
                        before = blocks_read(url)
                        hybrid = latencies(e, queries, "hybrid", 1)
                        reads = (blocks_read(url) - before) / len(queries)
                        keyword = latencies(e, words, "keyword", 1)
                    log(f"round {r + 1}, {size}: hybrid {fmt(hybrid)}, keyword {fmt(keyword)}")
                    rows.append([r + 1, size, fmt(hybrid), fmt(keyword), f"{reads:.0f}"])
    finally:
        subprocess.run(["bash", PG_SCRIPT, "rm", folder])
    head = ["round", "shared_buffers", "hybrid p50 / p95", "keyword p50 / p95", "reads a search"]
    print(md_table(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
