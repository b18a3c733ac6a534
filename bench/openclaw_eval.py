"""locomo-dev scored through OpenClaw's own memory_search tool: memory-core (OpenClaw's built-in
memory) and the memory-ls plugin (integrations/openclaw), side by side.

Each conversation of the set becomes one OpenClaw agent (``agents.entries``) whose workspace holds
the conversation's session files in OpenClaw's layout (``memory/YYYY-MM-DD-session-N.md``, as
bench/eval.py materialises them, in a temp folder: the data never enters the repository). Every
question then goes through the ``memory_search`` tool that OpenClaw's plugin loader and tool
resolver assemble for that agent's run, in-process, by tests/integrations/openclaw_drive.mjs (the
driver of tests/integrations/test_openclaw.py). No chat model is involved.

- memory-core: OpenClaw's default config, no embedding provider configured and no provider key
  in the environment. Its provider ``auto`` means ``openai``
  (``extensions/memory-core/src/memory/embeddings.ts``, DEFAULT_MEMORY_EMBEDDING_PROVIDER), which
  fails without a key; an unconfigured provider is "optional" (``manager-runtime.js``,
  resolveMemoryEmbeddingProviderRequirement), so memory-core falls back to its FTS (BM25)
  keyword search: the mode measured. ``--core-provider none`` asks for FTS-only outright.
- memory-ls: the plugin installed with ``openclaw plugins install`` and memory-core disabled (the
  guide's one setting); memory-ls hybrid when a local model is in ``~/.cache/memory-ls/models``
  (linked into the run's cache folder), keyword-only with ``--keyword``.

Two calls per question: ``ranked`` (maxResults 10, minScore 0: the ranking, scored as
bench/eval.py scores it) and, with ``--as-called``, the call a model makes (query only: OpenClaw's
``memory.search.query`` defaults, 6 results above minScore 0.35).

Needs Node 24 (editors/vscode/e2e/install.sh --node-only), npm (the plugin is built with npm ci
and npm run build before it is installed) and openclaw@2026.9.6 in ~/.cache/memory-ls-openclaw
(tests/integrations/test_openclaw.py installs it).

    .venv/bin/python bench/openclaw_eval.py                      # all 5 conversations
    .venv/bin/python bench/openclaw_eval.py --conversations 2 --limit 100
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from common import REPO, md_table, percentile  # noqa: E402
from eval import aggregate, load_set, materialise, score_query  # noqa: E402
from openclaw_setup import (  # noqa: E402
    DRIVER,
    MEMORY_LS,
    OPENCLAW_VERSION,
    PLUGIN,
    BuildFailed,
    Missing,
    build_plugin,
    node24,
    openclaw_env,
    openclaw_package,
    plugin_folder,
)

T = TypeVar("T")

ENGINES = ("memory-core", "memory-ls")


@dataclass
class Hit:
    path: str
    start_line: int
    end_line: int


def needed(what: Callable[[], T]) -> T:
    """A part of tests/support/openclaw_setup.py, or the benchmark stops saying what is missing."""
    try:
        return what()
    except (Missing, BuildFailed) as error:
        raise SystemExit(f"openclaw_eval: {error}") from None


class Home:
    """A temporary OpenClaw home: one agent per conversation, the engine in the memory slot."""

    def __init__(self, root: Path, node: Path, package: Path, engine: str, keyword: bool) -> None:
        self.root, self.node, self.package, self.engine = root, node, package, engine
        self.home = root / "home"
        self.config_path = self.home / ".openclaw" / "openclaw.json"
        self.config_path.parent.mkdir(parents=True)
        cache = root / "xdg-cache" / "memory-ls"
        cache.mkdir(parents=True)
        models = Path.home() / ".cache" / "memory-ls" / "models"
        if engine == "memory-ls" and not keyword and models.is_dir():
            (cache / "models").symlink_to(models)

    def env(self) -> dict[str, str]:
        return openclaw_env(self.root, self.home, self.node)

    def run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.node), *args],
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def configure(self, workspaces: dict[str, Path], core_provider: str | None) -> None:
        if self.engine == "memory-ls":
            needed(lambda: build_plugin(self.node.parent))
            install = ["plugins", "install", str(PLUGIN), "--force", "--accept-capabilities"]
            with plugin_folder():
                done = self.run([str(self.package / "openclaw.mjs"), *install], timeout=300)
            if done.returncode != 0:
                raise SystemExit(f"openclaw plugins install failed:\n{done.stdout}{done.stderr}")
        config = json.loads(self.config_path.read_text()) if self.config_path.exists() else {}
        first = next(iter(workspaces.values()))
        config.setdefault("agents", {}).setdefault("defaults", {})["workspace"] = str(first)
        # 2026.9.6's roster: keyed agents.entries, with explicit ownership for more than one
        # (agents.list is migrated to it; dist/legacy.roster-*.mjs).
        config["agents"]["ownership"] = "explicit"
        config["agents"]["entries"] = {
            ws: {"workspace": str(path)} for ws, path in workspaces.items()
        }
        if self.engine == "memory-ls":
            entries = config["plugins"]["entries"]
            entries["memory-core"] = {"enabled": False}
            entries["memory-ls"] = {"enabled": True, "config": {"command": str(MEMORY_LS)}}
        elif core_provider:
            config.setdefault("memory", {}).setdefault("search", {})["provider"] = core_provider
        self.config_path.write_text(json.dumps(config, indent=2))

    def drive(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        steps_file = self.root / "steps.json"
        steps_file.write_text(json.dumps(steps, ensure_ascii=False), encoding="utf-8")
        done = self.run([str(DRIVER), str(self.package), str(steps_file)], timeout=7200)
        if done.returncode != 0:
            raise SystemExit(f"driver failed ({self.engine}):\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])["steps"]


def run_engine(
    engine: str,
    corpus: dict[str, list[tuple[str, str]]],
    queries: list[dict[str, Any]],
    calls: dict[str, dict[str, Any]],
    args: argparse.Namespace,
    node: Path,
    package: Path,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"openclaw-eval-{engine}-") as tmp:
        root = Path(tmp)
        workspaces = {}
        for ws, files in corpus.items():
            workspaces[ws] = root / "ws" / ws
            materialise(files, workspaces[ws])
        home = Home(root, node, package, engine, args.keyword)
        home.configure(workspaces, args.core_provider)
        steps: list[dict[str, Any]] = []
        # One warm-up search per agent first: the first answer indexes the workspace.
        for ws in corpus:
            steps.append({"op": "hits", "agentId": ws, "params": {"query": "warm up"}})
        for q in queries:
            for params in calls.values():
                steps.append({"op": "hits", "agentId": q["workspace"], "params": params(q)})
        started = time.monotonic()
        answers = home.drive(steps)
        wall = time.monotonic() - started
    failed = [a for a in answers if not a["ok"] or a["result"].get("error")]
    if failed:
        print(f"{engine}: {len(failed)} failed searches, e.g. {failed[0]}", file=sys.stderr)
    warm, rest = answers[: len(corpus)], iter(answers[len(corpus) :])
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    modes: set[str] = set()
    paths = {ws: {rel for rel, _ in files} for ws, files in corpus.items()}
    foreign = 0  # hits outside the question's own workspace: must stay 0
    for q in queries:
        for call in calls:
            a = next(rest)
            result = a.get("result") or {}
            modes.add(f"{result.get('mode')}/{result.get('provider')}")
            hits = [Hit(h[0], h[1], h[2]) for h in result.get("hits", [])]
            foreign += sum(h.path not in paths[q["workspace"]] for h in hits)
            row = score_query(hits, q["relevant"])
            row["ms"] = a["ms"]
            row["category"] = q.get("category")
            rows[call].append(row)
    fallback = next(
        (a["result"].get("fallback") for a in answers if a["ok"] and a["result"].get("fallback")),
        None,
    )
    if foreign:
        raise SystemExit(f"{engine}: {foreign} hits outside their question's workspace")
    return {
        "rows": rows,
        "modes": sorted(modes),
        "fallback": fallback,
        "warmMs": [a["ms"] for a in warm],
        "wallS": wall,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--eval-dir", type=Path, default=REPO.parent / "shared" / "eval")
    ap.add_argument("--set", default="locomo-dev")
    ap.add_argument("--conversations", type=int, default=0, help="the first N workspaces (0: all)")
    ap.add_argument("--limit", type=int, default=0, help="N questions spread over the set")
    ap.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    ap.add_argument("--as-called", action="store_true", help="also score the query-only call")
    ap.add_argument("--keyword", action="store_true", help="memory-ls without its local model")
    ap.add_argument("--core-provider", help="memory-core's memory.search.provider (e.g. none)")
    ap.add_argument("--json", type=Path, help="write the scores here")
    args = ap.parse_args(argv)

    es = load_set(args.eval_dir / args.set, None)
    keep = list(es.corpus)[: args.conversations] if args.conversations else list(es.corpus)
    corpus = {ws: es.corpus[ws] for ws in keep}
    queries = [q for q in es.queries if q["workspace"] in corpus]
    if args.limit and args.limit < len(queries):
        n = len(queries)
        queries = [queries[i * n // args.limit] for i in range(args.limit)]
    calls: dict[str, Any] = {
        "ranked": lambda q: {"query": q["query"], "maxResults": 10, "minScore": 0}
    }
    if args.as_called:
        calls["as called"] = lambda q: {"query": q["query"]}
    node = needed(node24)
    package = needed(lambda: openclaw_package(node.parent))
    print(
        f"{args.set}: {len(corpus)} conversations ({', '.join(corpus)}), {len(queries)} questions,"
        f" through openclaw@{OPENCLAW_VERSION} memory_search",
        file=sys.stderr,
    )

    results = {}
    for engine in args.engines:
        results[engine] = run_engine(engine, corpus, queries, calls, args, node, package)
        r = results[engine]
        print(
            f"{engine}: mode {', '.join(r['modes'])}; first search per agent (indexing) "
            f"{', '.join(f'{ms / 1000:.1f}' for ms in r['warmMs'])} s; {r['wallS']:.0f} s in all"
            + (f"; fallback {r['fallback']}" if r["fallback"] else ""),
            file=sys.stderr,
        )

    table = []
    out: dict[str, Any] = {}
    for call in calls:
        for engine in args.engines:
            r = results[engine]
            agg = aggregate(r["rows"][call])
            lat = [row["ms"] for row in r["rows"][call]]
            mode = ", ".join(m.split("/")[0] for m in r["modes"])
            table.append(
                [
                    call,
                    engine,
                    mode,
                    agg["queries"],
                    f"{agg['R@5']:.3f}",
                    f"{agg['nDCG@10']:.3f}",
                    f"{agg['Hit@5']:.3f}",
                    f"{percentile(lat, 50):.0f}",
                ]
            )
            out[f"{call}/{engine}"] = {**{k: v for k, v in agg.items()}, "modes": r["modes"]}
    print(
        md_table(
            ["call", "engine", "mode", "questions", "R@5", "nDCG@10", "line Hit@5", "p50 ms"], table
        )
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
