"""Performance benchmark of memory-ls on synthetic workspaces (see bench/README.md).

Builds workspaces of N memory files (default 1k and 10k files, about 50k and 110k chunks) from a
generated vocabulary: Zipf-distributed pseudo-words, function words, per-file topic words, dated
file names, headings, bullets and numbers, so no paragraph repeats. Each size runs in its own
subprocess (clean peak RSS) and reports: full index time, no-op sync, one-line edits, search
latency (keyword, vector, hybrid), KNN backends side by side, database size and peak RSS.

Vector and hybrid numbers use a deterministic random-projection "provider" that exists only in
this benchmark (a bag-of-words sum of fixed random 384-d vectors): it makes the KNN, fusion and
vector-storage costs real without a model. It is labelled "RP" in the output and its compute time
(and the query embedding) is excluded from the latencies. `--model PATH` adds real local-model
numbers measured on a small subset of chunks and extrapolated (labelled as such).

    python bench/perf.py --files 1000
    python bench/perf.py --files 1000,10000 --json perf.json
    python bench/perf.py --files 1000 --model ~/.cache/memory-ls/models/all-MiniLM-L6-v2.gguf
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    REPO,
    env_isolate,
    file_size_mb,
    log,
    md_table,
    peak_rss_mb,
    percentile,
)

DIMS = 384
KNN_K = 50  # the engine's candidate pool floor (query.hybrid.minCandidates)
CHARS_PER_CHUNK = 1200  # measured: 400-token chunks with 80 overlap, whole lines

FUNCTION_WORDS = str.split(
    "the a of and to in is we it that for on with as was this by at be from or but not are "
    "they have had our will can has were if so then than also about after before when which "
    "there their into over more only most some such very just"
)
# Words a fifth of the benchmark's queries start with.
QUERY_LEAD = "what did we decide about"
SYLLABLES = str.split(
    "ka lo mer ti sa ven dor pi ne ru sho bal fen gri tal mo zu qua xe lin por dax vel ni ost "
    "ran bel cor dim esk hal jin kep lum nar oth pel riv sil tor ung vor wex yal zen bri cal"
)


# -- synthetic workspace ---------------------------------------------------------------------
class Corpus:
    """A deterministic generator of memory files from a pseudo-word vocabulary."""

    def __init__(self, seed: int, vocab_size: int = 20000):
        self.rng = np.random.default_rng(seed)
        words: set[str] = set()
        rng = np.random.default_rng(seed + 1)
        while len(words) < vocab_size:
            k = int(rng.integers(2, 5))
            words.add("".join(rng.choice(SYLLABLES, k)))
        self.vocab = sorted(words)
        rng.shuffle(self.vocab)
        self.words = np.array(self.vocab, dtype=object)
        ranks = np.arange(1, vocab_size + 1, dtype=np.float64)
        p = 1.0 / (ranks + 10.0)
        self.cdf = np.cumsum(p / p.sum())
        self.fw = np.array(FUNCTION_WORDS, dtype=object)
        fp = 1.0 / np.arange(1, len(FUNCTION_WORDS) + 1)
        self.fcdf = np.cumsum(fp / fp.sum())
        self.topics: list[np.ndarray] = []

    def zipf(self, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, self.rng.random(n)), len(self.cdf) - 1)

    def tokens(self, n: int, topic: np.ndarray) -> list[str]:
        r = self.rng.random(n)
        content = self.words[self.zipf(n)]
        func = self.fw[np.minimum(np.searchsorted(self.fcdf, self.rng.random(n)), len(self.fw) - 1)]
        top = self.words[topic[self.rng.integers(0, len(topic), n)]]
        out = np.where(r < 0.35, func, np.where(r < 0.5, top, content))
        # A few numbers, dates and percentages, as real notes have.
        for i in np.flatnonzero(self.rng.random(n) < 0.01):
            k = int(self.rng.integers(0, 3))
            a, b = int(self.rng.integers(1, 13)), int(self.rng.integers(1, 29))
            out[i] = (
                str(int(self.rng.integers(1, 5000)))
                if k == 0
                else f"{int(self.rng.integers(1, 100))}%"
                if k == 1
                else f"2024-{a:02d}-{b:02d}"
            )
        return out.tolist()

    def document(self, title: str, date: str | None, n_chars: int, topic: np.ndarray) -> str:
        n_words = max(20, n_chars // 7)
        toks = self.tokens(n_words, topic)
        lens = self.rng.integers(5, 22, size=n_words // 5 + 2)
        sents: list[str] = []
        i = 0
        for ln in lens:
            if i >= len(toks):
                break
            s = " ".join(toks[i : i + ln])
            i += ln
            sents.append(s[:1].upper() + s[1:] + ".")
        lines = [f"# {title}", ""]
        if date:
            lines += [f"Date: {date}", ""]
        per_line = self.rng.integers(1, 4, size=len(sents) + 1)
        para = self.rng.integers(2, 7, size=len(sents) + 1)
        bullet = self.rng.random(len(sents) + 1) < 0.15
        heading_every = int(self.rng.integers(3, 6))
        j = n_line = n_para = 0
        while j < len(sents):
            if n_line == 0 and n_para % heading_every == 0 and n_para:
                h = " ".join(self.words[topic[self.rng.integers(0, len(topic), 3)]])
                lines += [f"## {h.title()}", ""]
            k = int(per_line[n_line % len(per_line)])
            text = " ".join(sents[j : j + k])
            lines.append(("- " + text) if bullet[j % len(bullet)] else text)
            j += k
            n_line += 1
            if n_line >= para[n_para % len(para)]:
                lines.append("")
                n_line = 0
                n_para += 1
        return "\n".join(lines) + "\n"

    def write_workspace(self, root: Path, n_files: int, target_chunks: int) -> dict[str, Any]:
        """Write n_files memory files sized so the index holds about target_chunks chunks."""
        mean_chars = max(400, target_chunks * CHARS_PER_CHUNK // n_files)
        sizes = self.rng.lognormal(0.0, 0.6, n_files)
        sizes = np.clip(sizes / sizes.mean(), 0.1, 5.0)
        sizes = (sizes / sizes.mean() * mean_chars).astype(int)
        start = np.datetime64("2023-01-01")
        total = 0
        paths: list[str] = []
        for i in range(n_files):
            topic = self.rng.choice(np.arange(100, len(self.vocab)), 25, replace=False)
            self.topics.append(topic)
            slug = "-".join(self.words[topic[:2]])
            if i % 7 == 6:  # evergreen notes
                rel, date = f"memory/topics/{slug}-{i}.md", None
            else:
                d = str(start + np.timedelta64(int(self.rng.integers(0, 1100)), "D"))
                rel, date = f"memory/{d[:4]}/{d}-{slug}-{i}.md", d
            title = " ".join(self.words[topic[:4]]).title()
            text = self.document(title, date, int(sizes[i]), topic)
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
            total += len(text)
            paths.append(rel)
        mem = self.document("Memory", None, 3000, self.rng.choice(len(self.vocab), 25))
        (root / "MEMORY.md").write_text(mem, encoding="utf-8")
        return {
            "files": n_files + 1,
            "textMB": (total + len(mem)) / 2**20,
            "paths": paths,
            "sizes": sizes.tolist(),
        }

    def queries(self, n: int) -> list[str]:
        out = []
        for i in range(n):
            topic = self.topics[int(self.rng.integers(0, len(self.topics)))]
            k = int(self.rng.integers(1, 4))
            ws = list(self.words[self.rng.choice(topic, k, replace=False)])
            if i % 3 == 0:
                ws.append(self.words[self.zipf(1)[0]])
            if i % 5 == 0:
                ws.insert(0, QUERY_LEAD)
            out.append(" ".join(ws))
        return out


# -- the benchmark-only vector provider ------------------------------------------------------
# How the benchmark's vectors are spread (bench/hnsw_recall.py --sets real,bench,bench-weighted
# compares them): "flat", what every figure in the README was measured with, or "weighted",
# closer to all-MiniLM-L6-v2's vectors of real notes in its similarities (not in HNSW's cost).
VECTOR_KINDS = ("flat", "weighted")
# Weights of the "weighted" kind: a pseudo-word's IDF from its Zipf rank (about log1p(rank /
# 100) here: a word of rank 100 is in about half the chunks), function words next to nothing,
# numbers and dates as a rare word; and a shared direction, as sentence embeddings have one
# (MiniLM's unit vectors of LoCoMo's and SciFact's chunks average to a vector of length 0.34).
RANK_SCALE = 100.0
FUNCTION_WEIGHT = 0.05
OTHER_WEIGHT = 2.0
SHARED_DIRECTION = 0.3


class RandomProjectionProvider:
    """Bag-of-words x fixed random Gaussian vectors, normalised. Benchmark use only: it gives
    the store, the KNN and the fusion real 384-d vectors without an embedding model.

    ``kind="flat"`` sums every word's vector alike: a third of every chunk being the same
    function words, any two chunks sit at cosine 0.65 and a 1-4 word query at about 0.16 from
    its nearest chunk, a worst case for graph indexes that real embeddings are not (MiniLM on
    LoCoMo and SciFact: 0.12 between two chunks on average, 0.57 from a question to its
    nearest). ``kind="weighted"`` weights words by rarity and adds a shared direction, which
    gives 0.09 and 0.43 on perf.py's corpus."""

    id = "bench-rp"
    provider_key = "seed0"
    dims = DIMS
    max_input_tokens = 0
    max_input_bytes = 0
    BUCKETS = 4096
    _TOKEN = re.compile(r"\w+")

    def __init__(self, vocab: Sequence[str], seed: int = 0, kind: str = "flat"):
        if kind not in VECTOR_KINDS:
            raise ValueError(f"vector kind {kind!r}: expected one of {VECTOR_KINDS}")
        self.kind = kind
        # Another kind of vector is another model: no embedding cache shared between them.
        self.model = "random-projection-384" + ("" if kind == "flat" else f"-{kind}")
        known = set(vocab)
        common = dict.fromkeys([*FUNCTION_WORDS, *QUERY_LEAD.split()])
        extra = [w for w in common if w not in known] if kind == "weighted" else []
        self._index = {w: i for i, w in enumerate([*vocab, *extra])}
        rng = np.random.default_rng(seed)
        self._w = rng.standard_normal((len(self._index) + self.BUCKETS, DIMS)).astype(np.float32)
        self._shared = np.zeros(DIMS, dtype=np.float32)
        if kind == "weighted":
            weights = np.concatenate(
                [
                    np.log1p(np.arange(len(vocab)) / RANK_SCALE),
                    np.full(len(extra), FUNCTION_WEIGHT),
                    np.full(self.BUCKETS, OTHER_WEIGHT),
                ]
            ).astype(np.float32)
            self._w *= weights[:, None]
            u = np.random.default_rng(seed + 1).standard_normal(DIMS)
            self._shared = (SHARED_DIRECTION * u / np.linalg.norm(u)).astype(np.float32)
        self.compute_s = 0.0
        self.last_query_s = 0.0

    def _ids(self, text: str) -> list[int]:
        idx, base = self._index, len(self._index)
        out = []
        for t in self._TOKEN.findall(text.lower()):
            i = idx.get(t)
            out.append(i if i is not None else base + zlib.crc32(t.encode()) % self.BUCKETS)
        return out or [base]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        t0 = time.perf_counter()
        if not texts:
            return np.zeros((0, DIMS), dtype=np.float32)
        parts = [self._ids(t) for t in texts]
        offsets = np.cumsum([0] + [len(p) for p in parts[:-1]])
        flat = np.fromiter((i for p in parts for i in p), dtype=np.int64)
        v = np.add.reduceat(self._w[flat], offsets, axis=0)
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)
        if self.kind == "weighted":
            v += self._shared
            v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)
        self.compute_s += time.perf_counter() - t0
        return v.astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        t0 = time.perf_counter()
        v = self.embed_documents([text])[0]
        self.last_query_s = time.perf_counter() - t0
        return v

    def close(self) -> None:
        pass


