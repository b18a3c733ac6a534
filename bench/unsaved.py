"""What searching an editor's unsaved text beside the team index costs, side by side in one
process: the same engine on a team index (PostgreSQL + pgvector) answers an evaluation set's
questions with no buffer open, then with one of its files edited and left unsaved (a line
appended), in rounds; also the first search right after each edit and the background vector
phase the edit starts (the unsaved chunks' vectors and lines). The unsaved chunks and the team's
are candidates of one pipeline pass (engine/team/sources.py).

    python bench/unsaved.py                      # LoCoMo dev, all-MiniLM-L6-v2, own server
    python bench/unsaved.py --url postgresql://... --rounds 5 --queries 300

It starts (and deletes) its own server with tests/support/pg_server.sh unless --url (or
MEMORY_LS_PG_URL) names one; each run uses a namespace of its own.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, env_isolate, find_default_model, log, md_table, percentile, postgres  # noqa: E402
from lsp_latency import eval_workspace  # noqa: E402


def latencies(engine: Any, queries: list[str]) -> tuple[float, float]:
    took = []
    for q in queries:
        t0 = time.perf_counter()
        engine.search(q)
        took.append((time.perf_counter() - t0) * 1000)
    return percentile(took, 50), percentile(took, 95)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--eval", default=str(REPO.parent / "shared" / "eval" / "locomo-dev"))
    ap.add_argument("--url", default=os.environ.get("MEMORY_LS_PG_URL", ""))
    ap.add_argument("--model", default="", help="GGUF path (default: all-MiniLM-L6-v2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--file", type=int, default=3, help="which file (sorted) is edited")
    args = ap.parse_args(argv)
    model = Path(args.model) if args.model else find_default_model()
    if model is None or not model.is_file():
        raise SystemExit("no model: pass --model or run `memory-ls model pull`")

    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    rows = []
    with postgres(args.url) as url, tempfile.TemporaryDirectory(prefix="memory-ls-unsaved-") as d:
        tmp = Path(d)
        env_isolate(tmp)
        root = tmp / "ws"
        queries = eval_workspace(args.eval, root)
        files = sorted(root.rglob("*.md"))
        edited = files[args.file % len(files)]
        rel, text = str(edited.relative_to(root)), edited.read_text(encoding="utf-8")
        s = Settings(provider="local")
        s.local.model_path = str(model)
        s.store.backend = "postgres"
        s.store.postgres.url = url
        s.store.postgres.namespace = f"bench-unsaved-{uuid.uuid4().hex[:8]}"
        with MemoryEngine(root, s) as e:
            t0 = time.perf_counter()
            e.sync()
            log(f"synced {e.status()['chunks']} chunks in {time.perf_counter() - t0:.0f} s")
            for q in queries[:30]:
                e.search(q)
            asked = queries[30 : 30 + args.queries]
            for r in range(args.rounds):
                e.clear_document(rel)
                without = latencies(e, asked)
                e.set_document(rel, text + f"\nAn unsaved line about the lighthouse trip, {r}.\n")
                t0 = time.perf_counter()
                e.search("lighthouse trip")
                first = (time.perf_counter() - t0) * 1000
                t0 = time.perf_counter()
                e.embed_pending()
                phase = (time.perf_counter() - t0) * 1000
                with_buffer = latencies(e, asked)
                rows.append([r, *(f"{v:.1f}" for v in (*without, *with_buffer, first, phase))])
                log(f"round {r}: {rows[-1]}")
            e.clear_document(rel)
    print(f"{len(asked)} questions; edited {rel} ({len(text):,} characters), left unsaved\n")
    print(
        md_table(
            [
                "round",
                "no buffer p50",
                "p95",
                "unsaved buffer p50",
                "p95",
                "first search after the edit",
                "vector phase of the edit",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
