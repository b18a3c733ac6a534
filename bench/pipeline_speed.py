"""Search latency of the engine, this checkout against another (``--baseline DIR``), side by side.

Builds one synthetic workspace (N notes of generated words, dated file names), indexes it once
per checkout (outside the timing), then times the same queries through ``MemoryEngine.search``
in rounds that alternate the checkouts (A B A B ...), so a drifting machine moves both. Keyword
mode always; hybrid too with ``--model PATH`` (a local GGUF: each query's embedding is made
once before timing, and the engine's query-vector cache answers it in the timed rounds).

    python bench/pipeline_speed.py --baseline /tmp/base --notes 2000 --rounds 5
    python bench/pipeline_speed.py --baseline /tmp/base --model MODEL.gguf
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_workspace(root: Path, notes: int, seed: int = 7) -> list[str]:
    """``notes`` notes of generated words, and queries drawn from their words."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(5000)]  # fmt: skip
    weights = [1 / (i + 1) for i in range(len(vocab))]  # Zipf-like
    (root / "memory").mkdir(parents=True, exist_ok=True)
    for i in range(notes):
        day = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
        lines = [f"# Note {i}", ""]
        for _ in range(rng.randint(4, 20)):
            lines.append(" ".join(rng.choices(vocab, weights, k=rng.randint(6, 16))))
        (root / "memory" / f"{day}-note-{i}.md").write_text("\n".join(lines) + "\n")
    return [" ".join(rng.choices(vocab[50:2000], k=rng.randint(1, 4))) for _ in range(200)]


def child(args: argparse.Namespace) -> int:
    """One round in one checkout: search every query, print the latencies as JSON."""
    sys.path.insert(0, str(args.checkout))
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    s = Settings(provider="none")
    if args.model:
        s.provider = "local"
        s.local.model_path = args.model
    queries = json.loads(Path(args.queries).read_text())
    e = MemoryEngine(Path(args.workspace), s, index_path=Path(args.index))
    try:
        e.sync("bench")
        out: dict[str, list[float]] = {}
        for mode in ("keyword", "hybrid") if args.model else ("keyword",):
            for q in queries:  # warm: query vectors cached, readers open
                e.search(q, mode=mode)
            times = []
            for q in queries:
                t0 = time.perf_counter()
                e.search(q, mode=mode)
                times.append((time.perf_counter() - t0) * 1000)
            out[mode] = times
    finally:
        e.close()
    print(json.dumps(out))
    return 0


def run_round(checkout: Path, work: Path, tag: str, model: str | None) -> dict[str, list[float]]:
    cmd = [sys.executable, __file__, "--child", "--checkout", str(checkout)]
    cmd += ["--workspace", str(work / "ws"), "--queries", str(work / "queries.json")]
    cmd += ["--index", str(work / f"{tag}.sqlite")] + (["--model", model] if model else [])
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, help="another checkout to compare with")
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--model", help="a local GGUF model: hybrid mode too")
    for hidden in ("--checkout", "--workspace", "--queries", "--index"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    checkouts = {"this": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    with tempfile.TemporaryDirectory(prefix="memory-ls-speed-") as tmp:
        work = Path(tmp)
        queries = make_workspace(work / "ws", args.notes)
        (work / "queries.json").write_text(json.dumps(queries))
        got: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}
        for _ in range(args.rounds):
            for name, path in checkouts.items():
                for mode, times in run_round(path, work, name, args.model).items():
                    got[name].setdefault(mode, []).extend(times)
    print(f"{args.notes} notes, {len(queries)} queries x {args.rounds} rounds, alternating")
    for mode in got["this"]:
        row = []
        for name in checkouts:
            t = sorted(got[name][mode])
            p50, p95 = statistics.median(t), t[int(len(t) * 0.95)]
            row.append(f"{name} p50 {p50:.2f} ms p95 {p95:.2f} ms")
        if args.baseline:
            ratio = statistics.median(got["this"][mode]) / statistics.median(got["baseline"][mode])
            row.append(f"ratio this/baseline (p50) {ratio:.3f}")
        print(f"{mode}: " + "; ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
