"""Retrieval evaluation of memory-ls on the shared sets in ../shared/eval (see bench/README.md).

Each set's workspaces are materialised into a temp folder (never into the repo: the data's
licences forbid copying it), indexed by one MemoryEngine per workspace, and every query runs only
in its own workspace, in keyword-only, vector-only and hybrid mode. Indexes are cached under
--cache-dir keyed by everything that changes an index (corpus, index settings, provider, engine
code), so re-scoring with other query settings never re-embeds.

    python bench/eval.py                                  # all sets, all modes that can run
    python bench/eval.py --modes keyword --sets locomo    # a quick keyword-only check
    python bench/eval.py --limit 200 --fusion rrf --set query.hybrid.vectorWeight=0.5
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, before answers.py
from answers import AnswerStats, no_answer_queries  # noqa: E402
from common import (  # noqa: E402
    REPO,
    SharedProvider,
    Timer,
    apply_overrides,
    env_isolate,
    find_default_model,
    log,
    md_table,
    parse_overrides,
    percentile,
    sha_files,
)

from memory_ls.engine import MemoryEngine  # noqa: E402
from memory_ls.settings import Settings, to_dict  # noqa: E402

ALL_MODES = ("keyword", "vector", "hybrid")
MAX_RESULTS = 10
MAX_CITATION_LINES = 30
# Engine code whose changes alter what is stored in an index (chunks, FTS text, vectors).
INDEX_CODE = [
    "memory_ls/chunking.py",
    "memory_ls/workspace.py",
    "memory_ls/search/query.py",
    "memory_ls/text.py",
    "memory_ls/index/*.py",
    "memory_ls/sources/*.py",
]


# -- data ------------------------------------------------------------------------------------
@dataclass
class EvalSet:
    name: str
    folder: Path
    corpus: dict[str, list[tuple[str, str]]]  # workspace -> [(path, text)]
    queries: list[dict[str, Any]]
    total_queries: int
    max_files: int | None = None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def find_sets(eval_dir: Path, wanted: list[str] | None) -> list[Path]:
    found = sorted(p for p in eval_dir.iterdir() if (p / "corpus.jsonl").is_file())
    if not wanted:
        return found
    out = []
    for w in wanted:
        match = [p for p in found if p.name == w] or [p for p in found if p.name.startswith(w)]
        if not match:
            raise SystemExit(f"no eval set {w!r} in {eval_dir} (have {[p.name for p in found]})")
        out += [p for p in match if p not in out]
    return out


def sample(queries: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """Every query, or `limit` of them evenly spread over the file (so every workspace and
    category keeps its share; the same subset on every run)."""
    if not limit or limit >= len(queries):
        return queries
    n = len(queries)
    return [queries[i * n // limit] for i in range(limit)]


def load_set(folder: Path, limit: int | None, max_files: int | None = None) -> EvalSet:
    corpus: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for row in read_jsonl(folder / "corpus.jsonl"):
        corpus[row["workspace"]].append((row["path"], row["text"]))
    queries = read_jsonl(folder / "queries.jsonl")
    total = len(queries)
    queries = sample([q for q in queries if q.get("relevant")], limit)
    if max_files:
        corpus = shrink(corpus, queries, max_files)
    return EvalSet(folder.name, folder, dict(corpus), queries, total, max_files)


def shrink(
    corpus: dict[str, list[tuple[str, str]]], queries: list[dict[str, Any]], max_files: int
) -> dict[str, list[tuple[str, str]]]:
    """Each workspace cut to ``max_files`` files: every file a scored query needs, then others
    evenly spread (the same subset on every run), so a slow model can be compared with another
    on the same smaller corpus."""
    needed: dict[str, set[str]] = defaultdict(set)
    for q in queries:
        needed[q["workspace"]] |= {r["path"] for r in q["relevant"]}
    out: dict[str, list[tuple[str, str]]] = {}
    for ws, files in corpus.items():
        keep = [f for f in files if f[0] in needed[ws]]
        rest = [f for f in files if f[0] not in needed[ws]]
        room = max(0, max_files - len(keep))
        if room and rest:
            keep += [rest[i * len(rest) // room] for i in range(min(room, len(rest)))]
        out[ws] = keep
    return out


def bm25_reference(eval_dir: Path) -> dict[str, list[tuple[str, list[float | None]]]]:
    """The plain-BM25 reference rows of the eval README: set -> [(label, [R@5, MRR, nDCG, Hit])]."""
    refs: dict[str, list[tuple[str, list[float | None]]]] = defaultdict(list)
    readme = eval_dir / "README.md"
    if not readme.is_file():
        return refs
    names = [p.name for p in eval_dir.iterdir() if p.is_dir()]
    in_table = False
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|"):
            in_table = False
            continue
        if "R@5" in cells and "MRR@10" in cells:  # the header of the reference table
            in_table = True
            continue
        if not in_table or len(cells) != 5:
            continue
        label = cells[0]
        name = next((n for n in names if label == n or label.startswith(n + ",")), None)
        if name is None:
            continue
        vals: list[float | None] = []
        for c in cells[1:]:
            try:
                vals.append(float(c))
            except ValueError:
                vals.append(None)
        extra = label[len(name) :].lstrip(", ")
        refs[name].append(("BM25 (eval README)" + (f", {extra}" if extra else ""), vals))
    return refs


# -- metrics ---------------------------------------------------------------------------------
def score_query(hits: list[Any], relevant: list[dict[str, Any]]) -> dict[str, float | None]:
    """File-level R@5, RR@10, nDCG@10 over the ranking with duplicate files removed, and
    line-level Hit@5 (None when the query has no line ranges)."""
    rel_files = {r["path"] for r in relevant}
    files: list[str] = []
    for h in hits[:MAX_RESULTS]:
        if h.path not in files:
            files.append(h.path)
    top10 = files[:10]
    recall5 = len(rel_files & set(files[:5])) / len(rel_files)
    rr = next((1.0 / (i + 1) for i, f in enumerate(top10) if f in rel_files), 0.0)
    dcg = sum(1.0 / math.log2(i + 2) for i, f in enumerate(top10) if f in rel_files)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(rel_files), 10)))
    ranges = [r for r in relevant if r.get("start_line") is not None]
    hit5: float | None = None
    if ranges:
        hit5 = 0.0
        for h in hits[:5]:
            if h.end_line - h.start_line + 1 > MAX_CITATION_LINES:
                continue
            for r in ranges:
                end = r.get("end_line") or r["start_line"]
                if h.path == r["path"] and h.start_line <= end and h.end_line >= r["start_line"]:
                    hit5 = 1.0
                    break
            if hit5:
                break
    return {"R@5": recall5, "MRR@10": rr, "nDCG@10": dcg / idcg if idcg else 0.0, "Hit@5": hit5}


METRICS = ("R@5", "MRR@10", "nDCG@10", "Hit@5")


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"queries": len(rows)}
    for m in METRICS:
        vals = [r[m] for r in rows if r[m] is not None]
        out[m] = sum(vals) / len(vals) if vals else None
    lat = [r["ms"] for r in rows]
    out["p50_ms"] = percentile(lat, 50)
    out["p95_ms"] = percentile(lat, 95)
    return out


# -- indexes ---------------------------------------------------------------------------------
def index_key(es: EvalSet, settings: Settings, provider: Any) -> tuple[str, dict[str, Any]]:
    """The cache key of a set's indexes: corpus, index-affecting settings, provider, code."""
    corpus = es.folder / "corpus.jsonl"
    st = corpus.stat()
    code = sha_files(p for pat in INDEX_CODE for p in REPO.glob(pat))
    info = {
        "set": es.name,
        "corpus": f"{st.st_size}-{int(st.st_mtime)}",
        "chunking": [settings.chunking.tokens, settings.chunking.overlap],
        "maxFileBytes": settings.max_file_bytes,
        "sources": sorted(settings.sources),
        "provider": [provider.id, provider.model, provider.provider_key] if provider else None,
        "code": code,
    }
    if es.max_files:  # only then, so the keys of whole corpora stay what they were
        info["maxFiles"] = es.max_files
    key = hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()[:16]
    tag = f"{provider.id}-{provider.model}" if provider else "keyword"
    return f"{tag}-{key}", info


