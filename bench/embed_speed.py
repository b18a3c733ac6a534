"""Local embedding throughput of two code trees, or of two llama.cpp builds, side by side:
chunks/s, query latency, and query latency while another thread embeds chunks.

    python bench/embed_speed.py --baseline REV [--model PATH] [--chunks 48] [--rounds 3] [--busy]
    python bench/embed_speed.py --baseline-python OTHER/.venv/bin/python   # another build
    python bench/embed_speed.py --weights file   # the defaults against local.weights = file

The baseline revision is checked out with `git worktree` into a scratch folder (or, with
--baseline-python, this tree runs under another environment's interpreter and so its
llama-cpp-python); each round runs one child process per side (alternating, so both see the
same machine), which opens the model
with the shipped settings and embeds the same chunks: SciFact passages (../shared/eval) cut to
about 400 tokens, the size memory-ls chunks to. `--busy` keeps one core busy with a spinning
process for the whole run, as a compiler or a browser would. Prints the median and range per tree
and the ratio of medians.
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

from common import REPO, baseline_tree, find_default_model, md_table

SCIFACT = REPO.parent / "shared" / "eval" / "scifact-train" / "corpus.jsonl"
CHUNK_CHARS = 1800  # ~400 all-MiniLM-L6-v2 tokens of SciFact's English
QUERY = "does vitamin d supplementation improve bone density in older adults"

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from memory_ls.settings import Settings
from memory_ls.embeddings.local import open_local
texts = json.loads(Path(sys.argv[3]).read_text())
settings = Settings()
if sys.argv[5]:
    settings.local.weights = sys.argv[5]
provider = open_local(Path(sys.argv[2]), settings)
tokens = sum(provider.count_tokens(t) for t in texts)
provider.embed_documents(texts[:2])
began = time.perf_counter()
provider.embed_documents(texts)
seconds = time.perf_counter() - began
queries = []
for _ in range(30):
    t0 = time.perf_counter()
    provider.embed_query(sys.argv[4])
    queries.append((time.perf_counter() - t0) * 1000)
queries.sort()
# A search while the index fills: queries, 10 ms apart, while another thread embeds chunks.
import threading
busy = [True]
def backfill():
    while busy[0]:
        provider.embed_documents(texts[:8])
filler = threading.Thread(target=backfill)
filler.start()
time.sleep(0.3)
during = []
for i in range(30):
    t0 = time.perf_counter()
    provider.embed_query(f"{sys.argv[4]} {i}")  # distinct: no cache anywhere
    during.append((time.perf_counter() - t0) * 1000)
    time.sleep(0.01)
busy[0] = False
filler.join()
during.sort()
print(json.dumps({"chunks_s": len(texts) / seconds, "tokens": tokens / len(texts),
                  "query_ms": queries[len(queries) // 2],
                  "during_ms": during[len(during) // 2], "during_p95_ms": during[28]}))
"""


def chunks(n: int) -> list[str]:
    out = []
    with SCIFACT.open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = f"{doc.get('title', '')}\n{doc['text']}"
            if len(text) >= CHUNK_CHARS:
                out.append(text[:CHUNK_CHARS])
            if len(out) == n:
                break
    return out


def run_child(
    python: str, tree: Path, model: Path, texts_file: Path, weights: str = ""
) -> dict[str, float]:
    proc = subprocess.run(
        [python, "-c", CHILD, str(tree), str(model), str(texts_file), QUERY, weights],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    side = ap.add_mutually_exclusive_group(required=True)
    side.add_argument("--baseline", help="git revision to compare against")
    side.add_argument(
        "--baseline-python",
        action="append",
        help="interpreter of another environment to compare (repeatable)",
    )
    side.add_argument("--weights", help="compare this tree against it with this local.weights")
    ap.add_argument("--model", type=Path, default=None, help="GGUF model (default: the pulled one)")
    ap.add_argument("--chunks", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", action="store_true", help="keep one core busy meanwhile")
    args = ap.parse_args()
    model = args.model or find_default_model()
    if model is None:
        sys.exit("no model: pass --model PATH or run `memory-ls model pull`")
    with (
        tempfile.TemporaryDirectory(prefix="embed-speed-") as tmp,
        baseline_tree(args.baseline, Path(tmp) / "baseline") as base,
    ):
        if base is not None:
            sides = {f"baseline {args.baseline}": (sys.executable, base, "")}
        elif args.weights:
            sides = {f"local.weights = {args.weights}": (sys.executable, REPO, args.weights)}
        else:
            sides = {f"baseline {py}": (py, REPO, "") for py in args.baseline_python}
        sides["this tree"] = (sys.executable, REPO, "")
        busy = None
        try:
            texts_file = Path(tmp) / "texts.json"
            texts_file.write_text(json.dumps(chunks(args.chunks)))
            if args.busy:
                busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                time.sleep(0.5)
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
            for r in range(args.rounds):
                for name, (python, tree, weights) in sides.items():
                    runs[name].append(run_child(python, tree, model, texts_file, weights))
                    print(f"round {r + 1} {name}: {runs[name][-1]}", file=sys.stderr)
        finally:
            if busy is not None:
                busy.kill()
    rows = []
    for name, got in runs.items():
        rate = [g["chunks_s"] for g in got]
        query = [g["query_ms"] for g in got]
        during = [g.get("during_ms", 0.0) for g in got]
        during95 = [g.get("during_p95_ms", 0.0) for g in got]
        rows.append(
            [
                name,
                f"{statistics.median(rate):.1f} ({min(rate):.1f}-{max(rate):.1f})",
                f"{statistics.median(query):.1f} ({min(query):.1f}-{max(query):.1f})",
                f"{statistics.median(during):.1f} / {statistics.median(during95):.1f} "
                f"({min(during):.1f}-{max(during):.1f})",
                f"{got[0]['tokens']:.0f}",
            ]
        )
    print(f"model {model.name}, {args.chunks} chunks, {args.rounds} rounds, busy core: {args.busy}")
    header = [
        "code",
        "chunks/s median (range)",
        "query ms p50 (range)",
        "query ms while indexing p50 / p95 (range of p50)",
        "tokens/chunk",
    ]
    print(md_table(header, rows))
    medians = {name: statistics.median(g["chunks_s"] for g in got) for name, got in runs.items()}
    mine = medians.pop("this tree")
    for name, m in medians.items():
        print(f"\nthroughput ratio (this tree / {name}): {mine / m:.2f}x")


if __name__ == "__main__":
    main()
