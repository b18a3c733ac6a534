"""The engine's in-memory vector search at 10k, 100k and 1M vectors: latency, recall, memory.

    python bench/vector_scale.py [--sizes 10000,100000,1000000] [--queries 100]
    python bench/vector_scale.py --real [--queries 200]

Clustered synthetic unit vectors (384-d; topics as Gaussian clusters, as real embeddings are,
not uniform random ones) go through ``VectorIndex`` as the engine uses it: below
``vector.LARGE`` a float32 matrix scanned exactly, from it float16 rows with sign codes (see
memory_ls/search/vector.py). Each size runs in its own process (clean peak RSS). Reports the KNN
p50/p95 (ms, excluding the query embedding), recall@10 against an exact float32 scan of the
original vectors, and the process's resident memory after the first search (the test data
itself freed). Queries are new points drawn
around the same topics (a question about something the notes discuss).

``--real``: instead, the real all-MiniLM-L6-v2 vectors that ``bench/eval.py`` cached for
SciFact and LoCoMo (chunks and lines, about 59k) and the embeddings of the sets' own questions,
searched in the large mode (sign codes, forced at this size) with the shipped re-score pool and
with the pool scaled to the share of the index it is at 1M vectors (2,048 of 1M), so the sign
codes' ranking of real embeddings is measured at a million's selectivity.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

import numpy as np
from common import md_table, percentile

DIMS = 384
TOPICS = 2000
NOISE = 0.06  # per dimension around a unit topic vector: neighbours at cosine 0.3-0.6


def vectors(rng: np.random.Generator, centers: np.ndarray, n: int) -> np.ndarray:
    out = np.empty((n, DIMS), dtype=np.float32)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        x = centers[rng.integers(0, len(centers), m)]
        x = x + rng.standard_normal((m, DIMS)).astype(np.float32) * NOISE
        out[s : s + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def current_rss_mb() -> float:
    """Resident memory now (Linux), not the peak: the generation's own arrays are gone."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * 4096 / (1024 * 1024)


def measure(index: Any, queries: np.ndarray, truth: list[set[int]]) -> tuple[list, list]:
    """Each query's KNN latency (ms) and recall@10 against its exact top 10."""
    lat, recall = [], []
    for q, want in zip(queries, truth, strict=True):
        t0 = time.perf_counter()
        hits, _ = index.knn(q, 10)
        lat.append((time.perf_counter() - t0) * 1000)
        recall.append(len(want & {i for i, _ in hits}) / 10)
    return lat, recall


def worker(n: int, n_queries: int) -> dict[str, float]:
    from memory_ls.search.vector import LARGE, VectorIndex

    rng = np.random.default_rng(11)
    centers = rng.standard_normal((TOPICS, DIMS)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    mat = vectors(rng, centers, n)
    queries = vectors(rng, centers, n_queries)
    truth = []
    for q in queries:  # exact float32 over the original vectors, in blocks
        scores = np.concatenate([mat[s : s + 100_000] @ q for s in range(0, n, 100_000)])
        truth.append(set(np.argpartition(-scores, 10)[:10].tolist()))
    ids = np.arange(n, dtype=np.int64)
    # What the store hands over: float16 rows in large mode, float32 below it.
    stored = mat.astype(np.float16) if n >= LARGE else mat
    del mat
    index = VectorIndex(lambda _: (ids, stored))
    t0 = time.perf_counter()
    index.search(queries[0], 10)
    first_ms = (time.perf_counter() - t0) * 1000
    rss = current_rss_mb()
    lat, recall = measure(index, queries, truth)
    return {
        "n": n,
        "mode": "float16 + sign codes" if n >= LARGE else "float32 exact",
        "firstSearchMs": first_ms,
        "p50": percentile(lat, 50),
        "p95": percentile(lat, 95),
        "recall10": float(np.mean(recall)),
        "rssAfterFirstSearchMB": rss,
    }


def real(n_queries: int) -> list[list[object]]:
    from common import find_default_model, real_embeddings

    from memory_ls.search import vector

    model = find_default_model()
    if model is None:
        raise SystemExit("no local model: memory-ls model pull")
    data, queries = real_embeddings(model, queries=n_queries)
    n = len(data)
    truth = [set(np.argpartition(-(data @ q), 10)[:10].tolist()) for q in queries]
    ids = np.arange(n, dtype=np.int64)
    stored = data.astype(np.float16)
    rows: list[list[object]] = []
    shipped = vector.RESCORE
    for pool in (shipped, max(10, round(shipped * n / 1_000_000))):
        vector.RESCORE = pool
        index = vector.VectorIndex(lambda _: (ids, stored), large=1)
        lat, recall = measure(index, queries, truth)
        rows.append(
            [
                f"{n:,} real",
                f"sign codes, re-score {pool:,} ({pool / n:.2%})",
                f"{percentile(lat, 50):.1f} / {percentile(lat, 95):.1f}",
                f"{float(np.mean(recall)):.3f}",
                f"{float(np.min(recall)):.1f}",
            ]
        )
    vector.RESCORE = shipped
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--real", action="store_true", help="real embeddings (see above)")
    args = ap.parse_args()
    if args.real:
        header = ["vectors", "mode", "KNN p50 / p95 (ms)", "recall@10", "worst query"]
        print(md_table(header, real(args.queries)))
        return
    if args.worker:
        print(json.dumps(worker(args.worker, args.queries)))
        return
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        out = subprocess.run(
            [sys.executable, __file__, "--worker", str(n), "--queries", str(args.queries)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{n:,}: {r}", file=sys.stderr)
        rows.append(
            [
                f"{n:,}",
                r["mode"],
                f"{r['p50']:.1f} / {r['p95']:.1f}",
                f"{r['recall10']:.3f}",
                f"{r['firstSearchMs']:.0f}",
                f"{r['rssAfterFirstSearchMB']:.0f}",
            ]
        )
    header = ["vectors", "mode", "KNN p50 / p95 (ms)", "recall@10", "first search (ms)", "RSS (MB)"]
    print(md_table(header, rows))


if __name__ == "__main__":
    main()