def materialise(files: list[tuple[str, str]], root: Path) -> None:
    for rel, text in files:
        p = root / rel
        if not p.resolve().is_relative_to(root.resolve()):
            raise SystemExit(f"eval data path escapes its workspace: {rel}")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def checkpoint(path: Path) -> None:
    """Fold the WAL into the main file so the index is one self-contained file."""
    from memory_ls.index.schema import sqlite3

    if Path(f"{path}-wal").exists():
        conn = sqlite3.connect(str(path), isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()


def seed_embedding_cache(
    dest: Path, cache_root: Path, workspace: str, provider: Any
) -> tuple[int, Path | None]:
    """Start a new index with the embedding cache of an older one for the same provider (the
    engine code or chunking changed: unchanged chunk texts keep their paid-for vectors).
    Returns how many vectors it copied and the older index, whose line vectors
    ``index_workspace`` copies once the new index has its chunks."""
    if provider is None or not cache_root.is_dir():
        return 0, None
    tag = f"{provider.id}-{provider.model}-"
    olds = sorted(
        (p for p in cache_root.glob(f"{tag}*/{workspace}.sqlite")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in olds:
        meta = old.parent / "key.json"
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if info.get("provider") != [provider.id, provider.model, provider.provider_key]:
            continue
        from memory_ls.index.store import Store

        store = Store(dest)
        try:
            return store.cache.copy_from(old), old
        finally:
            store.close()
    return 0, None


@dataclass
class WorkspaceRun:
    workspace: str
    files: int = 0
    chunks: int = 0
    cached: bool = False
    seeded: int = 0
    seeded_from: Path | None = None  # the older cached index the vectors came from
    sync_ms: float = 0.0
    embed_ms: float = 0.0
    embedded: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Progress:
    def __init__(self, label: str):
        self.label = label
        self.t0 = time.perf_counter()
        self.last = 0.0

    def __call__(self, done: int, total: int, msg: str) -> None:
        now = time.perf_counter()
        if msg != "embedding":
            return
        if now - self.last < 15 and done < total:
            return
        self.last = now
        el = now - self.t0
        rate = done / el if el > 0 else 0.0
        eta = (total - done) / rate if rate > 0 else float("nan")
        log(
            f"  {self.label}: embedded {done}/{total} chunks ({rate:.1f}/s, ETA {eta / 60:.1f} min)"
        )


def open_workspace(
    es: EvalSet,
    ws: str,
    tmp: Path,
    settings: Settings,
    provider: Any,
    cache_dir: Path | None,
    key: str,
) -> tuple[MemoryEngine, WorkspaceRun, Path]:
    """Materialise one workspace and open its engine on the cached index, if there is one."""
    root = tmp / "ws" / es.name / ws
    materialise(es.corpus[ws], root)
    idx = tmp / "index" / es.name / f"{ws}.sqlite"
    idx.parent.mkdir(parents=True, exist_ok=True)
    run = WorkspaceRun(ws, files=len(es.corpus[ws]))
    cached = cache_dir / es.name / key / f"{ws}.sqlite" if cache_dir else None
    if cached and cached.is_file():
        shutil.copy2(cached, idx)
        run.cached = True
    elif cache_dir:
        run.seeded, run.seeded_from = seed_embedding_cache(idx, cache_dir / es.name, ws, provider)
    run.extra["changed"] = not run.cached
    return MemoryEngine(root, settings, provider=provider, index_path=idx), run, idx


def index_workspace(engine: MemoryEngine, run: WorkspaceRun, label: str) -> None:
    """Sync (keyword side), then embed whatever has no vector yet; both timed."""
    t0 = time.perf_counter()
    report = engine.sync("eval", embed=False)
    run.sync_ms = (time.perf_counter() - t0) * 1000
    if report.indexed or report.removed:
        run.extra["changed"] = True
    if run.seeded_from is not None:  # the older index's line vectors, for chunks of equal text
        store = engine.indexer.writer
        with engine.indexer.lock:  # ATTACH cannot be inside a transaction; autocommit it is
            run.extra["seededLines"] = store.lines.copy_from(run.seeded_from)
    if engine.provider is not None:
        lines_before = engine.status()["pendingLineVectors"]
        t0 = time.perf_counter()
        try:
            run.embedded = engine.embed_pending(Progress(label))
        except BaseException:
            run.extra["changed"] = True  # keep the vectors paid for; the next run resumes
            raise
        finally:
            run.embed_ms = (time.perf_counter() - t0) * 1000
        if run.embedded or engine.status()["pendingLineVectors"] != lines_before:
            run.extra["changed"] = True  # chunk or line vectors paid for: keep them
    run.chunks = int(engine.status()["chunks"])
    if engine.fallback_reason:
        run.extra["fallback"] = engine.fallback_reason


def save_index(
    engine: MemoryEngine,
    idx: Path,
    run: WorkspaceRun,
    es: EvalSet,
    cache_dir: Path | None,
    key: str,
    key_info: dict[str, Any],
) -> None:
    """Close the engine and store its index in the cache when this run changed it."""
    engine.close()
    if not cache_dir or not run.extra.get("changed"):
        return
    checkpoint(idx)
    dest_dir = cache_dir / es.name / key
    dest_dir.mkdir(parents=True, exist_ok=True)
    (dest_dir / "key.json").write_text(json.dumps(key_info, indent=1, sort_keys=True))
    part = dest_dir / f".{run.workspace}.sqlite.part"
    shutil.copy2(idx, part)
    os.replace(part, dest_dir / f"{run.workspace}.sqlite")
    prune(cache_dir / es.name, key)


KEEP_PER_TAG = 2


def prune(set_cache: Path, key: str) -> None:
    """Keep the newest KEEP_PER_TAG cached index folders per provider tag. Nothing paid for is
    lost: a new folder starts with its predecessor's embedding cache."""
    tag = key.rsplit("-", 1)[0] + "-"
    dirs = sorted(
        (d for d in set_cache.iterdir() if d.is_dir() and d.name.startswith(tag) and d.name != key),
        key=lambda d: d.stat().st_mtime,
        reverse=True,
    )
    for d in dirs[KEEP_PER_TAG - 1 :]:
        shutil.rmtree(d, ignore_errors=True)


# -- main ------------------------------------------------------------------------------------
def build_settings(args: argparse.Namespace) -> Settings:
    s = Settings()
    s.query.hybrid.fusion = args.fusion
    s.query.temporal_decay.enabled = args.decay
    s.query.mmr.enabled = args.mmr
    if args.calibration:
        from memory_ls.search import calibrate

        calibrate.MIDPOINT, calibrate.SLOPE = (float(x) for x in args.calibration.split(","))
    if args.scoring == "no-coverage":
        from memory_ls.search import score

        score.coverage = lambda *_: 1.0  # type: ignore[assignment]
    if args.scoring == "legacy":
        from memory_ls.search import fusion, score, select

        # Bench-only: the scores as they were before calibration (raw cosine, BM25 relative
        # to the best match alone, no keyword floor, minScore cutting every result).
        s.query.calibrate = "off"
        fusion.KEYWORD_ALONE = score.KEYWORD_ALONE = 0.0
        score.coverage = lambda *_: 1.0  # type: ignore[assignment]
        select.TAIL = 1.0
    if args.model:
        s.local.model_path = str(resolve_model(args.model))
        s.provider = "local"
    apply_overrides(s, parse_overrides(args.set or []))
    return s


def resolve_model(arg: str) -> Path:
    """``--model``: a GGUF path, or a known model's name (``memory-ls model list``): the pulled
    file in the user cache, else the newest one the tests built under <repo>/.cache/models/."""
    from memory_ls.models import registry

    if arg not in registry.MODELS or Path(arg).exists():
        return Path(arg).expanduser().resolve()
    pulled = registry.model_path(arg)
    built = sorted(
        (REPO / ".cache" / "models").glob(f"{arg}*.gguf"), key=lambda p: p.stat().st_mtime
    )
    if not pulled.is_file() and not built:
        raise SystemExit(f"model {arg} is not installed: run `memory-ls model pull {arg}`")
    return pulled if pulled.is_file() else built[-1]


def make_provider(settings: Settings, modes: list[str]) -> tuple[Any, str | None]:
    if not any(m in modes for m in ("vector", "hybrid")):
        return None, "only keyword mode asked for"
    from memory_ls.embeddings.factory import create_provider

    return create_provider(settings)


def run_set(
    es: EvalSet,
    modes: list[str],
    settings: Settings,
    provider: Any,
    tmp: Path,
    cache_dir: Path | None,
    per_query: Any,
) -> dict[str, Any]:
    key, key_info = index_key(es, settings, provider)
    by_ws: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in es.queries:
        by_ws[q["workspace"]].append(q)
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    ws_runs: list[WorkspaceRun] = []
    warnings: set[str] = set()
    shared = SharedProvider(provider) if provider is not None else None
    # Whether searches answer at the shipped defaults: checked in hybrid mode when it runs.
    answers_mode = "hybrid" if "hybrid" in modes else (modes[0] if modes else None)
    answers = AnswerStats()
    for ws in sorted(by_ws):
        if ws not in es.corpus:
            warnings.add(f"workspace {ws} has queries but no files")
            continue
        engine, run, idx = open_workspace(es, ws, tmp, settings, shared, cache_dir, key)
        try:
            index_workspace(engine, run, f"{es.name}/{ws}")
            log(
                f"  {es.name}/{ws}: {run.files} files, {run.chunks} chunks, "
                f"{'cached index' if run.cached else 'new index'}"
                f"{f' (seeded {run.seeded} cached vectors)' if run.seeded else ''}"
                f"{f', lines of {n} chunks seeded' if (n := run.extra.get('seededLines')) else ''}"
                ", "
                f"sync {run.sync_ms / 1000:.1f} s"
                + (f", embedded {run.embedded} in {run.embed_ms / 1000:.1f} s" if provider else "")
            )
            for mode in modes:
                for q in by_ws[ws]:
                    resp = engine.search(
                        q["query"], max_results=MAX_RESULTS, min_score=0.0, mode=mode
                    )
                    if resp.mode != mode:
                        why = re.sub(r"\d+%", "N%", resp.fallback_reason or "no reason given")
                        warnings.add(f"{mode}: engine answered in {resp.mode} mode ({why})")
                    m = score_query(resp.results, q["relevant"])
                    m["ms"] = resp.took_ms
                    m["category"] = q.get("category")
                    rows[mode].append(m)
                    if mode == answers_mode:
                        # The same query at the shipped maxResults and minScore.
                        dresp = engine.search(q["query"], mode=mode)
                        d = score_query(dresp.results, q["relevant"])
                        d["ms"] = dresp.took_ms
                        answers.add_query(m, d, not dresp.results)
                    if per_query:
                        per_query.write(
                            json.dumps(
                                {
                                    "set": es.name,
                                    "mode": mode,
                                    "qid": q["qid"],
                                    "category": q.get("category"),
                                    **{k: m[k] for k in METRICS},
                                    "ms": round(m["ms"], 2),
                                    "top": [h.citation for h in resp.results[:5]],
                                    "hits": [
                                        [round(h.score, 4), h.path, h.start_line, h.end_line]
                                        for h in resp.results
                                    ],
                                    "relevant": q["relevant"],
                                },
                                ensure_ascii=False,
                            )
                            + "\n"
                        )
            if answers_mode:
                for kind, query in no_answer_queries([t for _, t in es.corpus[ws]]):
                    nresp = engine.search(query, mode=answers_mode)
                    answers.add_no_answer(kind, [h.score for h in nresp.results])
                    if per_query:
                        zero = engine.search(query, mode=answers_mode, min_score=0.0)
                        row = {
                            "set": es.name,
                            "mode": "no-answer",
                            "kind": kind,
                            "query": query,
                            "hits": [[round(h.score, 4), h.path] for h in zero.results],
                        }
                        per_query.write(json.dumps(row, ensure_ascii=False) + "\n")
        finally:
            save_index(engine, idx, run, es, cache_dir, key, key_info)
        ws_runs.append(run)
    result: dict[str, Any] = {
        "queries": len(es.queries),
        "queriesInSet": es.total_queries,
        "index": {
            "key": key,
            "files": sum(r.files for r in ws_runs),
            "chunks": sum(r.chunks for r in ws_runs),
            "workspaces": len(ws_runs),
            "cached": all(r.cached for r in ws_runs),
            "syncSeconds": round(sum(r.sync_ms for r in ws_runs) / 1000, 2),
            "embedSeconds": round(sum(r.embed_ms for r in ws_runs) / 1000, 2),
            "embedded": sum(r.embedded for r in ws_runs),
        },
        "modes": {},
        "answers": {"mode": answers_mode, **answers.to_json(aggregate)},
        "warnings": sorted(warnings),
    }
    for mode in modes:
        rs = rows[mode]
        entry = {"overall": aggregate(rs)}
        cats = sorted({r["category"] for r in rs if r["category"]})
        if cats:
            entry["categories"] = {
                c: aggregate([r for r in rs if r["category"] == c]) for c in cats
            }
        result["modes"][mode] = entry
    return result


def print_answers(a: dict[str, Any], modes: dict[str, Any]) -> None:
    """Defaults vs minScore 0, answerable queries left empty, no-answer queries kept quiet."""
    d, mode = a.get("defaults"), a.get("mode")
    if not d or mode not in modes:
        return
    z = modes[mode]["overall"]
    print(f"\nat the shipped defaults ({mode} mode):\n")
    rows = [
        ["minScore 0, maxResults 10", z["R@5"], z["Hit@5"], "", ""],
        [
            "shipped defaults",
            d["R@5"],
            d["Hit@5"],
            f"{a['emptyAtDefaults']}/{a['answerable']} ({(a['emptyRate'] or 0):.1%})",
            f"{(a['noAnswerQuietRate'] or 0):.1%} of "
            + ", ".join(f"{v['total']} {k}" for k, v in a["noAnswer"].items()),
        ],
    ]
    header = ["run", "R@5", "line Hit@5", "answerable but empty", "no-answer quiet"]
    print(md_table(header, rows))


def print_set(name: str, res: dict[str, Any], refs: list[tuple[str, list[float | None]]]) -> None:
    ix = res["index"]
    print(
        f"\n### {name}: {res['queries']} of {res['queriesInSet']} queries, {ix['files']} files, "
        f"{ix['chunks']} chunks in {ix['workspaces']} workspace(s)\n"
    )
    print(
        f"index: {'cached' if ix['cached'] else 'built'}; sync {ix['syncSeconds']} s"
        + (
            f", embedded {ix['embedded']} chunks in {ix['embedSeconds']} s"
            if ix["embedded"]
            else ""
        )
        + "\n"
    )
    header = ["mode", "queries", "R@5", "MRR@10", "nDCG@10", "line Hit@5", "p50 ms", "p95 ms"]
    rows = []
    for mode, entry in res["modes"].items():
        o = entry["overall"]
        rows.append(
            [
                mode,
                o["queries"],
                o["R@5"],
                o["MRR@10"],
                o["nDCG@10"],
                o["Hit@5"],
                o["p50_ms"],
                o["p95_ms"],
            ]
        )
    for label, vals in refs:
        rows.append([label, "", *vals, None, None])
    print(md_table(header, rows))
    if any("categories" in e for e in res["modes"].values()):
        print()
        cat_rows = []
        for mode, entry in res["modes"].items():
            for cat, o in entry.get("categories", {}).items():
                cat_rows.append(
                    [cat, mode, o["queries"], o["R@5"], o["MRR@10"], o["nDCG@10"], o["Hit@5"]]
                )
        cat_rows.sort(key=lambda r: (r[0], ALL_MODES.index(r[1]) if r[1] in ALL_MODES else 9))
        print(
            md_table(
                ["category", "mode", "queries", "R@5", "MRR@10", "nDCG@10", "line Hit@5"], cat_rows
            )
        )
    print_answers(res["answers"], res["modes"])
    for w in res["warnings"]:
        print(f"\nwarning: {w}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--eval-dir",
        type=Path,
        default=REPO.parent / "shared" / "eval",
        help="folder of eval sets (default: <repo>/../shared/eval)",
    )
    ap.add_argument(
        "--sets",
        default="",
        help="comma-separated set names or prefixes (default: all, e.g. locomo,scifact,cmrc)",
    )
    ap.add_argument(
        "--modes",
        default=",".join(ALL_MODES),
        help="comma-separated: keyword,vector,hybrid (default: all)",
    )
    ap.add_argument(
        "--limit", type=int, default=0, help="score N queries per set, evenly spread (default: all)"
    )
    ap.add_argument(
        "--max-files",
        type=int,
        default=0,
        help="cut each workspace to N files (those the scored queries need, then others evenly "
        "spread), to compare a slow model with another on the same smaller corpus",
    )
    ap.add_argument("--fusion", choices=("weighted", "rrf"), default="weighted")
    ap.add_argument("--decay", action="store_true", help="temporal decay on")
    ap.add_argument("--mmr", action="store_true", help="MMR re-ranking on")
    ap.add_argument(
        "--calibration",
        metavar="MIDPOINT,SLOPE",
        help="try other constants of search/calibrate.py (tuning only)",
    )
    ap.add_argument(
        "--scoring",
        choices=("shipped", "legacy", "no-coverage"),
        default="shipped",
        help="shipped: the scores as the settings say (query.calibrate and the rest); legacy: "
        "raw cosine on the vector side, no keyword coverage or floor, minScore cutting every "
        "result (the scores before issue 11, for side-by-side figures); no-coverage: shipped "
        "without the keyword coverage factor",
    )
    ap.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="settings override, camelCase dotted key (repeatable), "
        "e.g. query.hybrid.vectorWeight=0.5 or chunking.tokens=200",
    )
    ap.add_argument(
        "--model",
        help="local GGUF embedding model: a path or a known model's name, e.g. "
        "multilingual-e5-small (default: the pulled default model or "
        "<repo>/.cache/models/all-MiniLM-L6-v2*.gguf, if any)",
    )
    ap.add_argument(
        "--cache-dir",
        type=Path,
        default=REPO / ".cache" / "eval",
        help="where indexes are cached between runs (default: <repo>/.cache/eval)",
    )
    ap.add_argument("--no-cache", action="store_true", help="build every index from scratch")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write the numbers as JSON")
    ap.add_argument(
        "--per-query",
        type=Path,
        metavar="OUT",
        help="write one JSON line per query and mode (for error analysis)",
    )
    args = ap.parse_args(argv)

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in ALL_MODES]
    if bad or not modes:
        ap.error(f"--modes: expected some of {ALL_MODES}, got {args.modes!r}")
    eval_dir = args.eval_dir.resolve()
    if not eval_dir.is_dir():
        ap.error(f"no eval folder at {eval_dir}")
    set_dirs = find_sets(eval_dir, [s.strip() for s in args.sets.split(",") if s.strip()])

    settings = build_settings(args)
    if (
        any(m != "keyword" for m in modes)
        and settings.provider in ("auto", "local")
        and not settings.local.model_path
    ):
        found = find_default_model()  # before the user cache folder is redirected
        if found:
            settings.local.model_path = str(found)
    cache_dir = None if args.no_cache else args.cache_dir.resolve()

    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memory-ls-eval-") as tmpname:
        tmp = Path(tmpname)
        env_isolate(tmp)
        provider, why = make_provider(settings, modes)
        if provider is None:
            skipped = [m for m in modes if m != "keyword"]
            if skipped:
                print(
                    f"note: no embedding provider ({why}); skipping {', '.join(skipped)} "
                    "mode(s). Pass --model PATH to a GGUF embedding model."
                )
            modes = ["keyword"]
        else:
            log(f"provider: {provider.id} {provider.model} ({getattr(provider, 'path', '')})")
        results: dict[str, Any] = {}
        refs = bm25_reference(eval_dir)
        per_query = args.per_query.open("w", encoding="utf-8") if args.per_query else None
        try:
            for sd in set_dirs:
                es = load_set(sd, args.limit or None, args.max_files or None)
                log(
                    f"{es.name}: {len(es.queries)} queries, {sum(map(len, es.corpus.values()))} "
                    f"files in {len(es.corpus)} workspace(s)"
                )
                with Timer() as t:
                    results[es.name] = run_set(
                        es, modes, settings, provider, tmp, cache_dir, per_query
                    )
                results[es.name]["seconds"] = round(t.s, 1)
                log(f"{es.name}: done in {t.s:.1f} s")
        finally:
            if per_query:
                per_query.close()
            if provider is not None:
                provider.close()

    q = settings.query
    print("## memory-ls retrieval evaluation\n")
    print(
        f"modes: {', '.join(modes)}; provider: "
        f"{f'{provider.id} {provider.model}' if provider else 'none (keyword-only)'}; "
        f"fusion {q.hybrid.fusion} (vector {q.hybrid.vector_weight} / text "
        f"{q.hybrid.text_weight}, candidates x{q.hybrid.candidate_multiplier}, "
        f"min {q.hybrid.min_candidates}); decay {'on' if q.temporal_decay.enabled else 'off'}; "
        f"MMR {'on' if q.mmr.enabled else 'off'}; chunking {settings.chunking.tokens}/"
        f"{settings.chunking.overlap} tokens; maxResults {MAX_RESULTS}, minScore 0"
        + (f"; overrides: {' '.join(args.set)}" if args.set else "")
    )
    for name, res in results.items():
        print_set(name, res, refs.get(name, []))
    total = time.perf_counter() - t_all
    print(f"\ntotal time {total:.1f} s")
    if args.json:
        out = {
            "modes": modes,
            "provider": {"id": provider.id, "model": provider.model} if provider else None,
            "settings": {k: v for k, v in to_dict(settings).items() if k not in ("remote",)},
            "overrides": args.set or [],
            "limit": args.limit or None,
            "maxFiles": args.max_files or None,
            "sets": results,
            "reference": {
                k: [
                    {"label": lbl, "R@5": v[0], "MRR@10": v[1], "nDCG@10": v[2], "Hit@5": v[3]}
                    for lbl, v in rows
                ]
                for k, rows in refs.items()
            },
            "seconds": round(total, 1),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
