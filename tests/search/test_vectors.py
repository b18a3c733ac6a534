"""The vector side with the real local model: hybrid search, KNN backends, cache, re-embeds."""

from __future__ import annotations

import sqlite3
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import spy_submit, write
from model_util import ensure_test_model, model_engine

from memory_ls.search.vector import VectorIndex

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def model_path() -> Path:
    return ensure_test_model()


def test_hybrid_search_finds_meaning_not_just_words(ws: Path, tmp_path: Path, model_path: Path):
    e = model_engine(ws, tmp_path / "i.sqlite", model_path)
    r = e.sync()
    assert r.embedded == e.status()["chunks"] > 0
    resp = e.search("how do we throttle clients that send too many calls?")
    assert resp.mode == "hybrid" and resp.provider == {"id": "local", "model": e.provider.model}
    assert resp.results[0].path == "memory/2026-01-10-api-design.md"
    assert resp.results[0].vector_score is not None and resp.results[0].vector_score > 0.3
    vec_only = e.search("shipping new releases to production", mode="vector", min_score=0)
    assert vec_only.mode == "vector"
    assert vec_only.results[0].path == "memory/2026-02-01-deploy.md"
    e.close()


def test_vector_side_beside_the_keyword_side_gives_the_same_answers(
    ws: Path, tmp_path: Path, model_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """On a large matrix the vector side runs on a worker thread while FTS5 runs: the answers
    must be exactly those of the sequential search (here forced on a small index)."""
    from memory_ls.search import retrieve

    queries = ["how do we throttle clients", "deploy to production", "postgres", "tabs or spaces"]
    with model_engine(ws, tmp_path / "i.sqlite", model_path) as e:
        e.sync()

        def answers() -> list[list[tuple[str, int, float]]]:
            return [
                [(h.path, h.start_line, h.score) for h in e.search(q, min_score=0).results]
                for q in queries
            ]

        sequential = answers()
        monkeypatch.setattr(retrieve, "PARALLEL_FROM", 0)
        beside = spy_submit(monkeypatch, retrieve._SIDES)
        assert answers() == sequential
        assert len(beside) == len(queries)  # every hybrid query took the parallel path
        assert any(hits for hits in sequential)


def test_numpy_and_sqlite_vec_give_the_same_top_k(ws: Path, tmp_path: Path, model_path: Path):
    for i in range(30):
        write(
            ws,
            f"memory/topic-{i}.md",
            f"# Topic {i}\n\nNotes about subject {i}: "
            + " ".join(["alpha", "beta", "gamma", "delta", "kappa"][j % 5] for j in range(i))
            + "\n",
        )
    idx = tmp_path / "i.sqlite"
    e = model_engine(ws, idx, model_path)
    e.sync()
    e.close()
    results = {}
    for backend in ("numpy", "sqlite-vec"):
        e = model_engine(ws, idx, model_path, vector_backend=backend)
        assert e.status()["vectorBackend"] == backend
        resp = e.search("subject notes gamma", mode="vector", max_results=10, min_score=0)
        results[backend] = [(h.path, h.start_line, round(h.score, 4)) for h in resp.results]
        e.close()
    assert results["numpy"] == results["sqlite-vec"]
    assert len(results["numpy"]) == 10


def test_rebuild_reuses_the_embedding_cache(ws: Path, tmp_path: Path, model_path: Path):
    e = model_engine(ws, tmp_path / "i.sqlite", model_path)
    first = e.sync()
    assert first.embedded > 0
    again = e.sync(force=True)
    assert again.full and again.embedded == 0 and again.cache_hits == first.embedded
    assert e.status()["pendingEmbeddings"] == 0
    assert e.search("token bucket").mode == "hybrid"
    e.close()


def test_an_edit_embeds_only_the_changed_chunks(tmp_path: Path, model_path: Path):
    root = tmp_path / "w"
    paras = [
        f"## Part {i}\n\n" + f"Paragraph {i} talks about topic number {i}. " * 25 for i in range(8)
    ]
    write(root, "memory/long.md", "# Long\n\n" + "\n\n".join(paras) + "\n")
    e = model_engine(root, tmp_path / "i.sqlite", model_path)
    e.sync()
    chunks = e.status()["chunks"]
    assert chunks >= 4
    text = (root / "memory/long.md").read_text().replace("Paragraph 7 talks", "Paragraph 7 sings")
    e.set_document("memory/long.md", text)
    assert e.status()["pendingEmbeddings"] <= 2
    embedded = e.embed_pending()
    assert 1 <= embedded <= 2
    assert e.search("sings", mode="keyword").results[0].path == "memory/long.md"
    e.close()


def dict_loader(data: dict[int, np.ndarray]):
    """A VectorIndex loader over a dict that the test changes: what the store would hold."""

    def load(float16_from: int = 0) -> tuple[np.ndarray, np.ndarray]:
        keys = np.array(sorted(data), dtype=np.int64)
        return keys, np.stack([data[i] for i in keys])

    return load


def test_vector_index_updates_match_a_fresh_load():
    rng = np.random.default_rng(7)
    data = {i: rng.standard_normal(16).astype(np.float32) for i in range(1, 200)}
    for v in data.values():
        v /= np.linalg.norm(v)

    loader = dict_loader(data)

    live = VectorIndex(loader)
    q = data[5]
    live.search(q, 3)  # load
    removed = list(range(1, 120))
    for i in removed:
        del data[i]
    added = []
    for i in range(500, 900):
        v = rng.standard_normal(16).astype(np.float32)
        data[i] = v / np.linalg.norm(v)
        added.append((i, data[i]))
    live.update(removed, added)
    fresh = VectorIndex(loader)
    assert live.search(q, 10) == fresh.search(q, 10)
    assert live.size == fresh.size == len(data)


def test_queries_the_model_cannot_read_use_keywords(ws: Path, tmp_path: Path, model_path: Path):
    e = model_engine(ws, tmp_path / "i.sqlite", model_path)
    e.sync()
    zh = e.search("令牌桶限流算法")  # all-MiniLM-L6-v2 reads most Chinese characters as [UNK]
    assert zh.mode == "keyword" and "does not know" in zh.fallback_reason
    assert zh.results[0].path == "memory/notes/cjk.md"
    en = e.search("token bucket rate limiting")
    assert en.mode == "hybrid" and en.fallback_reason is None
    e.close()


def test_query_filters_are_not_embedded_with_the_words(ws: Path, tmp_path: Path, model_path: Path):
    """Filters in the query text narrow the hits; the meaning searched is the words alone,
    exactly as with the same filters given as options. "-redis" was embedded with the words
    and pulled the query vector towards the notes it excludes."""
    write(ws, "memory/db.md", "# Database\n\nWe run PostgreSQL 16 with pgbouncer.\n")
    write(ws, "memory/2026-03-01-cache.md", "# Cache\n\nThe cache layer is Redis.\n")
    e = model_engine(ws, tmp_path / "i.sqlite", model_path)
    e.sync()
    API = "memory/2026-01-10-api-design.md"

    def hits(query: str, **kw: object) -> list[tuple[str, float, float | None]]:
        resp = e.search(query, min_score=0, **kw)
        assert resp.mode == "hybrid"
        return [(h.path, round(h.score, 6), h.vector_score) for h in resp.results]

    plain = hits("database")
    assert plain[0][0] == "memory/db.md"
    # an excluded word that no hit holds changes nothing
    assert hits("database -kubernetes") == plain
    vector = {path: v for path, _, v in plain}
    assert {path: v for path, _, v in hits("database -redis")} == {
        p: v for p, v in vector.items() if p not in {"memory/2026-03-01-cache.md", API}
    }
    assert hits("database file:memory/") == hits("database", path_prefix="memory/")
    assert hits("database source:memory") == hits("database", sources=["memory"])
    e.close()


def test_writes_by_another_process_reach_the_vector_side(
    ws: Path, tmp_path: Path, model_path: Path
):
    idx = tmp_path / "shared.sqlite"
    server = model_engine(ws, idx, model_path)
    server.sync()
    before = server.search("Deploys go through GitHub Actions", mode="vector", min_score=0)
    assert before.results[0].path == "memory/2026-02-01-deploy.md"
    (ws / "memory/2026-02-01-deploy.md").write_text("# Gardening\n\nTomatoes need sun.\n")
    cli = model_engine(ws, idx, model_path)  # e.g. `memory-ls index` in a terminal
    cli.sync()
    cli.close()
    after = server.search("tomatoes need sun", mode="vector", min_score=0)
    top = after.results[0]
    assert top.path == "memory/2026-02-01-deploy.md" and top.score > 0.6, top.score
    assert "Tomatoes" in top.snippet
    server.close()


def test_without_sqlite_vec_vectors_fall_back_to_numpy(
    ws: Path, tmp_path: Path, model_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)  # as if the wheel were not installed
    e = model_engine(ws, tmp_path / "i.sqlite", model_path, vector_backend="sqlite-vec")
    e.sync()
    st = e.status()
    assert st["sqliteVec"].startswith("sqlite-vec not loaded") and st["vectorBackend"] == "numpy"
    resp = e.search("how do we throttle clients that send too many calls?")
    assert resp.mode == "hybrid"
    assert resp.results[0].path == "memory/2026-01-10-api-design.md"
    e.close()


def clustered(rng: np.random.Generator, n: int, centers: np.ndarray) -> np.ndarray:
    """Unit vectors around the given centers, as embeddings of related notes lie."""
    noise = rng.standard_normal((n, centers.shape[1])).astype(np.float32) * 0.5
    x = centers[rng.integers(0, len(centers), n)] + noise
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_large_mode_finds_what_an_exact_scan_finds():
    # Past `large` vectors the matrix is float16 and a sign-code scan picks RESCORE candidates.
    rng = np.random.default_rng(3)
    centers = rng.standard_normal((50, 384)).astype(np.float32)
    # float16 values, as the index stores them: what is compared is the candidate scan alone.
    mat = clustered(rng, 6000, centers).astype(np.float16).astype(np.float32)
    ids = np.arange(1, 6001, dtype=np.int64)
    exact = VectorIndex(lambda _: (ids, mat), large=10**9)
    large = VectorIndex(lambda _: (ids, mat), large=1000)
    queries = clustered(rng, 50, centers)  # new notes on the same topics
    recall = []
    for q in queries:
        want = {i for i, _ in exact.search(q, 10)}
        got, moments = large.knn(q, 10)
        recall.append(len(want & {i for i, _ in got}) / 10)
        _, full = exact.knn(q, 10)
        assert moments is not None and full is not None and moments.n == full.n == 6000
        assert abs(moments.mean - full.mean) < 0.02
    assert large._codes is not None and large._mat.dtype == np.float16
    assert np.mean(recall) >= 0.99
    # Scores are exact cosines (of the float16 rows).
    top = large.search(queries[0], 3)
    for cid, score in top:
        assert abs(score - float(mat[cid - 1] @ queries[0])) < 2e-3


def topics(seed: int, n: int) -> tuple[np.random.Generator, np.ndarray, dict[int, np.ndarray]]:
    """n clustered vectors keyed 1..n, with the generator and the 50 centres for more."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((50, 384)).astype(np.float32)
    return rng, centers, {i + 1: v for i, v in enumerate(clustered(rng, n, centers))}


def test_large_mode_follows_updates_like_a_fresh_load():
    rng, centers, data = topics(5, 3000)
    loader = dict_loader(data)
    live = VectorIndex(loader, large=500)
    q = data[7]
    live.search(q, 3)  # load: large mode
    removed = list(range(1, 1200))
    for i in removed:
        del data[i]
    added = [(i, v) for i, v in zip(range(5000, 5400), clustered(rng, 400, centers), strict=True)]
    data.update(added)
    live.update(removed, added)
    fresh = VectorIndex(loader, large=500)
    assert [i for i, _ in live.search(q, 10)] == [i for i, _ in fresh.search(q, 10)]
    assert live.size == fresh.size == len(data)
    assert live.similarity(q, [7, 5000]).keys() == {5000}  # 7 was removed
    # The background counts live rows as they are now (its sample is kept per version of
    # the rows: a stale one would still count the 3,000 rows of the first load).
    (_, before), (_, after) = live.knn(q, 10), fresh.knn(q, 10)
    assert before is not None and after is not None and before.n == after.n == len(data)
    live.update([5000], [])
    _, moments = live.knn(q, 10)
    assert moments is not None and moments.n == len(data) - 1
    assert 5000 not in {i for i, _ in live.search(q, 50)}


def test_an_index_that_grows_past_large_switches_mode_in_place():
    # A first sync fills the open index chunk batch by chunk batch: it must not stay float32.
    rng, centers, data = topics(9, 300)
    loader = dict_loader(data)
    live = VectorIndex(loader, large=1000)
    q = data[3]
    live.search(q, 3)
    assert live._codes is None
    for start in range(1000, 4000, 500):
        batch = list(zip(range(start, start + 500), clustered(rng, 500, centers), strict=True))
        data.update(batch)
        live.update([], batch)
    assert live._codes is not None and live._mat.dtype == np.float16
    fresh = VectorIndex(loader, large=1000)
    assert [i for i, _ in live.search(q, 10)] == [i for i, _ in fresh.search(q, 10)]


def test_sign_codes_hold_two_bits_a_dimension_that_rank_better_than_one(monkeypatch):
    from memory_ls.search import vector

    v = np.random.default_rng(0).standard_normal((3, 384)).astype(np.float32)
    codes = vector.sign_codes(v)
    assert codes.shape == (12, 3)  # 768 bits: the signs, then the rotated signs
    assert np.array_equal(codes, vector.sign_codes(v))  # a fixed rotation
    assert vector.hamming(codes, vector.sign_codes(v[0])).tolist()[0] == 0
    assert vector.hamming(vector.sign_codes(-v[:1]), codes[:, :1]).tolist() == [768]
    # At a million's selectivity (40 re-scored of 6,000 here, as 2,048 of 1M is 0.2%), the
    # scan finds 0.744 of the exact top 10 on these noisy clusters; one bit a dimension: 0.666.
    rng = np.random.default_rng(3)
    centers = rng.standard_normal((50, 384)).astype(np.float32)
    mat = clustered(rng, 6000, centers).astype(np.float16).astype(np.float32)
    ids = np.arange(1, 6001, dtype=np.int64)
    queries = clustered(rng, 100, centers)
    exact = VectorIndex(lambda _: (ids, mat), large=10**9)
    monkeypatch.setattr(vector, "RESCORE", 40)
    large = VectorIndex(lambda _: (ids, mat), large=1000)
    recall = [
        len({i for i, _ in exact.search(q, 10)} & {i for i, _ in large.search(q, 10)}) / 10
        for q in queries
    ]
    assert np.mean(recall) > 0.72


def test_another_process_s_vector_writes_are_followed_not_reloaded(
    ws: Path, tmp_path: Path, model_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """An agent's CLI or MCP server shares the editor's index file. What it writes reaches the
    editor's in-memory vectors through the index's log of changed vectors: the matrix ends up
    exactly as a fresh load would have it, without loading everything again (1.1 s at 125k
    chunks); a rebuilt index, a log pruned past the editor's place and an index without a log
    (an older version rebuilt it) load everything again."""
    from memory_ls.index import vectors as stored

    idx = tmp_path / "i.sqlite"
    editor, agent = model_engine(ws, idx, model_path), model_engine(ws, idx, model_path)
    editor.sync()
    loads = []
    original = editor.vectors._loader

    def counted(large: int):
        loads.append(large)
        return original(large)

    monkeypatch.setattr(editor.vectors, "_loader", counted)

    def matches_a_fresh_load() -> None:
        editor.search("anything at all", min_score=0)  # sees the other commit, follows it
        fresh = VectorIndex(editor.indexer.writer.all_embeddings)
        for q in ("token bucket rate limiting", "deploy rollback", "a new agent note"):
            qv = editor.provider.embed_query(q)
            live, want = editor.vectors.search(qv, 1000), fresh.search(qv, 1000)
            assert [i for i, _ in live] == [i for i, _ in want]
            # The editor's own writes keep the vectors as computed, a load reads them back.
            assert np.allclose([s for _, s in live], [s for _, s in want], atol=1e-6)
        assert editor.vectors.size == fresh.size == editor.status()["chunks"]

    with editor, agent:
        editor.search("dark mode")
        assert loads == [] and editor.vectors.size > 0
        write(ws, "memory/2026-03-01-agent.md", "# Agent note\n\nA new agent note about caching.\n")
        agent.sync()
        matches_a_fresh_load()
        write(ws, "memory/2026-02-01-deploy.md", "# Deploy\n\nDeploys now go through Buildkite.\n")
        (ws / "MEMORY.md").unlink()
        agent.sync()
        editor.set_document("memory/2026-01-10-api-design.md", "# API design\n\nLeaky bucket.\n")
        editor.embed_pending()  # the editor's own write, then the agent's over it
        write(ws, "memory/2026-03-02-agent.md", "# Second note\n\nAbout queues and workers.\n")
        agent.sync()
        matches_a_fresh_load()
        assert loads == []  # every change so far followed through the log

        agent.sync(force=True)  # a rebuild copies an index with a log of its own over this one
        matches_a_fresh_load()
        assert len(loads) == 1

        monkeypatch.setattr(stored, "KEPT_CHANGES", 1)  # the editor's place is pruned away
        write(ws, "memory/2026-03-03-agent.md", "# Third\n\nOne.\n\n# Fourth\n\nTwo.\n" * 40)
        agent.sync()
        matches_a_fresh_load()
        assert len(loads) == 2

        with sqlite3.connect(idx) as db:  # as an older version leaves a rebuilt index: no log
            db.executescript(
                "DROP TRIGGER chunk_vectors_added; DROP TRIGGER chunk_vectors_changed; "
                "DROP TRIGGER chunk_vectors_removed; DROP TABLE vector_changes; "
                "DELETE FROM meta WHERE key = 'vectorLog';"
            )
        write(ws, "memory/2026-03-04-agent.md", "# Fifth\n\nAbout logs.\n")
        agent.sync()  # pruning a log that is not there is no error
        matches_a_fresh_load()
        assert len(loads) == 3


def test_a_search_does_not_wait_for_seconds_of_vector_loading(
    ws: Path, tmp_path: Path, model_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A million vectors take about 5 s to load (after a restart, a rebuild, a model change);
    a search that asks for no mode loaded them itself, holding the editor's request that long.
    It now waits at most sync.searchBudgetMs for a load in the background and answers with
    keywords meanwhile, saying so; one that asks for hybrid still waits."""
    with model_engine(ws, tmp_path / "i.sqlite", model_path) as e:
        e.sync()
        go = threading.Event()
        real = e.vectors._loader

        def slow(large: int):
            go.wait(30)  # as long as a large index's load
            return real(large)

        monkeypatch.setattr(e.vectors, "_loader", slow)
        e.vectors.invalidate()
        t0 = time.perf_counter()
        first = e.search("how do we throttle clients")
        assert time.perf_counter() - t0 < 5
        assert first.mode == "keyword" and "still loading" in (first.fallback_reason or "")
        assert first.results[0].path == "memory/2026-01-10-api-design.md"
        asked: list[str] = []
        waiting = threading.Thread(target=lambda: asked.append(e.search("x", mode="hybrid").mode))
        waiting.start()
        waiting.join(1)
        assert waiting.is_alive()  # hybrid asked for: it waits for the vectors
        go.set()
        waiting.join(30)
        assert asked == ["hybrid"]
        assert e.search("how do we throttle clients").mode == "hybrid"


def test_a_filtered_search_scores_the_filters_chunks_on_the_vector_side(
    tmp_path: Path, model_path: Path
):
    """Vector mode with a path filter: the chunks under it were compared with the query only
    when they were among its nearest 200 (the filters came after), so a folder's notes went
    unseen beside 250 closer ones."""
    root = tmp_path / "ws"
    for i in range(250):
        write(root, f"memory/a/{i:03d}.md", f"# Caching {i}\n\nRedis cache eviction policy {i}.\n")
    write(root, "memory/b/x.md", "# Lunch\n\nWe had soup and talked about the weather.\n")
    e = model_engine(root, tmp_path / "i.sqlite", model_path)
    e.sync()
    unfiltered = e.search("redis cache eviction", mode="vector", max_results=300, min_score=0)
    assert "memory/b/x.md" not in [h.path for h in unfiltered.results[:200]]
    got = e.search("redis cache eviction file:memory/b/", mode="vector", min_score=0)
    assert [h.path for h in got.results] == ["memory/b/x.md"]
    assert got.results[0].vector_score is not None
    e.close()
