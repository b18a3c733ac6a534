"""Why the team index's HNSW recall fell at 100k chunks: the same index and query as
memory_ls/index/postgres/vectors.py over two kinds of vectors, side by side in one run.

- ``mixture``: a Gaussian mixture (1,000 clusters, members at cosine ~0.6-0.8 to their centre),
  the shape real sentence embeddings have;
- ``bench``: bench/perf.py's random-projection vectors of its synthetic chunks, what bench/pg.py
  measures with (a third of every chunk is the same function words, so every vector points
  nearly the same way), queried with held-out chunks, 300-character chunk prefixes and the
  benchmarks' own 1-4 word queries;
- ``bench-weighted``: the same chunks and queries with the provider's ``weighted`` vectors
  (words weighted by rarity: similarities spread like real embeddings');
- ``real``: the real all-MiniLM-L6-v2 vectors bench/eval.py cached for SciFact and LoCoMo
  (chunks and lines, about 59k whatever ``--n`` says), queried with the sets' own questions;
- ``real+docs``: the same, plus lines of prose from the docstrings of Python's standard library
  embedded with the same model, up to ``--n`` vectors in all (real text of another kind, as a
  team index holds many people's notes), queried with the same questions.

Each set goes into a scratch table with the engine's column type (``halfvec`` on pgvector >= 0.7),
its partial HNSW index (cosine, default m 16 / ef_construction 64) and its filtered query
(namespace and model, iterative scan ``relaxed_order``), then recall@10 of held-out queries
against exact float32 search, for several ``hnsw.ef_search`` values (the engine uses 200).

    python bench/hnsw_recall.py [--n 100000] [--queries 200] [--sets mixture,bench,real]

Uses ``MEMORY_LS_PG_URL`` if set, else starts a throwaway server with tests/support/pg_server.sh.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import find_default_model, log, md_table, postgres, real_embeddings  # noqa: E402
from perf import DIMS, Corpus, RandomProjectionProvider  # noqa: E402

from memory_ls.index.postgres.migrations import vector_type_for  # noqa: E402

K = 10
EF = (100, 200, 400, 800)
ORDERS = ("relaxed_order", "strict_order")


def mixture(n: int, q: int, seed: int = 3) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, DIMS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)

    def draw(m: int) -> np.ndarray:
        c = centres[rng.integers(0, len(centres), m)]
        x = c + 0.055 * rng.standard_normal((m, DIMS))  # cosine to the centre ~0.7
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    return draw(n), {"held-out points": draw(q)}


def bench_vectors(
    n: int, q: int, seed: int = 11, kind: str = "flat"
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    corpus = Corpus(seed)
    rp = RandomProjectionProvider(corpus.vocab, kind=kind)
    texts: list[str] = []
    for i in range(n + q):
        if i % 12 == 0:  # a file of about 12 chunks shares a topic
            corpus.topics.append(
                corpus.rng.choice(np.arange(100, len(corpus.vocab)), 25, replace=False)
            )
        texts.append(" ".join(corpus.tokens(230, corpus.topics[-1])))
    vecs = np.concatenate(
        [rp.embed_documents(texts[i : i + 5000]) for i in range(0, len(texts), 5000)]
    )
    held = np.random.default_rng(seed).permutation(len(vecs))
    # bench/pg.py queries with the first 300 characters of a stored chunk: a shorter text,
    # so a vaguer vector than any whole chunk.
    prefixes = rp.embed_documents([texts[i][:300] for i in held[q : 2 * q]])
    words = rp.embed_documents(corpus.queries(q))
    return vecs[held[q:]], {
        "held-out chunks": vecs[held[:q]],
        "300-char prefixes": prefixes,
        "1-4 word queries": words,
    }


def stdlib_prose(n: int) -> list[str]:
    """Up to ``n`` distinct lines of prose (40+ characters, mostly letters) from the
    docstrings of Python's standard library, in a fixed order."""
    import ast
    import sysconfig

    out: dict[str, None] = {}
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if "test" in path.parts or "idlelib" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                for line in (ast.get_docstring(node) or "").splitlines():
                    line = line.strip()
                    letters = sum(c.isalpha() or c == " " for c in line)
                    if len(line) >= 40 and letters >= 0.85 * len(line):
                        out[line] = None
                        if len(out) >= n:
                            return list(out)
    return list(out)


def exact_top(data: np.ndarray, queries: np.ndarray) -> np.ndarray:
    sims = queries @ data.T
    return np.argsort(-sims, axis=1)[:, :K]


def literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6g}" for x in v) + "]"


