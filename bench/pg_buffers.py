"""One client's search latency on the team index at several ``shared_buffers`` sizes, side by
side: one namespace synced once (bench/perf.py's workspace and vectors, as bench/pg.py), then
rounds that restart the server with each size in turn, warm it with one pass of the queries,
and measure hybrid and keyword searches. Also prints the buffer reads a search made (pages
PostgreSQL had to copy in because its cache did not hold them).

    python bench/pg_buffers.py --chunks 100000 --sizes 128MB,1GB --rounds 3

It starts (and deletes) its own server with tests/pg_server.sh: it must restart it.
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
from common import REPO, env_isolate, log, md_table  # noqa: E402
from perf import VECTOR_KINDS, Corpus, RandomProjectionProvider  # noqa: E402
from pg import fmt, latencies  # noqa: E402

SCRIPT = str(REPO / "tests" / "pg_server.sh")


def up(folder: str) -> str:
    """Start the server in ``folder`` (made the first time); its URL."""
    cmd = ["bash", SCRIPT, "up", folder, sys.executable]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def restart(folder: str, url: str, shared_buffers: str) -> str:
    """Restart the running server with ``shared_buffers``; its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}'")
    subprocess.run(["bash", SCRIPT, "down", folder], check=True)
    return up(folder)


def blocks_read(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        # Counters reach the view when a backend goes idle: a new connection sees them.
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
            queries = corpus.queries(args.queries)
            rp = RandomProjectionProvider(corpus.vocab, kind=args.vectors)
            s = Settings()
            s.store.backend = "postgres"
            s.store.postgres.url = url = up(folder)
            s.store.postgres.namespace = f"bench-{uuid.uuid4().hex[:8]}"
            s.store.postgres.timeout_ms = 30_000  # measure slow queries, never fall back
            with MemoryEngine(tmp / "ws", s, provider=rp, index_path=tmp / "b.sqlite") as e:
                e.sync("bench")
                log(f"synced {e.status()['chunks']} chunks")
            rows: list[list[Any]] = []
            for r in range(args.rounds):
                for size in sizes:
                    s.store.postgres.url = url = restart(folder, url, size)
                    with MemoryEngine(tmp / "ws", s, provider=rp, index_path=tmp / "b.sqlite") as e:
                        e.sync("bench")
                        latencies(e, queries, "hybrid", 1)  # the pages a search needs, read once
                        before = blocks_read(url)
                        hybrid = latencies(e, queries, "hybrid", 1)
                        reads = (blocks_read(url) - before) / len(queries)
                        keyword = latencies(e, queries, "keyword", 1)
                    log(f"round {r + 1}, {size}: hybrid {fmt(hybrid)}, keyword {fmt(keyword)}")
                    rows.append([r + 1, size, fmt(hybrid), fmt(keyword), f"{reads:.0f}"])
    finally:
        subprocess.run(["bash", SCRIPT, "rm", folder])
    head = ["round", "shared_buffers", "hybrid p50 / p95", "keyword p50 / p95", "reads a search"]
    print(md_table(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
