"""Remote embedding throughput against the local stub server with artificial latency.

    python bench/remote.py [--files 200] [--latency-ms 50]

Indexes a synthetic workspace through the OpenAI wire format served by tests/support/http_stub.py on
127.0.0.1, batched (remote.batchSize 64) and one text per request (batchSize 1), then rebuilds
with a warm cache: the rebuild must send no embedding request at all.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
sys.path.insert(0, str(REPO))

from http_stub import StubServer  # noqa: E402

from memory_ls.engine import MemoryEngine  # noqa: E402
from memory_ls.settings import Settings  # noqa: E402

WORDS = [
    "redis",
    "cache",
    "deploy",
    "latency",
    "token",
    "bucket",
    "incident",
    "rollback",
    "schema",
    "index",
    "query",
    "vector",
    "memory",
    "agent",
    "session",
    "review",
    "design",
    "budget",
    "alert",
    "owner",
    "cursor",
    "page",
    "limit",
]


def make_workspace(root: Path, files: int) -> None:
    rng = random.Random(1)
    for i in range(files):
        lines = [" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(30)]
        p = root / "memory" / f"2026-01-{1 + i % 28:02d}-note-{i}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# Note {i}\n\n" + "\n".join(lines) + "\n")


def run(root: Path, stub: StubServer, batch: int, idx: Path, force: bool) -> tuple[float, int, int]:
    s = Settings(provider="openai")
    s.remote.base_url = stub.url + "/v1"
    s.remote.api_key = "sk-bench"
    s.remote.batch_size = batch
    before = stub.count("/embeddings")
    e = MemoryEngine(root, s, index_path=idx)
    t0 = time.perf_counter()
    report = e.sync("bench", force=force)
    took = time.perf_counter() - t0
    e.close()
    return took, stub.count("/embeddings") - before, report.embedded


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--latency-ms", type=float, default=50)
    args = ap.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        StubServer(api_key="sk-bench", dims=384, latency=args.latency_ms / 1000) as stub,
    ):
        os.environ["XDG_CACHE_HOME"] = tmp
        root = Path(tmp) / "ws"
        make_workspace(root, args.files)
        rows = []
        for label, batch in (("batched (64/request)", 64), ("one by one", 1)):
            idx = Path(tmp) / f"{batch}.sqlite"
            took, requests, embedded = run(root, stub, batch, idx, force=False)
            rows.append((label, took, requests, embedded))
            if batch == 64:
                took, requests, embedded = run(root, stub, batch, idx, force=True)
                rows.append(("full rebuild, warm cache", took, requests, embedded))
        print(f"{args.files} files, {args.latency_ms:.0f} ms latency per request\n")
        print("| run | seconds | embedding requests | chunks embedded | chunks/s |")
        print("|---|---|---|---|---|")
        for label, took, requests, embedded in rows:
            rate = embedded / took if embedded else 0
            print(f"| {label} | {took:.2f} | {requests} | {embedded} | {rate:.0f} |")


if __name__ == "__main__":
    main()
