"""Latency of the language server over a real stdio connection, on a generated workspace.

    python bench/lsp_latency.py                 # 10,000 files
    python bench/lsp_latency.py --files 2000    # smaller
    python bench/lsp_latency.py --provider local --model-path model.gguf   # hybrid
    python bench/lsp_latency.py --files 300 --query-words 8-16 --provider local --model-path m.gguf
    python bench/lsp_latency.py --eval ../shared/eval/locomo-dev --provider local \
        --model-path m.gguf     # an evaluation set's workspaces in one, and its questions
    python bench/lsp_latency.py --files 2000 --baseline ../other-checkout --rounds 3
                                # this checkout's server against another's, rounds alternating
    python bench/lsp_latency.py --files 2000 --baseline-set hygiene.editorMaxFiles=0
                                # searches beside the editor's memory checks, and without them

Measures: server start to first answered search (and to the first search answered from a
complete index), the initial sync, the time from a ``didChange`` to the first ``memory/search``
that sees the change, ``memory/search`` and ``workspace/symbol`` p50/p95, and the server's
RSS. Prints a Markdown table. The index goes to a temporary cache folder, never the user's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, parse_overrides, percentile
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.protocol import JsonRPCResponseMessage, default_converter

_TEXT = (
    "deploy gateway ledger billing invoice postgres redis cache token bucket retry backoff "
    "schema migration rollback release sprint roadmap incident outage pager alert metric "
    "latency throughput queue worker cron snapshot backup restore vault secret rotation "
    "onboarding customer tenant quota storage bucket region cluster node pod kubernetes "
    "terraform module review feedback design decision tradeoff benchmark profile memory "
    "embedding vector search ranking keyword chunk citation note agent session transcript "
    "python rust typescript react frontend backend api endpoint auth oauth session cookie"
)
WORDS = _TEXT.split()


def generate(root: Path, n: int, seed: int = 7) -> None:
    """n Markdown files: MEMORY.md, dated daily notes and topic notes under memory/."""
    rng = random.Random(seed)

    def para(k: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(k)).capitalize() + "."

    (root / "memory" / "topics").mkdir(parents=True, exist_ok=True)
    (root / "MEMORY.md").write_text(
        "# Memory\n\n" + "\n".join(f"- {para(12)}" for _ in range(30)) + "\n"
    )
    for i in range(n - 1):
        if i % 3:
            y, d = 2020 + i // 3650 % 7, i % 3650
            rel = f"memory/{y}-{d // 300 % 12 + 1:02}-{d % 28 + 1:02}-note-{i}.md"
        else:
            rel = f"memory/topics/topic-{i}.md"
        sections = "\n\n".join(
            f"## {para(3)}\n\n{para(rng.randint(20, 60))}\n{para(15)}"
            for _ in range(rng.randint(1, 4))
        )
        (root / rel).write_text(f"# {para(4)}\n\n{sections}\n")


def make_client() -> LanguageClient:
    conv = default_converter()

    def keep(obj: dict[str, Any], cls: type) -> Any:
        obj.setdefault("result", None)
        return cls(**obj)

    conv.register_structure_hook(JsonRPCResponseMessage, keep)
    client = LanguageClient("lsp-latency", "1", converter_factory=lambda: conv)
    client.progress_done = asyncio.Event()  # type: ignore[attr-defined]

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def create(params: types.WorkDoneProgressCreateParams) -> None:
        return None

    @client.feature(types.PROGRESS)
    def progress(params: types.ProgressParams) -> None:
        if isinstance(params.value, dict) and params.value.get("kind") == "end":
            client.progress_done.set()  # type: ignore[attr-defined]

    for method in (
        types.WINDOW_LOG_MESSAGE,
        types.WINDOW_SHOW_MESSAGE,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
    ):
        client.feature(method)(lambda params: None)

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        return None

    return client


def rss_kb(pid: int) -> tuple[int, int]:
    """(current RSS, peak RSS) in KiB from /proc; (0, 0) where there is no /proc."""
    try:
        fields = dict(
            line.split(":", 1)
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if ":" in line
        )
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
    except (OSError, KeyError, ValueError):
        return 0, 0


async def drain(stream: asyncio.StreamReader | None, sink: list[bytes]) -> None:
    # The server's stderr must be read, or a chatty server blocks on a full pipe.
    while stream is not None and (line := await stream.readline()):
        sink.append(line)


def eval_workspace(spec: str, root: Path) -> list[str]:
    """Write a workspace of an evaluation set under ``root`` (``FOLDER:WORKSPACE``; ``FOLDER``
    alone: all of its workspaces, each in a folder of its own under memory/) and return the
    questions asked of it, in the set's order."""
    from eval import load_set, materialise  # the eval harness, only when asked for

    folder, _, name = spec.partition(":")
    es = load_set(Path(folder), None)
    if name and name not in es.corpus:
        raise SystemExit(f"no workspace {name!r} in {folder} (have {sorted(es.corpus)})")
    for ws in [name] if name else sorted(es.corpus):
        files = es.corpus[ws]
        if not name:  # memory/x.md -> memory/<ws>/x.md, MEMORY.md -> memory/<ws>/MEMORY.md
            files = [(f"memory/{ws}/{rel.removeprefix('memory/')}", t) for rel, t in files]
        materialise(files, root)
    return [q["query"] for q in es.queries if not name or q["workspace"] == name]