# -- measurements ----------------------------------------------------------------------------
def lat(values_ms: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(values_ms, 50),
        "p95": percentile(values_ms, 95),
        "max": max(values_ms) if values_ms else float("nan"),
        "n": len(values_ms),
    }


def timed(fn, *a, **kw) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    return (time.perf_counter() - t0) * 1000, out


def checkpoint_size(engine: Any) -> float:
    with engine.indexer.lock:  # bench-only peek: fold the WAL in so the size is the real file
        engine.indexer.writer.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return file_size_mb(engine.index_path)


def table_sizes(engine: Any) -> dict[str, float]:
    """MB per table and index (its own pages, from SQLite's dbstat), largest first; FTS5 and
    sqlite-vec shadow tables are grouped under their virtual table."""
    with engine.indexer.lock:
        rows = engine.indexer.writer.conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name"
        ).fetchall()
    out: dict[str, float] = {}
    for name, size in rows:
        group = re.sub(
            r"_(data|idx|content|docsize|config|rowids|chunks|info|vector_chunks00)$", "", name
        )
        out[group] = out.get(group, 0.0) + size / (1024 * 1024)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def edited(text: str, n: int) -> str:
    """The text with one body line changed (the n-th candidate line, a few words appended)."""
    lines = text.split("\n")
    cand = [i for i, ln in enumerate(lines) if len(ln) > 40 and not ln.startswith("#")]
    i = cand[(len(cand) // 2 + 7 * n) % len(cand)]
    lines[i] = lines[i] + f" Edited note {n}: follow up next week."
    return "\n".join(lines)


def search_latency(
    engine: Any, queries: list[str], mode: str, rp: Any = None, **kw: Any
) -> dict[str, float]:
    for q in queries[:5]:  # warm caches and connections
        engine.search(q, mode=mode, **kw)
    out = []
    for q in queries:
        resp = engine.search(q, mode=mode, **kw)
        if resp.mode != mode:
            raise RuntimeError(f"asked for {mode} search, engine ran {resp.mode}")
        ms = resp.took_ms - (
            rp.last_query_s * 1000 if rp is not None and mode != "keyword" else 0.0
        )
        out.append(ms)
    return lat(out)


def worker(args: argparse.Namespace, n_files: int) -> dict[str, Any]:
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    res: dict[str, Any] = {"files": n_files, "loadAvgStart": os.getloadavg()[0]}
    target = args.chunks or (50_000 if n_files <= 1000 else max(110_000, 11 * n_files))
    with tempfile.TemporaryDirectory(prefix="memory-ls-perf-", dir=args.tmp) as tmpname:
        tmp = Path(tmpname)
        env_isolate(tmp)
        root = tmp / "ws"
        corpus = Corpus(args.seed)
        t, info = timed(corpus.write_workspace, root, n_files, target)
        res["generateS"] = t / 1000
        res["textMB"] = info["textMB"]
        res["memoryFiles"] = info["files"]
        queries = corpus.queries(args.queries)
        log(
            f"[{n_files}] generated {info['files']} files, {info['textMB']:.0f} MB in "
            f"{t / 1000:.1f} s"
        )
        order = np.argsort(info["sizes"])
        edit_path = info["paths"][int(order[len(order) // 2])]  # a median-sized file
        res["editFileKB"] = (root / edit_path).stat().st_size / 1024
        res["rssAfterGenerateMB"] = peak_rss_mb()

        # 1. keyword-only index --------------------------------------------------------------
        settings = Settings()
        kw = MemoryEngine(root, settings, provider=None, index_path=tmp / "kw.sqlite")
        t, rep = timed(kw.sync, "bench")
        st = kw.status()
        res["chunks"] = st["chunks"]
        res["indexKeywordS"] = t / 1000
        log(f"[{n_files}] keyword index: {st['chunks']} chunks in {t / 1000:.1f} s")
        noop = [timed(kw.sync, "noop")[0] for _ in range(3)]
        res["noopSyncMs"] = {"median": statistics.median(noop), "max": max(noop)}

        original = (root / edit_path).read_text(encoding="utf-8")
        sd, disk, dirty = [], [], []
        for n in range(5):
            sd.append(timed(kw.set_document, edit_path, edited(original, n))[0])
        res["clearDocumentMs"] = timed(kw.clear_document, edit_path)[0]
        for n in range(5, 10):
            (root / edit_path).write_text(edited(original, n), encoding="utf-8")
            t, rep = timed(kw.sync, "edit")
            assert rep.indexed == 1, rep
            disk.append(t)
        for n in range(10, 15):
            (root / edit_path).write_text(edited(original, n), encoding="utf-8")
            t0 = time.perf_counter()
            kw.mark_dirty([edit_path])
            rep = kw.sync_dirty()
            dirty.append((time.perf_counter() - t0) * 1000)
            assert rep is not None and rep.indexed == 1, rep
        res["editSetDocumentMs"] = statistics.median(sd)
        res["editDiskSyncMs"] = statistics.median(disk)
        res["editDirtySyncMs"] = statistics.median(dirty)
        res["searchKeyword"] = search_latency(kw, queries, "keyword")
        res["dbKeywordMB"] = checkpoint_size(kw)
        kw.close()
        res["rssAfterKeywordMB"] = peak_rss_mb()
        log(f"[{n_files}] keyword phase done; no-op sync {res['noopSyncMs']['median']:.0f} ms")

        # 2. vector index with the random-projection provider --------------------------------
        if not args.no_vectors:
            rp = RandomProjectionProvider(corpus.vocab)
            (root / edit_path).write_text(original, encoding="utf-8")
            vec = MemoryEngine(root, settings, provider=rp, index_path=tmp / "vec.sqlite")
            t, _ = timed(vec.sync, "bench", embed=False)
            res["indexKeywordPhaseWithProviderS"] = t / 1000
            rp.compute_s = 0.0
            t, n_emb = timed(vec.embed_pending)
            res["vectorFillS"] = t / 1000
            res["vectorFillRpComputeS"] = rp.compute_s
            res["vectorFillChunks"] = n_emb
            log(
                f"[{n_files}] RP vectors: {n_emb} chunks in {t / 1000:.1f} s "
                f"(RP compute {rp.compute_s:.1f} s)"
            )
            t, _ = timed(vec.search, queries[0], mode="vector")
            res["firstVectorSearchMs"] = t
            res["rssAfterFirstVectorSearchMB"] = peak_rss_mb()
            res["searchVector"] = search_latency(vec, queries, "vector", rp)
            res["searchHybrid"] = search_latency(vec, queries, "hybrid", rp)
            res["searchHybridDefaults"] = search_latency(vec, queries, "hybrid", rp, max_results=6)
            res["sqliteVecStatus"] = vec.status().get("sqliteVec")
            res["dbVectorMB"] = checkpoint_size(vec)  # before sqlite-vec's table comes and goes
            res["dbVectorTablesMB"] = table_sizes(vec)
            # sqlite-vec's table exists only while it is the backend: the next sync builds it.
            vec.settings.store.vector_backend = "sqlite-vec"
            try:
                res["sqliteVecTableBuildS"] = timed(vec.sync, "bench")[0] / 1000
                res["dbVectorWithSqliteVecMB"] = checkpoint_size(vec)
                res["searchHybridSqliteVec"] = search_latency(vec, queries, "hybrid", rp)
                res["knn"] = knn_compare(vec, rp, queries)
            except Exception as exc:  # backend not available: say so
                res["searchHybridSqliteVec"] = {"error": f"{type(exc).__name__}: {exc}"}
            vec.settings.store.vector_backend = "auto"
            vec.sync("bench")  # and drops it again
            # One-line edit with vectors on: keyword side now, then only changed chunks embedded.
            emb = []
            for n in range(3):
                t1, _ = timed(vec.set_document, edit_path, edited(original, 20 + n))
                t2, k = timed(vec.embed_pending)
                emb.append((t1, t2, k))
            res["editWithVectors"] = {
                "setDocumentMs": statistics.median(e[0] for e in emb),
                "embedChangedMs": statistics.median(e[1] for e in emb),
                "chunksEmbedded": statistics.median(e[2] for e in emb),
                "fileChunks": file_chunks(vec.index_path, edit_path),
            }
            vec.clear_document(edit_path)
            vec.embed_pending()
            vec.close()
            res["rssAfterVectorsMB"] = peak_rss_mb()
            res["reopened"] = reopened(root, tmp / "vec.sqlite", args.seed, queries[0])

        # 3. the real local model on a subset, extrapolated ---------------------------------
        if args.model:
            res["model"] = model_subset(args, tmp / "kw.sqlite", res["chunks"], queries)
            res["rssAfterModelMB"] = peak_rss_mb()
    res["peakRssMB"] = peak_rss_mb()
    res["loadAvgEnd"] = os.getloadavg()[0]
    return res


def reopened(root: Path, index: Path, seed: int, query: str) -> dict[str, Any]:
    """What an editor restarted on the finished index holds: a fresh process opens it, answers
    one hybrid search, and reports its resident memory then (not the builder's peak)."""
    cmd = [sys.executable, __file__, "--reopen", str(root), str(index), str(seed), query]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def reopen_and_search(root: Path, index: Path, seed: int, query: str) -> dict[str, Any]:
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    t0 = time.perf_counter()
    rp = RandomProjectionProvider(Corpus(seed).vocab)
    with MemoryEngine(root, Settings(), provider=rp, index_path=index) as engine:
        resp = engine.search(query, mode="hybrid")
        # VmHWM, not ru_maxrss: Linux carries the forking parent's peak into the child's.
        status = Path("/proc/self/status").read_text() if Path("/proc/self/status").exists() else ""
        kb = dict(re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M))
        return {
            "firstSearchS": (time.perf_counter() - t0),
            "hits": len(resp.results),
            "rssMB": int(kb["VmRSS"]) / 1024 if "VmRSS" in kb else None,
            "peakRssMB": int(kb["VmHWM"]) / 1024 if "VmHWM" in kb else None,
        }


def file_chunks(index: Path, path: str) -> int:
    from memory_ls.index.store import Store

    store = Store(index, create=False)
    try:
        return store.conn.execute("SELECT count(*) FROM chunks WHERE path = ?", (path,)).fetchone()[
            0
        ]
    finally:
        store.close()


def knn_compare(engine: Any, rp: RandomProjectionProvider, queries: list[str]) -> dict[str, Any]:
    """Top-k over the same vectors: plain numpy, the engine's VectorIndex, sqlite-vec vec0."""
    from memory_ls.index.store import Store

    store = Store(engine.index_path, create=False)
    t, (ids, mat) = timed(store.all_embeddings)
    out: dict[str, Any] = {
        "vectors": int(mat.shape[0]),
        "dims": int(mat.shape[1]),
        "loadMs": t,
        "k": KNN_K,
    }
    mat = np.ascontiguousarray(mat, dtype=np.float32)
    qs = rp.embed_documents(queries[:60])
    matvec, topk, vindex, svec, agree = [], [], [], [], []
    vec_error = None
    for i, q in enumerate(qs):
        t0 = time.perf_counter()
        s = mat @ q
        t1 = time.perf_counter()
        top = np.argpartition(-s, KNN_K - 1)[:KNN_K]
        top = top[np.argsort(-s[top])]
        t2 = time.perf_counter()
        engine.vectors.search(q, KNN_K)
        t3 = time.perf_counter()
        try:
            got = store.vec_search(q, KNN_K)
        except Exception as exc:  # sqlite-vec missing or vec0 absent
            vec_error, got = f"{type(exc).__name__}: {exc}", []
        t4 = time.perf_counter()
        if i < 5:
            continue  # warm-up
        matvec.append((t1 - t0) * 1000)
        topk.append((t2 - t0) * 1000)
        vindex.append((t3 - t2) * 1000)
        if got:
            svec.append((t4 - t3) * 1000)
            agree.append(len(set(ids[top].tolist()) & {int(r[0]) for r in got}) / KNN_K)
    out["numpyMatvec"] = lat(matvec)
    out["numpyMatvecTopk"] = lat(topk)
    out["vectorIndexSearch"] = lat(vindex)
    out["sqliteVec"] = (
        lat(svec) if svec else {"error": vec_error or store.vec_reason or "no chunks_vec table"}
    )
    out["topkAgreement"] = sum(agree) / len(agree) if agree else None
    store.close()
    return out


def model_subset(
    args: argparse.Namespace, index: Path, total_chunks: int, queries: list[str]
) -> dict[str, Any]:
    from memory_ls.embeddings.factory import create_provider
    from memory_ls.index.store import Store
    from memory_ls.settings import Settings

    s = Settings()
    s.provider = "local"
    s.local.model_path = str(Path(args.model).expanduser().resolve())
    provider, why = create_provider(s)
    if provider is None:
        return {"error": why}
    store = Store(index, create=False)
    n = store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    step = max(1, n // args.model_chunks)
    texts = [
        r[0]
        for r in store.conn.execute(
            "SELECT text FROM chunks WHERE id % ? = 0 ORDER BY id LIMIT ?",
            (step, args.model_chunks),
        )
    ]
    store.close()
    provider.embed_documents(texts[:2])  # warm-up
    t, _ = timed(provider.embed_documents, texts)
    rate = len(texts) / (t / 1000)
    qlat = [timed(provider.embed_query, q)[0] for q in queries[:30]]
    provider.close()
    return {
        "subsetChunks": len(texts),
        "subsetS": t / 1000,
        "chunksPerS": rate,
        "extrapolatedFullS": total_chunks / rate,
        "queryEmbed": lat(qlat),
    }


# -- report ----------------------------------------------------------------------------------
def fmt_lat(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    if "error" in d:
        return f"n/a ({d['error']})"
    return f"{d['p50']:.2f} / {d['p95']:.2f}"


def report(results: list[dict[str, Any]]) -> str:
    cols = [f"{r['files']:,} files" for r in results]
    rows: list[list[Any]] = []

    def row(label: str, fn, target: str = "") -> None:
        vals = []
        for r in results:
            try:
                v = fn(r)
            except (KeyError, TypeError):
                v = None
            vals.append(v)
        rows.append([label, *vals, target])

    def f1(x: float) -> str:
        return f"{x:,.1f}"

    row("memory files / chunks", lambda r: f"{r['memoryFiles']:,} / {r['chunks']:,}")
    row("text (MB) / generated in (s)", lambda r: f"{r['textMB']:.0f} / {r['generateS']:.1f}")
    row("full index, keyword-only (s)", lambda r: f1(r["indexKeywordS"]))
    row("  chunks/s", lambda r: f"{r['chunks'] / r['indexKeywordS']:,.0f}")
    row(
        "full index, keyword phase with a provider (s)",
        lambda r: f1(r["indexKeywordPhaseWithProviderS"]),
    )
    row(
        "vector fill, RP provider: total / RP compute (s)",
        lambda r: f"{r['vectorFillS']:.1f} / {r['vectorFillRpComputeS']:.1f}",
    )
    row(
        "full index with local model (s, EXTRAPOLATED)",
        lambda r: (
            f"{r['model']['extrapolatedFullS']:,.0f} (from {r['model']['subsetChunks']} "
            f"chunks at {r['model']['chunksPerS']:.1f}/s)"
        ),
    )
    row("local model query embedding p50 / p95 (ms)", lambda r: fmt_lat(r["model"]["queryEmbed"]))
    row(
        "no-op sync, median / max of 3 (ms)",
        lambda r: f"{r['noopSyncMs']['median']:.0f} / {r['noopSyncMs']['max']:.0f}",
        "< 1000 at 10k files",
    )
    row("one-line edit: set_document (ms)", lambda r: f1(r["editSetDocumentMs"]), "< 100")
    row("one-line edit: disk write + sync() (ms)", lambda r: f1(r["editDiskSyncMs"]), "< 100")
    row(
        "one-line edit: disk write + mark_dirty + sync_dirty (ms)",
        lambda r: f1(r["editDirtySyncMs"]),
        "< 100",
    )
    row("  edited file (KB)", lambda r: f1(r["editFileKB"]))
    row(
        "one-line edit with vectors: set_document + embed changed (ms)",
        lambda r: (
            f"{r['editWithVectors']['setDocumentMs']:.1f} + "
            f"{r['editWithVectors']['embedChangedMs']:.1f} "
            f"({r['editWithVectors']['chunksEmbedded']:.0f} of "
            f"{r['editWithVectors']['fileChunks']} chunks re-embedded)"
        ),
    )
    row("search keyword p50 / p95 (ms)", lambda r: fmt_lat(r["searchKeyword"]))
    row(
        "search vector p50 / p95 (ms, RP, excl. query embedding)",
        lambda r: fmt_lat(r["searchVector"]),
    )
    row(
        "search hybrid p50 / p95 (ms, RP, excl. query embedding), maxResults 10",
        lambda r: fmt_lat(r["searchHybrid"]),
        "p95 < 50 at 100k chunks",
    )
    row("search hybrid, maxResults 6 (defaults)", lambda r: fmt_lat(r["searchHybridDefaults"]))
    row(
        "search hybrid, store.vectorBackend=sqlite-vec",
        lambda r: fmt_lat(r["searchHybridSqliteVec"]),
    )
    row("first vector search (loads the matrix) (ms)", lambda r: f1(r["firstVectorSearchMs"]))
    row("KNN vectors x dims", lambda r: f"{r['knn']['vectors']:,} x {r['knn']['dims']}")
    row("KNN plain numpy mat-vec p50 / p95 (ms)", lambda r: fmt_lat(r["knn"]["numpyMatvec"]))
    row(f"KNN numpy mat-vec + top-{KNN_K} (ms)", lambda r: fmt_lat(r["knn"]["numpyMatvecTopk"]))
    row(
        "KNN engine VectorIndex.search (ms)",
        lambda r: fmt_lat(r["knn"]["vectorIndexSearch"]),
        "<= numpy mat-vec",
    )
    row("KNN sqlite-vec vec0 MATCH (ms)", lambda r: fmt_lat(r["knn"]["sqliteVec"]))
    row(
        f"  top-{KNN_K} agreement numpy vs sqlite-vec", lambda r: f"{r['knn']['topkAgreement']:.3f}"
    )
    row("  load all vectors from SQLite (ms)", lambda r: f1(r["knn"]["loadMs"]))
    row("database size keyword-only (MB)", lambda r: f1(r["dbKeywordMB"]))
    row("database size with 384-d vectors (MB)", lambda r: f1(r["dbVectorMB"]))
    row(
        "... with sqlite-vec's table (vectorBackend sqlite-vec)",
        lambda r: f1(r.get("dbVectorWithSqliteVecMB", float("nan"))),
    )
    row("peak RSS after keyword phase (MB)", lambda r: f"{r['rssAfterKeywordMB']:.0f}")
    row(
        "peak RSS after vector fill + first vector search (MB)",
        lambda r: f"{r['rssAfterFirstVectorSearchMB']:.0f}",
    )
    row(
        "peak RSS after vector phase incl. the KNN comparison's own copy (MB)",
        lambda r: f"{r['rssAfterVectorsMB']:.0f}",
    )
    row("peak RSS overall (MB)", lambda r: f"{r['peakRssMB']:.0f}")
    row(
        "reopened: resident after the first hybrid search / its peak (MB)",
        lambda r: (
            f"{r['reopened']['rssMB']:.0f} / {r['reopened']['peakRssMB']:.0f}"
            if r.get("reopened") and r["reopened"].get("rssMB")
            else "-"
        ),
        "< 2 GB at 1M",
    )
    row(
        "reopened: open + first hybrid search (s)",
        lambda r: f"{r['reopened']['firstSearchS']:.1f}" if r.get("reopened") else "-",
    )
    row(
        "machine load average at start / end (other processes)",
        lambda r: f"{r['loadAvgStart']:.2f} / {r['loadAvgEnd']:.2f}",
    )
    return md_table(["metric", *cols, "target"], rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", default="1000,10000", help="workspace sizes, comma-separated")
    ap.add_argument(
        "--chunks",
        type=int,
        default=0,
        help="target chunks per workspace (default 50k at <=1k files, else max(110k, 11 per file))",
    )
    ap.add_argument("--queries", type=int, default=200, help="queries per latency measurement")
    ap.add_argument("--model", help="local GGUF model: embed a subset, extrapolate")
    ap.add_argument("--model-chunks", type=int, default=64, help="subset size for --model")
    ap.add_argument("--no-vectors", action="store_true", help="skip the vector phase")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tmp", help="parent folder for the temporary workspaces")
    ap.add_argument("--inline", action="store_true", help="run sizes in this process")
    ap.add_argument(
        "--blas-threads",
        type=int,
        default=0,
        help="OPENBLAS/OMP threads for the workers (default: numpy's own choice)",
    )
    ap.add_argument("--json", type=Path, metavar="OUT", help="write the numbers as JSON")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--reopen", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.reopen:
        root, index, seed, query = args.reopen
        print(json.dumps(reopen_and_search(Path(root), Path(index), int(seed), query)))
        return 0
    if args.worker:
        res = worker(args, args.worker)
        args.worker_out.write_text(json.dumps(res))
        return 0

    sizes = [int(x) for x in args.files.split(",") if x.strip()]
    results = []
    for n in sizes:
        t0 = time.perf_counter()
        if args.inline:
            res = worker(args, n)
        else:
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
                out = Path(fh.name)
            cmd = [
                sys.executable,
                __file__,
                "--worker",
                str(n),
                "--worker-out",
                str(out),
                *[a for a in (argv if argv is not None else sys.argv[1:])],
            ]
            env = dict(os.environ)
            if args.blas_threads:
                for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                    env[var] = str(args.blas_threads)
            proc = subprocess.run(cmd, cwd=REPO, env=env)
            if proc.returncode != 0:
                log(f"[{n}] worker failed with exit code {proc.returncode}")
                out.unlink(missing_ok=True)
                continue
            res = json.loads(out.read_text())
            out.unlink(missing_ok=True)
        res["wallS"] = time.perf_counter() - t0
        results.append(res)
        log(f"[{n}] done in {res['wallS']:.0f} s")
    if not results:
        return 1
    print("## memory-ls performance (synthetic workspaces)\n")
    print(
        "RP = benchmark-only random-projection vectors (384-d), not a model; latencies exclude "
        "the query embedding. Machine: "
        f"{sys.platform}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"numpy {np.__version__}"
        + (f", BLAS threads {args.blas_threads}" if args.blas_threads else "")
        + ".\n"
    )
    print(report(results))
    print(
        "\nwall time per size: "
        + ", ".join(f"{r['files']:,} files {r['wallS']:.0f} s" for r in results)
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
