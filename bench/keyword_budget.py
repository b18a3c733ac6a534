"""Search at a million chunks under `query.keywordPostingsBudget`: latency and how far the
answers move from an unbudgeted search.

Builds perf.py's synthetic workspace as a keyword-only index (about 2.5 minutes and 3 GB at a
million chunks), or with `--mode hybrid` with perf.py's random-projection vectors (about 9
minutes more); `--keep DIR` keeps it for the next run. Then it runs the corpus's queries under
each variant, one process per variant and round, alternating: this tree with the shipped
settings, this tree with `--set` overrides, a baseline revision (`--baseline REV`, a git
worktree) and this tree with no budget at all (the reference). It prints p50 / p95 of
``engine.search`` (minus the query's vector time in hybrid mode) and, per variant, how many of
the reference's top 10 it returns and how often its first hit is the reference's.

    python bench/keyword_budget.py --chunks 1000000 --baseline HEAD~1
    python bench/keyword_budget.py --keep /tmp/kw --set query.keywordPostingsBudget=20000
    python bench/keyword_budget.py --mode hybrid --keep /tmp/hy --baseline HEAD~1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    REPO,
    apply_overrides,
    baseline_tree,
    env_isolate,
    log,
    md_table,
    parse_overrides,
)
from perf import Corpus, RandomProjectionProvider, lat  # noqa: E402


def provider(mode: str, seed: int) -> RandomProjectionProvider | None:
    return RandomProjectionProvider(Corpus(seed).vocab) if mode == "hybrid" else None


def build(folder: Path, chunks: int, seed: int, n_queries: int, mode: str) -> None:
    """The workspace, its index and the queries, unless ``folder`` holds them."""
    if (folder / "queries.json").exists():
        return
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    corpus = Corpus(seed)
    corpus.write_workspace(folder / "ws", max(100, chunks // 110), chunks)
    t0 = time.perf_counter()
    rp = provider(mode, seed)
    with MemoryEngine(folder / "ws", Settings(), provider=rp, index_path=folder / "i.sqlite") as e:
        e.sync("bench")
        log(f"indexed {e.status()['chunks']} chunks in {time.perf_counter() - t0:.0f} s")
    (folder / "queries.json").write_text(json.dumps(corpus.queries(n_queries)))


def measure(folder: Path, overrides: list[str], mode: str, seed: int) -> dict[str, Any]:
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    settings = Settings()
    apply_overrides(settings, parse_overrides(overrides))
    queries = json.loads((folder / "queries.json").read_text())
    times, answers = [], []
    rp = provider(mode, seed)
    with MemoryEngine(folder / "ws", settings, provider=rp, index_path=folder / "i.sqlite") as e:
        for q in queries[:10]:  # connections, statements, the page cache, the vectors
            e.search(q, mode=mode)
        for q in queries:
            t0 = time.perf_counter()
            resp = e.search(q, mode=mode, max_results=10, min_score=0)
            spent = time.perf_counter() - t0 - (rp.last_query_s if rp else 0.0)
            times.append(spent * 1000)
            answers.append([f"{h.path}#{h.start_line}" for h in resp.results])
    return {"latency": lat(times), "answers": answers}


def agreement(answers: list[list[str]], reference: list[list[str]]) -> tuple[float, float]:
    """(share of the reference's top 10 returned, share of queries with its first hit)."""
    shared = sum(len(set(a) & set(r)) for a, r in zip(answers, reference, strict=True))
    first = sum(1 for a, r in zip(answers, reference, strict=True) if a[:1] == r[:1])
    return shared / max(1, sum(map(len, reference))), first / max(1, len(reference))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", type=Path, help="build into (or reuse) this folder")
    ap.add_argument("--baseline", help="a git revision, measured with its shipped settings")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--mode", choices=("keyword", "hybrid"), default="keyword")
    ap.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)  # folder, tree, overrides
    args = ap.parse_args(argv)
    if args.measure:
        folder, tree, overrides = args.measure
        sys.path.insert(0, tree)  # ahead of this checkout, which common.py put first
        env_isolate(Path(folder))
        res = measure(Path(folder), json.loads(overrides), args.mode, args.seed)
        print(json.dumps(res))
        return 0
    with tempfile.TemporaryDirectory(prefix="memory-ls-kwbudget-") as name:
        folder = args.keep or Path(name)
        folder.mkdir(parents=True, exist_ok=True)
        env_isolate(folder)
        build(folder, args.chunks, args.seed, args.queries, args.mode)
        variants: list[tuple[str, str, list[str]]] = [("this tree", str(REPO), [])]
        if args.set:
            variants.append((f"this tree, {' '.join(args.set)}", str(REPO), args.set))
        with baseline_tree(args.baseline, Path(name) / "baseline") as base:
            if base is not None:
                variants.append((f"baseline {args.baseline}", str(base), []))
            variants.append(("no budget (reference)", str(REPO), ["query.keywordPostingsBudget=0"]))
            runs: dict[str, list[dict[str, Any]]] = {}
            for turn in range(args.rounds):
                for label, tree, sets in variants:
                    cmd = [sys.executable, __file__, "--mode", args.mode, "--seed", str(args.seed)]
                    cmd += ["--measure", str(folder), tree]
                    out = subprocess.run(
                        [*cmd, json.dumps(sets)], capture_output=True, text=True, check=True
                    )
                    runs.setdefault(label, []).append(json.loads(out.stdout.splitlines()[-1]))
                    log(f"{label} round {turn + 1}: {runs[label][-1]['latency']}")
        reference = runs["no budget (reference)"][-1]["answers"]
        rows = []
        for label, done in runs.items():
            shared, first = agreement(done[-1]["answers"], reference)
            spans = "; ".join("{p50:.1f} / {p95:.1f}".format(**d["latency"]) for d in done)
            rows.append([label, spans, f"{shared:.1%}", f"{first:.1%}"])
        print(md_table(["variant", "p50 / p95 ms per round", "top 10 shared", "same first"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