async def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    root = Path(args.workspace).resolve() if args.workspace else tmp / "ws"
    asked = eval_workspace(args.eval, root) if args.eval else []
    if not (root / "memory").is_dir():
        t0 = time.perf_counter()
        root.mkdir(parents=True, exist_ok=True)
        generate(root, args.files)
        print(f"generated {args.files} files in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    files = sum(1 for _ in (root / "memory").rglob("*.md")) + 1

    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp / "cache"),
        "XDG_CONFIG_HOME": str(tmp / "config"),
    }
    if args.checkout:  # the server of another checkout (--baseline)
        env["PYTHONPATH"] = str(Path(args.checkout).resolve())
    init: dict[str, Any] = {"provider": args.provider}
    if args.model_path:
        init["local"] = {"modelPath": str(Path(args.model_path).resolve())}
    for key, value in parse_overrides(args.set).items():  # dotted camelCase keys
        init[key] = {**init.get(key, {}), **value} if isinstance(value, dict) else value
    client = make_client()
    stderr: list[bytes] = []
    t_start = time.perf_counter()
    await client.start_io(sys.executable, "-m", "memory_ls", "serve", env=env)
    assert client._server is not None
    pid = client._server.pid
    drainer = asyncio.create_task(drain(client._server.stderr, stderr))

    async def req(method: str, params: Any) -> Any:
        return await client.protocol.send_request_async(method, params)

    caps = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            configuration=False,
            did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(
                dynamic_registration=True, relative_pattern_support=True
            ),
        ),
        window=types.WindowClientCapabilities(work_done_progress=True),
    )
    await client.initialize_async(
        types.InitializeParams(
            capabilities=caps,
            process_id=os.getpid(),
            initialization_options=init,
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        )
    )
    client.initialized(types.InitializedParams())
    out: dict[str, Any] = {"files": files}

    # Start to first answer (the index may still be filling), then to a complete index.
    await req("memory/search", {"query": "deploy"})
    out["start_to_first_answer_ms"] = (time.perf_counter() - t_start) * 1000
    await asyncio.wait_for(client.progress_done.wait(), args.timeout)  # type: ignore[attr-defined]
    status = await req("memory/status", {})
    # Measure on a finished index: the chunk vectors, then the line vectors, fill in after the
    # keyword phase, and searching meanwhile would time the backfill's competition for the CPU.
    waited = time.perf_counter()
    while status.get("pendingEmbeddings") or status.get("pendingLineVectors"):
        if time.perf_counter() - waited > args.timeout:
            raise TimeoutError(f"vectors still pending after {args.timeout} s: {status}")
        await asyncio.sleep(0.2)
        status = await req("memory/status", {})
    out["initial_sync_ms"] = (status.get("lastSync") or {}).get("durationMs")
    res = await req("memory/search", {"query": "deploy gateway"})
    out["start_to_full_index_search_ms"] = (time.perf_counter() - t_start) * 1000
    out["first_search_hits"] = len(res["results"])
    out["chunks"] = status.get("chunks")
    out["mode"] = res["mode"]
    if status.get("providerReason") and args.provider != "none":
        print(f"no embeddings: {status['providerReason']}", file=sys.stderr)
    out["rss_after_sync_kb"] = rss_kb(pid)[0]

    rng = random.Random(11)
    lo, _, hi = args.query_words.partition("-")
    k = min(args.queries + 10, len(asked))  # spread over the set: every workspace asks
    queries = [asked[i * len(asked) // k] for i in range(k)] or [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(int(lo), int(hi or lo))))
        for _ in range(args.queries + 10)
    ]
    # Warm the caches with queries that are not measured: the server remembers query vectors,
    # so a measured query repeats an earlier one only as often as the generator repeats it.
    warm, queries = queries[:10], queries[10:]
    for q in warm:
        await req("memory/search", {"query": q})

    search_ms, took_ms = [], []
    for q in queries:
        t0 = time.perf_counter()
        res = await req("memory/search", {"query": q})
        search_ms.append((time.perf_counter() - t0) * 1000)
        took_ms.append(res["tookMs"])
    symbol_ms = []
    for q in queries:
        t0 = time.perf_counter()
        await client.workspace_symbol_async(types.WorkspaceSymbolParams(query=q))
        symbol_ms.append((time.perf_counter() - t0) * 1000)

    # didChange -> the first search that sees it. A search flushes the edits pending in its
    # workspace, so this is the time to index the buffer plus one search, not the debounce.
    target = next(p for p in sorted((root / "memory").rglob("*.md")))
    uri = target.as_uri()
    text = target.read_text()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="markdown", version=1, text=text
            )
        )
    )
    edit_ms = []
    lines = text.split("\n")
    for i in range(args.edits):
        token = f"zq{i}x{rng.randint(10**6, 10**7)}"
        t0 = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(
                            start=types.Position(line=2, character=0),
                            end=types.Position(line=3, character=0),
                        ),
                        text=f"{token} {lines[2]}\n",
                    )
                ],
            )
        )
        while True:
            res = await req("memory/search", {"query": token})
            if res["results"]:
                break
        edit_ms.append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(args.edit_gap_ms / 1000)  # typing pace between measured edits

    # The same without a search pulling: wait for the debounced indexing alone.
    debounce_ms = []
    for i in range(min(args.edits, 10)):
        token = f"zd{i}x{rng.randint(10**6, 10**7)}"
        t0 = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=uri, version=args.edits + i + 2
                ),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(
                            start=types.Position(line=2, character=0),
                            end=types.Position(line=3, character=0),
                        ),
                        text=f"{token} {lines[2]}\n",
                    )
                ],
            )
        )
        while True:  # memory/status does not flush edits: poll until the buffer is indexed
            st = await req("memory/status", {})
            if not st.get("pendingEdits"):
                break
            await asyncio.sleep(0.005)
        debounce_ms.append((time.perf_counter() - t0) * 1000)

    out["rss_end_kb"], out["rss_peak_kb"] = rss_kb(pid)
    out["query_kind"] = (
        f"{Path(args.eval).name} questions" if asked else f"{args.query_words} words"
    )
    out["distinct_queries"] = len(set(queries))
    out["search"] = search_ms
    out["took"] = took_ms
    out["symbol"] = symbol_ms
    out["edit"] = edit_ms
    out["debounced_edit"] = debounce_ms
    out["debounce_setting_ms"] = 300

    await client.shutdown_async(None)
    client.exit(None)
    await asyncio.wait_for(client._server.wait(), 30)
    drainer.cancel()
    await client.stop()
    return out


