"""What one `memory-ls search` process costs an agent: start, open the index and the local
model, search, print JSON, exit. Timed from outside (wall clock), alternating this tree with a
baseline revision (a `git worktree`) in one run, on one LoCoMo workspace indexed once.

    python bench/cli_start.py --baseline REV [--runs 10] [--eval ../shared/eval/locomo-dev]

Each side runs the same 10 questions of the set in turn; the table gives the median and p90
of the wall time, and the median of the search's own `tookMs`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, baseline_tree, env_isolate, log, md_table, percentile  # noqa: E402


def materialise(eval_dir: Path, root: Path) -> tuple[Path, list[str]]:
    """The set's first workspace as files under ``root``, and its first ten questions."""
    corpus = [json.loads(line) for line in (eval_dir / "corpus.jsonl").open(encoding="utf-8")]
    name = corpus[0]["workspace"]
    ws = root / name
    for doc in corpus:
        if doc["workspace"] == name:
            path = ws / doc["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(doc["text"], encoding="utf-8")
    queries = [json.loads(line) for line in (eval_dir / "queries.jsonl").open(encoding="utf-8")]
    return ws, [q["query"] for q in queries if q["workspace"] == name][:10]


def search(tree: Path, ws: Path, query: str) -> tuple[float, float]:
    env = os.environ | {"PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "memory_ls", "search", query, "-w", str(ws), "--json"]
    t0 = time.perf_counter()
    # From the workspace: `python -m` puts the current folder ahead of PYTHONPATH.
    out = subprocess.run(cmd, env=env, cwd=ws, capture_output=True, text=True, check=True)
    wall = (time.perf_counter() - t0) * 1000
    return wall, float(json.loads(out.stdout)["tookMs"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", help="git revision to compare against")
    ap.add_argument("--runs", type=int, default=10, help="searches per side")
    ap.add_argument("--eval", type=Path, default=REPO.parent / "shared" / "eval" / "locomo-dev")
    args = ap.parse_args()
    model = Path.home() / ".cache" / "memory-ls" / "models"
    with tempfile.TemporaryDirectory(prefix="cli-start-") as name:
        tmp = Path(name)
        ws, queries = materialise(args.eval, tmp / "ws")
        env_isolate(tmp)  # the index goes to a scratch cache; the model is linked into it
        (tmp / "xdg-cache" / "memory-ls").mkdir(parents=True)
        (tmp / "xdg-cache" / "memory-ls" / "models").symlink_to(model)
        env = os.environ | {"PYTHONPATH": str(REPO)}
        subprocess.run(
            [sys.executable, "-m", "memory_ls", "index", "-w", str(ws)],
            env=env,
            check=True,
            capture_output=True,
        )
        with baseline_tree(args.baseline, tmp / "baseline") as base:
            sides = {"this tree": REPO} | ({f"baseline {args.baseline}": base} if base else {})
            walls: dict[str, list[float]] = {k: [] for k in sides}
            took: dict[str, list[float]] = {k: [] for k in sides}
            for i in range(args.runs):
                for label, tree in sides.items():
                    w, t = search(tree, ws, queries[i % len(queries)])
                    walls[label].append(w)
                    took[label].append(t)
                log(f"run {i + 1}: " + ", ".join(f"{k} {v[-1]:.0f} ms" for k, v in walls.items()))
    rows = [
        [
            label,
            f"{statistics.median(w):.0f} ms",
            f"{percentile(w, 90):.0f} ms",
            f"{statistics.median(took[label]):.1f} ms",
        ]
        for label, w in walls.items()
    ]
    print(md_table(["code", "wall p50", "wall p90", "search tookMs p50"], rows))


if __name__ == "__main__":
    main()
