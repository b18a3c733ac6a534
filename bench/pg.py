"""The team index (PostgreSQL + pgvector) side by side with SQLite, on one synthetic workspace.

Measures, for both backends in one run: sync time (keyword phase and vectors), search latency
p50 / p95 (keyword and hybrid) with one client and with N concurrent clients (threads sharing
one engine, `store.postgres.poolSize` = N), and for PostgreSQL the HNSW build time (incremental
during the sync, and a bulk rebuild) and recall@10 of the HNSW search against exact search over
the same vectors. The workspace and queries come from bench/perf.py's generator; vectors from
its random-projection "provider" (bag-of-words sums of fixed random 384-d vectors: clustered by
topic as real embeddings are, unlike uniform random vectors, the worst case for HNSW).

    python bench/pg.py --chunks 100000            # starts PostgreSQL (tests/support/pg_server.sh)
    python bench/pg.py --chunks 100000 --url postgresql://...   # or MEMORY_LS_PG_URL
    python bench/pg.py --chunks 10000 --pooler    # and through PgBouncer in transaction mode
    python bench/pg.py --shared-buffers 128MB     # its own server at initdb's default cache

The server it starts itself gets ``shared_buffers`` 1 GB (``--shared-buffers``): a server sized
for its data, as managed services are (about a quarter of their memory), where initdb's 128 MB
is smaller than the HNSW index of 100k chunks alone. The table says what the server had.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, env_isolate, log, md_table, postgres  # noqa: E402
from perf import VECTOR_KINDS, Corpus, RandomProjectionProvider, lat  # noqa: E402


def latencies(engine: Any, queries: list[str], mode: str, clients: int) -> dict[str, float]:
    """Per-query latency (ms) of ``queries`` run by ``clients`` threads at once."""
    for q in queries[:5]:
        engine.search(q, mode=mode)
    out: list[float] = []
    lock = threading.Lock()
    it = iter(queries * max(1, clients // 4))

    def run() -> None:
        while True:
            with lock:
                q = next(it, None)
            if q is None:
                return
            resp = engine.search(q, mode=mode)
            if resp.mode != mode:
                raise RuntimeError(f"asked for {mode}, got {resp.mode}: {resp.fallback_reason}")
            with lock:
                out.append(resp.took_ms)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat(out)


def measure(engine: Any, queries: list[str], clients: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    report = engine.sync("bench")
    res: dict[str, Any] = {"syncS": time.perf_counter() - t0, "embedded": report.embedded}
    res["chunks"] = engine.status()["chunks"]
    log(f"  synced {res['chunks']} chunks in {res['syncS']:.1f} s")
    return res | searches(engine, queries, clients)


def searches(engine: Any, queries: list[str], clients: int) -> dict[str, Any]:
    res: dict[str, Any] = {}
    for mode in ("keyword", "hybrid"):
        for n in (1, clients):
            res[f"{mode}{n}"] = latencies(engine, queries, mode, n)
            log(f"  {mode} x{n}: {fmt(res[f'{mode}{n}'])}")
    return res


def fmt(d: dict[str, float]) -> str:
    return f"{d['p50']:.1f} / {d['p95']:.1f} ms"


def recall(store: Any, ids: np.ndarray, mat: np.ndarray, vecs: list[np.ndarray], k: int) -> float:
    """Mean share of the exact top 10 found in the first 10 of an HNSW search for k rows."""
    hits = []
    for v in vecs:
        exact = set(ids[np.argsort(-(mat @ v))[:10]].tolist())
        got = [cid for cid, _ in store.vec_search(v, k)][:10]
        hits.append(len(exact & set(got)) / 10)
    return float(np.mean(hits))


def hnsw(url: str, engine: Any, queries: list[str], rp: Any) -> dict[str, Any]:
    """Recall@10 of pgvector's HNSW against exact search over the same vectors, and a bulk
    rebuild of the index. Two query sets: passages of the corpus (in-distribution, as real
    queries of a real model are) and the benchmark's 1-4 word queries, whose random-projection
    vectors lie far from every chunk (near-equal low similarities: the worst case), the latter
    also with the engine's own candidate pool (50)."""
    import psycopg

    from memory_ls.index.postgres import store as pg_store

    db = engine.route.team.db
    with pg_store.reader(db) as store:
        ids, mat = store.all_embeddings()
        texts = [
            r[0]
            for r in store.q(
                "SELECT left(text, 300) FROM memory_chunks WHERE ns = %s ORDER BY random() "
                "LIMIT %s",
                (store.ns, len(queries)),
            )
        ]
        passages = [rp.embed_query(t) for t in texts]
        words = [rp.embed_query(q) for q in queries]
        out = {
            "recall10": recall(store, ids, mat, passages, 10),
            "recall10Words": recall(store, ids, mat, words, 10),
            "recall10WordsPool50": recall(store, ids, mat, words, 50),
        }
    name = f"memory_vectors_hnsw_{mat.shape[1]}"
    with psycopg.connect(url, autocommit=True) as conn:  # the bench's own connection
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(f"DROP INDEX {name}")
        t0 = time.perf_counter()
        conn.execute(
            f"CREATE INDEX {name} ON memory_vectors USING hnsw "
            f"((embedding::halfvec({mat.shape[1]})) halfvec_cosine_ops) WHERE dims = {mat.shape[1]}"
        )
        out["bulkBuildS"] = time.perf_counter() - t0
        size = conn.execute(f"SELECT pg_relation_size('{name}')").fetchone()
        out["indexMB"] = (size[0] if size else 0) / 2**20
    return out


def server_memory(engine: Any) -> dict[str, Any]:
    """The server's buffer cache against the search indexes, as ``memory-ls status`` says."""
    from memory_ls.index.postgres import store as pg_store
    from memory_ls.index.postgres.sizing import search_memory

    with pg_store.reader(engine.route.team.db) as store:
        return search_memory(store).to_json()