def table(r: dict[str, Any]) -> str:
    def p(key: str) -> tuple[str, str]:
        v = r[key]
        return f"{percentile(v, 50):.1f}", f"{percentile(v, 95):.1f}"

    rows = [
        ("workspace", f"{r['files']} files, {r['chunks']} chunks, {r['mode']} search", ""),
        (
            "queries",
            f"{len(r['search'])} of {r['query_kind']}, {r['distinct_queries']} distinct",
            "",
        ),
        (
            "initial sync, keyword phase (lastSync.durationMs)",
            f"{r['initial_sync_ms'] or 0:.0f} ms",
            "",
        ),
        ("server start -> first answered search", f"{r['start_to_first_answer_ms']:.0f} ms", ""),
        (
            "server start -> search on the complete index (vectors included)",
            f"{r['start_to_full_index_search_ms']:.0f} ms",
            "",
        ),
        ("didChange -> first memory/search that sees it", *p("edit")),
        (
            f"didChange -> indexed by the debounce alone ({r['debounce_setting_ms']} ms)",
            *p("debounced_edit"),
        ),
        ("memory/search", *p("search")),
        ("memory/search, the server's own tookMs", *p("took")),
        ("workspace/symbol", *p("symbol")),
        (
            "server RSS after sync / end / peak",
            f"{r['rss_after_sync_kb'] / 1024:.0f} / {r['rss_end_kb'] / 1024:.0f} / "
            f"{r['rss_peak_kb'] / 1024:.0f} MiB",
            "",
        ),
    ]
    lines = ["| measure | p50 (ms) or value | p95 (ms) |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=10_000, help="files to generate (10000)")
    ap.add_argument("--workspace", help="reuse this workspace instead of generating one")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--query-words",
        default="1-3",
        help="words per query, MIN-MAX (1-3; 8-16 is closer to questions in plain language)",
    )
    ap.add_argument(
        "--eval",
        metavar="FOLDER[:WORKSPACE]",
        help="search an evaluation set's workspaces (all in one, or the one named) with the "
        "questions asked of them",
    )
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--edit-gap-ms", type=int, default=20)
    ap.add_argument("--provider", default="none", help="embedding provider (none: keyword)")
    ap.add_argument("--model-path", default="", help="local GGUF model for --provider local")
    ap.add_argument("--timeout", type=float, default=1800, help="initial sync timeout (s)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for the server, e.g. query.lines.maxChunks=0 (repeatable)",
    )
    ap.add_argument("--baseline", help="another checkout: its server against this one's")
    ap.add_argument(
        "--baseline-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the baseline is this checkout with these settings besides --set's (repeatable), "
        "e.g. hygiene.editorMaxFiles=0: searches with and without the editor's checks",
    )
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each with --baseline")
    args = ap.parse_args(argv)
    args.checkout = None
    if args.baseline or args.baseline_set:
        return side_by_side(args)
    tmp = Path(tempfile.mkdtemp(prefix="memory-ls-bench-"))
    try:
        result = asyncio.run(run(args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(table(result))
    for key in ("search", "symbol", "edit"):
        v = result[key]
        if not v:  # --edits 0
            continue
        print(f"<!-- {key}: n={len(v)} mean={statistics.mean(v):.1f} max={max(v):.1f} -->")
    return 0


def side_by_side(args: argparse.Namespace) -> int:
    """This checkout's server and ``--baseline``'s on one workspace, in alternating rounds
    (a drifting machine moves both), each from an empty cache; the ratios of the medians."""
    work = Path(tempfile.mkdtemp(prefix="memory-ls-bench-"))
    got: dict[str, dict[str, list[float]]] = {"this": {}, "baseline": {}}
    try:
        if not args.workspace and not args.eval:
            generate(work / "ws", args.files)
            args.workspace = str(work / "ws")
        given = list(args.set)
        other = Path(args.baseline) if args.baseline else REPO
        for r in range(args.rounds):
            for name, checkout in (("this", REPO), ("baseline", other)):
                args.checkout = checkout
                args.set = given + (args.baseline_set if name == "baseline" else [])
                result = asyncio.run(run(args, work / f"{name}-{r}"))
                for key in ("search", "symbol", "edit"):
                    got[name].setdefault(key, []).extend(result[key])
                print(f"round {r} {name}: {table(result)}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.baseline_set:
        print(f"baseline: this checkout with {' '.join(args.baseline_set)}")
    print(f"{args.rounds} rounds each, alternating; ms (this / baseline)\n")
    print("| | this p50 | p95 | baseline p50 | p95 | ratio p50 | ratio p95 |")
    print("|---|---|---|---|---|---|---|")
    for key in ("search", "symbol", "edit"):
        a, b = got["this"].get(key), got["baseline"].get(key)
        if not a or not b:
            continue
        pa, pb = (percentile(a, 50), percentile(a, 95)), (percentile(b, 50), percentile(b, 95))
        cells = [f"{v:.1f}" for v in (*pa, *pb)] + [f"{pa[0] / pb[0]:.3f}", f"{pa[1] / pb[1]:.3f}"]
        print(f"| {key} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