def run_set(
    conn, name: str, data: np.ndarray, query_sets: dict[str, np.ndarray], vt: str, **opts: Any
) -> list[dict]:
    table = f"hnsw_recall_{name.replace('+', '_').replace('-', '_')}"
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(
        f"CREATE TABLE {table} (id bigint PRIMARY KEY, ns text NOT NULL, model text NOT NULL, "
        f"dims integer NOT NULL, embedding {vt} NOT NULL)"
    )
    t0 = time.perf_counter()
    with conn.cursor().copy(f"COPY {table} (id, ns, model, dims, embedding) FROM STDIN") as cp:
        for i, v in enumerate(data):
            cp.write_row((i, "bench", "m", DIMS, literal(v)))
    conn.commit()
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.execute("SET maintenance_work_mem = '1GB'")  # this scratch connection only
    conn.execute(
        f"CREATE INDEX ON {table} USING hnsw ((embedding::{vt}({DIMS})) {vt}_cosine_ops) "
        f"WHERE dims = {DIMS}"
    )
    conn.commit()
    build_s = time.perf_counter() - t0
    conn.execute(f"ANALYZE {table}")
    conn.commit()
    out = []
    for kind, queries in query_sets.items():
        out += recall_rows(conn, table, name, kind, data, queries, vt, load_s, build_s, **opts)
    conn.execute(f"DROP TABLE {table}")
    conn.commit()
    return out


def recall_rows(
    conn, table, name, kind, data, queries, vt, load_s, build_s, pool=K, efs=EF, orders=ORDERS
) -> list[dict]:
    truth = exact_top(data, queries)
    sample = data[np.random.default_rng(0).choice(len(data), 2000, replace=False)]
    mean_cos = float((sample @ sample.T).mean())
    top10_gap = float(np.mean(np.sort(queries @ data.T, axis=1)[:, -10:].std(axis=1)))
    out = []
    for order in orders:
        for ef in efs:
            hits, in_pool, lat = 0, 0, []
            for qi, qv in enumerate(queries):
                t1 = time.perf_counter()
                with conn.transaction():
                    conn.execute("SELECT set_config('hnsw.iterative_scan', %s, true)", (order,))
                    conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
                    rows = conn.execute(
                        f"SELECT id, embedding::{vt}({DIMS}) <=> %s::{vt}({DIMS}) AS d "
                        f"FROM {table} WHERE dims = {DIMS} AND ns = %s AND model = %s "
                        "ORDER BY d LIMIT %s",
                        (literal(qv), "bench", "m", max(K, pool)),
                    ).fetchall()
                lat.append((time.perf_counter() - t1) * 1000)
                exact = set(truth[qi].tolist())
                hits += len({int(r[0]) for r in rows[:K]} & exact)
                in_pool += len({int(r[0]) for r in rows} & exact)
            out.append(
                {
                    "vectors": name,
                    "queries": kind,
                    "mean cosine": f"{mean_cos:.2f}",
                    "top-10 spread": f"{top10_gap:.4f}",
                    "scan": order,
                    "ef_search": ef,
                    "recall@10": f"{hits / (K * len(queries)):.3f}",
                    # What the engine gets: it asks for a pool of candidates and scores each
                    # exactly, so an exact top 10 anywhere in the pool is not lost.
                    f"top 10 in {max(K, pool)}": f"{in_pool / (K * len(queries)):.3f}",
                    "p50 ms": f"{np.percentile(lat, 50):.1f}",
                    "load s": f"{load_s:.0f}",
                    "build s": f"{build_s:.0f}",
                }
            )
            log(f"{name} {kind} {order} ef {ef}: recall {out[-1]['recall@10']}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--sets", default="mixture,bench")
    ap.add_argument(
        "--pool",
        type=int,
        default=K,
        help="rows asked per search (the engine asks for 50: query.hybrid.minCandidates)",
    )
    ap.add_argument("--ef", default=",".join(map(str, EF)), help="hnsw.ef_search values")
    ap.add_argument("--orders", default=",".join(ORDERS), help="iterative scan orders")
    args = ap.parse_args()
    import psycopg

    with postgres(os.environ.get("MEMORY_LS_PG_URL", "")) as url:
        with psycopg.connect(url) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            ver = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            extversion = str(ver.fetchone()[0])
            vt = vector_type_for(extversion)
            conn.commit()
            rows: list[dict] = []
            for name in args.sets.split(","):
                log(f"generating {name}: {args.n} vectors")
                if name in ("real", "real+docs"):
                    model = find_default_model()
                    if model is None:
                        raise SystemExit("no local model: memory-ls model pull")
                    data, asked = real_embeddings(model, queries=args.queries)
                    if name == "real+docs" and len(data) < args.n:
                        extra = stdlib_prose(args.n - len(data))
                        log(f"  {len(data)} vectors of the sets, {len(extra)} docstring lines")
                        data = np.concatenate([data, real_embeddings(model, (), 0, extra)[0]])
                    queries = {"the sets' questions": asked}
                elif name == "mixture":
                    data, queries = mixture(args.n, args.queries)
                else:
                    kind = "weighted" if name == "bench-weighted" else "flat"
                    data, queries = bench_vectors(args.n, args.queries, kind=kind)
                rows += run_set(
                    conn,
                    name,
                    data,
                    queries,
                    vt,
                    pool=args.pool,
                    efs=[int(x) for x in args.ef.split(",")],
                    orders=args.orders.split(","),
                )
        print(f"\npgvector {extversion}, {vt}, {args.queries} queries a set\n")
        header = list(rows[0])
        print(md_table(header, [[r[h] for h in header] for r in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
