"""What an editor's search costs right after another process wrote to the same index.

The language server, `memory-ls index` and `memory-ls mcp` share one index file by default, so
an agent that writes a note (and its MCP server or CLI that indexes it) commits to the index an
editor searches. This builds perf.py's synthetic workspace with vectors (its random-projection
"provider"), opens it in engine A (the editor) and engine B (the agent: own connections, as a
second process has), and alternates: B writes and indexes one new note, A answers a hybrid
search; then A answers the same number of searches with nothing written in between. The
latencies are wall-clock times of ``engine.search`` minus the provider's query time.

    python bench/foreign_commit.py --chunks 100000
    python bench/foreign_commit.py --chunks 100000 --baseline REV   # side by side, alternating
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import baseline_tree, env_isolate, log, md_table  # noqa: E402
from perf import Corpus, RandomProjectionProvider, lat  # noqa: E402


def build(root: Path, index: Path, seed: int, chunks: int, n_queries: int) -> list[str]:
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    corpus = Corpus(seed)
    corpus.write_workspace(root, max(100, chunks // 110), chunks)
    rp = RandomProjectionProvider(corpus.vocab)
    with MemoryEngine(root, Settings(), provider=rp, index_path=index) as engine:
        t0 = time.perf_counter()
        engine.sync("bench")
        log(f"indexed {engine.status()['chunks']} chunks in {time.perf_counter() - t0:.0f} s")
    return corpus.queries(n_queries)


def measure(root: Path, index: Path, seed: int, queries: list[str]) -> dict[str, Any]:
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    corpus = Corpus(seed)
    rp_a, rp_b = RandomProjectionProvider(corpus.vocab), RandomProjectionProvider(corpus.vocab)
    editor = MemoryEngine(root, Settings(), provider=rp_a, index_path=index)
    agent = MemoryEngine(root, Settings(), provider=rp_b, index_path=index)

    def search(q: str) -> float:
        t0 = time.perf_counter()
        resp = editor.search(q, mode="hybrid")
        if resp.mode != "hybrid":
            raise RuntimeError(f"asked for hybrid search, engine ran {resp.mode}")
        return (time.perf_counter() - t0 - rp_a.last_query_s) * 1000

    try:
        for q in queries[:5]:
            search(q)
        after, quiet, write = [], [], []
        notes = root / "memory" / "agent"
        notes.mkdir(parents=True, exist_ok=True)
        for i, q in enumerate(queries[5:]):
            note = notes / f"2026-12-04-note-{os.getpid()}-{i}.md"
            topic = corpus.rng.choice(len(corpus.vocab), 25, replace=False)
            note.write_text(f"{q}\n\n" + corpus.document(f"Agent note {i}", None, 900, topic))
            t0 = time.perf_counter()
            agent.sync("agent")
            write.append((time.perf_counter() - t0) * 1000)
            after.append(search(q))
        for q in queries[5:]:
            quiet.append(search(q))
        return {"after": lat(after), "quiet": lat(quiet), "agentSyncMs": lat(write)}
    finally:
        agent.close()
        editor.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--baseline", help="a git revision, measured on a copy of the same index")
    ap.add_argument("--alternations", type=int, default=2)
    ap.add_argument("--measure", nargs=5, help=argparse.SUPPRESS)  # root index seed queries tree
    args = ap.parse_args(argv)
    if args.measure:
        root, index, seed, queries, tree = args.measure
        sys.path.insert(0, tree)  # ahead of this checkout, which common.py put first
        import memory_ls

        res = measure(Path(root), Path(index), int(seed), json.loads(queries))
        print(json.dumps({**res, "code": str(Path(memory_ls.__file__).parents[1])}))
        return 0
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="memory-ls-foreign-", dir=args.tmp) as name:
        tmp = Path(name)
        env_isolate(tmp)
        root, index = tmp / "ws", tmp / "index.sqlite"
        queries = json.dumps(build(root, index, args.seed, args.chunks, args.rounds + 5))
        variants = [("this tree", str(repo))]
        rows: list[list[str]] = []
        with baseline_tree(args.baseline, tmp / "baseline") as base:
            if base is not None:
                variants.append((f"baseline {args.baseline}", str(base)))
            for turn in range(args.alternations):
                for label, src in variants:
                    copy = tmp / f"copy-{turn}.sqlite"
                    shutil.copyfile(index, copy)
                    ws = tmp / f"ws-{turn}-{len(rows)}"
                    shutil.copytree(root, ws)
                    cmd = [
                        sys.executable,
                        __file__,
                        "--measure",
                        str(ws),
                        str(copy),
                        str(args.seed),
                        queries,
                        src,
                    ]
                    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    rows.append(
                        [
                            label,
                            str(turn + 1),
                            f"{res['after']['p50']:.1f} / {res['after']['p95']:.1f}",
                            f"{res['quiet']['p50']:.1f} / {res['quiet']['p95']:.1f}",
                            f"{res['agentSyncMs']['p50']:.0f}",
                        ]
                    )
                    log(f"{label} round {turn + 1}: {res}")
                    shutil.rmtree(ws)
                    copy.unlink()
        print(
            md_table(
                [
                    "code",
                    "round",
                    "search after the agent's commit p50 / p95 ms",
                    "search, nothing written p50 / p95 ms",
                    "agent's sync p50 ms",
                ],
                rows,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