def run(args: argparse.Namespace, url: str) -> dict[str, Any]:
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    with tempfile.TemporaryDirectory(prefix="memory-ls-pgbench-", dir=args.tmp) as name:
        tmp = Path(name)
        env_isolate(tmp)
        corpus = Corpus(args.seed)
        files = args.files or max(1000, args.chunks // 11)
        info = corpus.write_workspace(tmp / "ws", files, args.chunks)
        queries = corpus.queries(args.queries)
        log(f"generated {info['files']} files, {info['textMB']:.0f} MB")
        rp = RandomProjectionProvider(corpus.vocab, kind=args.vectors)
        out: dict[str, Any] = {"files": info["files"], "clients": args.clients}
        log("sqlite:")
        with MemoryEngine(tmp / "ws", Settings(), provider=rp, index_path=tmp / "a.sqlite") as e:
            out["sqlite"] = measure(e, queries, args.clients)
        log("postgres:")
        s = Settings()
        s.store.backend = "postgres"
        s.store.postgres.url = url
        s.store.postgres.namespace = f"bench-{uuid.uuid4().hex[:8]}"
        s.store.postgres.pool_size = args.clients
        s.store.postgres.timeout_ms = 30_000  # measure slow queries, do not fall back on them
        with MemoryEngine(tmp / "ws", s, provider=rp, index_path=tmp / "b.sqlite") as e:
            out["postgres"] = measure(e, queries, args.clients)
            out["server"] = server_memory(e)
            out["hnsw"] = hnsw(url, e, queries, rp)
            h = out["hnsw"]
            log(f"  HNSW recall@10 {h['recall10']:.3f}, bulk build {h['bulkBuildS']:.1f} s")
            if args.pooler:  # the direct side again, in the state the pooled side finds
                log("postgres again, direct, after the bulk build:")
                out["direct"] = searches(e, queries, args.clients)
                log("postgres through PgBouncer (transaction mode, 3 server connections):")
                with bouncer(url) as pooled:
                    p = copy.deepcopy(s)
                    p.store.postgres.url, p.store.postgres.pooler = pooled, "transaction"
                    c = tmp / "c.sqlite"
                    with MemoryEngine(tmp / "ws", p, provider=rp, index_path=c) as pe:
                        pe.sync("bench")  # the local fallback index; pushes nothing
                        out["pooled"] = searches(pe, queries, args.clients)
        return out


@contextmanager
def bouncer(url: str) -> Iterator[str]:
    script = str(REPO / "tests" / "support" / "pg_server.sh")
    folder = tempfile.mkdtemp(prefix="memory-ls-bench-bouncer-", dir="/tmp")
    try:
        cmd = ["bash", script, "bouncer", folder, url, sys.executable]
        yield subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
    finally:
        subprocess.run(["bash", script, "rm", folder])


def report(r: dict[str, Any]) -> str:
    a, b, n = r["sqlite"], r["postgres"], r["clients"]
    rows = [
        ["chunks", a["chunks"], b["chunks"]],
        ["full sync (keyword + vectors)", f"{a['syncS']:.1f} s", f"{b['syncS']:.1f} s"],
    ]
    for mode in ("keyword", "hybrid"):
        rows.append([f"{mode} p50 / p95, 1 client", fmt(a[f"{mode}1"]), fmt(b[f"{mode}1"])])
        rows.append([f"{mode} p50 / p95, {n} clients", fmt(a[f"{mode}{n}"]), fmt(b[f"{mode}{n}"])])
    if "pooled" in r:
        d, p = r["direct"], r["pooled"]
        for mode in ("keyword", "hybrid"):
            for k in (1, n):
                label = f"{mode} x{k} after the bulk build: direct / through PgBouncer"
                rows.append([label, "-", f"{fmt(d[f'{mode}{k}'])} / {fmt(p[f'{mode}{k}'])}"])
    m = r["server"]
    indexes = ", ".join(f"{k} {v:.0f}" for k, v in m["searchIndexesMB"].items())
    rows.append(
        [
            "server shared_buffers / search indexes",
            "-",
            f"{m['sharedBuffersMB']:.0f} MB / {indexes} MB",
        ]
    )
    h = r["hnsw"]
    rows.append(["vector recall@10 vs exact, passages", "1.000 (exact)", f"{h['recall10']:.3f}"])
    rows.append(
        [
            "... 1-4 word queries, k 10 / k 50",
            "1.000 (exact)",
            f"{h['recall10Words']:.3f} / {h['recall10WordsPool50']:.3f}",
        ]
    )
    rows.append(["HNSW bulk build", "-", f"{h['bulkBuildS']:.1f} s ({h['indexMB']:.0f} MB)"])
    return md_table(["metric", "SQLite", "PostgreSQL + pgvector"], rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=0, help="default: chunks / 11")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--url", default=os.environ.get("MEMORY_LS_PG_URL", ""))
    ap.add_argument("--tmp", default=None, help="where the workspace is generated")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--vectors",
        choices=VECTOR_KINDS,
        default="flat",
        help="the benchmark provider's vectors (see bench/perf.py; flat: the README's figures)",
    )
    ap.add_argument(
        "--pooler",
        action="store_true",
        help="also search through PgBouncer in transaction mode in front of the same server "
        "(tests/support/pg_server.sh bouncer; needs Debian's pgbouncer)",
    )
    ap.add_argument(
        "--shared-buffers",
        default="1GB",
        help="shared_buffers of the server this script starts (not of one given by --url)",
    )
    args = ap.parse_args(argv)
    with postgres(args.url, args.shared_buffers) as url:
        res = run(args, url)
    print(report(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
