"""Filtered searches (`file:`, `after:`, `source:`) at scale: latency and how many hits they
find, this tree against a baseline revision, in one run on one index.

Builds perf.py's synthetic workspace with its random-projection vectors (about 50 s at 100k
chunks; `--keep DIR` keeps it), then runs the corpus's queries plain and with each filter, one
process per side and round, alternating. Before 2026-12-05 the filters applied to the
candidates only, so a narrow one found little or nothing; now the chunks a path, date or
source filter lets through are scored when they are few (`search/retrieve.py`, SCOPE_MAX).

    python bench/filtered.py --baseline HEAD~1 [--chunks 100000] [--rounds 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, baseline_tree, env_isolate, log, md_table  # noqa: E402
from keyword_budget import build, provider  # noqa: E402
from perf import lat  # noqa: E402

FILTERS = {
    "none": "",
    "file: one week's folder prefix": " file:memory/2024/2024-01-0",
    "after: a range with no notes": " after:2030-01-01",
    "after: the last year": " after:2026-01-01",
    "source:memory": " source:memory",
}


def measure(folder: Path, seed: int) -> dict[str, Any]:
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    queries = json.loads((folder / "queries.json").read_text())[:100]
    rp = provider("hybrid", seed)
    out: dict[str, Any] = {}
    with MemoryEngine(folder / "ws", Settings(), provider=rp, index_path=folder / "i.sqlite") as e:
        for q in queries[:10]:
            e.search(q)
        for name, suffix in FILTERS.items():
            times, hits = [], []
            for q in queries:
                t0 = time.perf_counter()
                resp = e.search(q + suffix)
                times.append((time.perf_counter() - t0 - rp.last_query_s) * 1000)
                hits.append(len(resp.results))
            out[name] = {"latency": lat(times), "hits": statistics.mean(hits)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", help="git revision to compare against")
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", type=Path, help="build into (or reuse) this folder")
    ap.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)  # folder, tree
    args = ap.parse_args(argv)
    if args.measure:
        folder, tree = args.measure
        sys.path.insert(0, tree)  # ahead of this checkout, which common.py put first
        env_isolate(Path(folder))
        print(json.dumps(measure(Path(folder), args.seed)))
        return 0
    with tempfile.TemporaryDirectory(prefix="memory-ls-filtered-") as name:
        folder = args.keep or Path(name)
        folder.mkdir(parents=True, exist_ok=True)
        env_isolate(folder)
        build(folder, args.chunks, args.seed, 200, "hybrid")
        with baseline_tree(args.baseline, Path(name) / "baseline") as base:
            sides = {"this tree": REPO} | ({f"baseline {args.baseline}": base} if base else {})
            runs: dict[str, list[dict[str, Any]]] = {k: [] for k in sides}
            for turn in range(args.rounds):
                for label, tree in sides.items():
                    cmd = [sys.executable, __file__, "--seed", str(args.seed)]
                    cmd += ["--measure", str(folder), str(tree)]
                    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
                    runs[label].append(json.loads(out.stdout.splitlines()[-1]))
                    log(f"{label} round {turn + 1} done")
    rows = []
    for name in FILTERS:
        for label, done in runs.items():
            spans = "; ".join("{p50:.1f} / {p95:.1f}".format(**d[name]["latency"]) for d in done)
            rows.append([name, label, spans, f"{done[-1][name]['hits']:.2f}"])
    print(md_table(["filter", "code", "p50 / p95 ms per round", "hits a search"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
