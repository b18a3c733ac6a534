"""Gemini's and Voyage's asynchronous batch APIs, end to end against the stub on 127.0.0.1.

The stub (tests/support/http_stub.py) checks each request's shape, walks each job through its API's
states on every poll, and can fail items, corrupt vectors, or end a job failed or expired.
No mocks of httpx: real requests, real JSON.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import numpy as np
import pytest

try:
    from http_stub import StubServer, fault_status, vector_for
except ImportError:  # tests/ became a package
    from tests.support.http_stub import StubServer, fault_status, vector_for

from memory_ls.embeddings.base import EmbeddingError
from memory_ls.embeddings.batch import BatchJob, batch_embedder_for, custom_id
from memory_ls.embeddings.batch_gemini import GeminiBatchEmbedder
from memory_ls.embeddings.batch_openai import OpenAIBatchEmbedder
from memory_ls.embeddings.batch_voyage import VoyageBatchEmbedder
from memory_ls.embeddings.gemini import GeminiProvider
from memory_ls.embeddings.openai import MistralProvider, OpenAICompatibleProvider, OpenAIProvider
from memory_ls.embeddings.remote import RemoteError
from memory_ls.embeddings.voyage import VoyageProvider
from memory_ls.settings import RemoteSettings

GEMINI_KEY = "AIzaSyTEST-batch-secret-0123456789abc"
VOYAGE_KEY = "pa-test-BATCH-secret-0123456789abcdef"
TEXTS = [f"note number {i}" for i in range(5)]
GEMINI_MODEL = "gemini-embedding-001"
CREATE = f"/v1beta/models/{GEMINI_MODEL}:asyncBatchEmbedContent"
GEMINI_SYNC = f"/v1beta/models/{GEMINI_MODEL}:batchEmbedContents"

# provider name -> (provider class, embedder class, key, base path)
KINDS = {
    "gemini": (GeminiProvider, GeminiBatchEmbedder, GEMINI_KEY, "/v1beta"),
    "voyage": (VoyageProvider, VoyageBatchEmbedder, VOYAGE_KEY, "/v1"),
}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def gemini_stub():
    with StubServer(api_key=GEMINI_KEY, dims=8) as server:
        yield server


@pytest.fixture
def voyage_stub():
    with StubServer(api_key=VOYAGE_KEY, dims=8) as server:
        yield server


def settings(stub: StubServer, base: str, **overrides) -> RemoteSettings:
    values = dict(
        base_url=stub.url + base,
        query_timeout_ms=1000,
        batch_timeout_ms=2000,
        retries=2,
        backoff_min_ms=5,
        backoff_max_ms=20,
        batch_size=2,
        batch_api=True,
        batch_api_min_texts=1,
        batch_api_poll_ms=1,
    )
    values.update(overrides)
    return RemoteSettings(**values)


def setup(
    kind: str, stub: StubServer, *, polls: int = 1, key: str = "", embedder_kw=None, **remote
):
    provider_cls, embedder_cls, default_key, base = KINDS[kind]
    stub.batch_polls = polls
    s = settings(stub, base, **remote)
    provider = provider_cls(s, api_key=key or default_key)
    return provider, embedder_cls(provider, s, **(embedder_kw or {}))


def unit(v) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    return (a / np.linalg.norm(a)).astype(np.float32)


def expected(texts, dims=8):
    return np.vstack([unit(vector_for(t, dims)) for t in texts])


def gkey(start: int, count: int, i: int) -> str:
    """The Gemini request key of text ``start + i`` of the chunk ``(start, count)``."""
    return f"{custom_id(start, TEXTS[start : start + count])}:{i}"


def paths(stub: StubServer) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in stub.requests]


# -- choosing the embedder ----------------------------------------------------------------------


def test_batch_embedder_for_each_provider(gemini_stub):
    on = settings(gemini_stub, "/v1", batch_api_min_texts=10)
    off = settings(gemini_stub, "/v1", batch_api=False)
    cases = [
        (OpenAIProvider(on, api_key="sk-x-0123456789"), OpenAIBatchEmbedder),
        (GeminiProvider(on, api_key=GEMINI_KEY), GeminiBatchEmbedder),
        (VoyageProvider(on, api_key=VOYAGE_KEY), VoyageBatchEmbedder),
    ]
    for provider, cls in cases:
        b = batch_embedder_for(provider, on)
        assert type(b) is cls and b.should_use(10) and not b.should_use(9)
        assert batch_embedder_for(provider, off) is None
    # no batch API: Mistral, OpenAI-compatible servers
    assert batch_embedder_for(MistralProvider(on, api_key="k-0123456789"), on) is None
    compat = OpenAICompatibleProvider(on, model="m", api_key="")
    assert batch_embedder_for(compat, on) is None


# -- Gemini -------------------------------------------------------------------------------------


def test_gemini_batch_end_to_end(gemini_stub):
    stub = gemini_stub
    _, batch = setup("gemini", stub, polls=2)
    seen: list[tuple[int, int]] = []
    jobs: list[BatchJob] = []
    out = batch.embed(
        TEXTS, on_vectors=lambda s, v: seen.append((s, len(v))), on_submitted=jobs.append
    )
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert sorted(seen) == [(0, 2), (2, 2), (4, 1)]
    name = jobs[0].batch_id
    assert name.startswith("batches/") and jobs[0].input_file_id == ""
    calls = paths(stub)
    assert calls[0] == ("POST", CREATE)
    polls = [c for c in calls[1:] if c == ("GET", f"/v1beta/{name}")]
    assert len(polls) == len(calls) - 1 == 5  # PENDING x2, RUNNING x2, SUCCEEDED
    assert not any(p == GEMINI_SYNC for _, p in calls)  # nothing synchronous
    for r in stub.requests:  # the key travels in its header, never in the URL
        assert r.headers["x-goog-api-key"] == GEMINI_KEY
        assert "key" not in r.query and GEMINI_KEY not in r.path
        assert "authorization" not in r.headers
    body = stub.requests[0].body["batch"]
    assert body["model"] == f"models/{GEMINI_MODEL}"
    items = body["inputConfig"]["requests"]["requests"]
    assert [it["request"]["content"]["parts"][0]["text"] for it in items] == TEXTS
    assert all(it["request"]["taskType"] == "RETRIEVAL_DOCUMENT" for it in items)
    assert all(it["request"]["model"] == f"models/{GEMINI_MODEL}" for it in items)
    assert all("outputDimensionality" not in it["request"] for it in items)
    assert [it["metadata"]["key"] for it in items] == [
        gkey(0, 2, 0),
        gkey(0, 2, 1),
        gkey(2, 2, 0),
        gkey(2, 2, 1),
        gkey(4, 1, 0),
    ]
    assert batch.report.statuses == {name: "BATCH_STATE_SUCCEEDED"}
    assert batch.report.texts_from_batch == 5 and batch.report.texts_retried_sync == 0


def test_gemini_batch_asks_for_output_dimensionality(gemini_stub):
    _, batch = setup("gemini", gemini_stub, dimensions=4)
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS, 4), rtol=1e-5)
    items = gemini_stub.requests[0].body["batch"]["inputConfig"]["requests"]["requests"]
    assert {it["request"]["outputDimensionality"] for it in items} == {4}


def test_gemini_failed_item_is_retried_alone(gemini_stub):
    stub = gemini_stub
    _, batch = setup("gemini", stub)
    stub.batch_fail_ids = {gkey(2, 2, 1)}  # TEXTS[3]
    seen: list[tuple[int, int]] = []
    out = batch.embed(TEXTS, on_vectors=lambda s, v: seen.append((s, len(v))))
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    sync = [r for r in stub.requests if r.path == GEMINI_SYNC]
    assert len(sync) == 1
    assert [q["content"]["parts"][0]["text"] for q in sync[0].body["requests"]] == [TEXTS[3]]
    assert sync[0].body["requests"][0]["taskType"] == "RETRIEVAL_DOCUMENT"
    assert sorted(seen) == [(0, 2), (2, 1), (3, 1), (4, 1)]
    assert batch.report.texts_from_batch == 4 and batch.report.texts_retried_sync == 1
    assert batch.report.failed_requests == [custom_id(2, TEXTS[2:4])]


def test_gemini_invalid_vector_is_rejected_and_retried(gemini_stub):
    stub = gemini_stub
    _, batch = setup("gemini", stub)
    stub.batch_nan_ids = {gkey(0, 2, 1)}  # TEXTS[1] comes back with a NaN
    out = batch.embed(TEXTS)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    sync = [r for r in stub.requests if r.path == GEMINI_SYNC]
    assert [[q["content"]["parts"][0]["text"] for q in r.body["requests"]] for r in sync] == [
        [TEXTS[1]]
    ]
    assert batch.report.texts_retried_sync == 1


@pytest.mark.parametrize("outcome", ["failed", "expired"])
def test_gemini_failed_or_expired_job_goes_synchronous(gemini_stub, outcome):
    stub = gemini_stub
    _, batch = setup("gemini", stub)
    stub.batch_outcome = outcome
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert list(batch.report.statuses.values()) == [f"BATCH_STATE_{outcome.upper()}"]
    assert batch.report.texts_retried_sync == 5 and batch.report.texts_from_batch == 0
    assert stub.count(":batchEmbedContents") == 3  # batches of remote.batchSize


def test_gemini_timeout_cancels_and_goes_synchronous(gemini_stub):
    stub = gemini_stub
    ticks = iter(range(0, 10_000 * 60, 60))  # each look at the clock: one more minute
    _, batch = setup(
        "gemini",
        stub,
        polls=10_000,
        batch_api_timeout_minutes=5,
        embedder_kw={"clock": lambda: float(next(ticks))},
    )
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    cancels = [r for r in stub.requests if r.path.endswith(":cancel")]
    assert len(cancels) == 1 and cancels[0].method == "POST"
    assert cancels[0].path == f"/v1beta/{batch.report.jobs[0]}:cancel"
    assert list(batch.report.statuses.values()) == ["BATCH_STATE_CANCELLED"]
    assert batch.report.texts_retried_sync == 5


def test_gemini_transient_poll_error_is_retried(gemini_stub):
    stub = gemini_stub
    _, batch = setup("gemini", stub)
    # the first poll after the job is created gets a 503, then the poll is tried again
    out = batch.embed(TEXTS, on_submitted=lambda job: stub.script(fault_status(503)))
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert batch.report.texts_from_batch == 5 and stub.count(":batchEmbedContents") == 0
    assert batch.provider.stats.retries == 1


def test_gemini_poll_interval(gemini_stub):
    sleeps: list[float] = []
    _, batch = setup(
        "gemini",
        gemini_stub,
        polls=2,
        batch_api_poll_ms=250,
        embedder_kw={"sleep": sleeps.append},
    )
    batch.embed(TEXTS)
    assert sleeps == [0.25] * 4  # between the 5 polls


# -- Voyage -------------------------------------------------------------------------------------


def test_voyage_batch_end_to_end(voyage_stub):
    stub = voyage_stub
    _, batch = setup("voyage", stub, polls=2)
    seen: list[tuple[int, int]] = []
    jobs: list[BatchJob] = []
    out = batch.embed(
        TEXTS, on_vectors=lambda s, v: seen.append((s, len(v))), on_submitted=jobs.append
    )
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert sorted(seen) == [(0, 2), (2, 2), (4, 1)]
    calls = paths(stub)
    assert calls[0] == ("POST", "/v1/files") and calls[1] == ("POST", "/v1/batches")
    batch_id = jobs[0].batch_id
    polls = [c for c in calls if c == ("GET", f"/v1/batches/{batch_id}")]
    # validating x2, in_progress x2, finalizing, completed
    assert len(polls) == 6
    assert calls[-1][1].endswith("/content")
    assert stub.count("/v1/embeddings") == 0  # nothing synchronous
    for r in stub.requests:
        assert r.headers["authorization"] == f"Bearer {VOYAGE_KEY}"
    upload = stub.requests[0]
    assert upload.headers["content-type"].startswith("multipart/form-data")
    create = stub.requests[1].body
    assert create["endpoint"] == "/v1/embeddings" and create["completion_window"] == "12h"
    assert create["request_params"] == {"model": "voyage-3.5", "input_type": "document"}
    lines = [json.loads(x) for x in stub.files[create["input_file_id"]].splitlines()]
    assert lines == [
        {"custom_id": custom_id(s, TEXTS[s : s + n]), "body": {"input": TEXTS[s : s + n]}}
        for s, n in [(0, 2), (2, 2), (4, 1)]
    ]
    assert batch.report.statuses == {batch_id: "completed"}
    assert batch.report.texts_from_batch == 5 and batch.report.texts_retried_sync == 0


def test_voyage_batch_asks_for_output_dimension(voyage_stub):
    _, batch = setup("voyage", voyage_stub, dimensions=4)
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS, 4), rtol=1e-5)
    create = voyage_stub.requests[1].body
    assert create["request_params"]["output_dimension"] == 4


def test_voyage_failed_item_is_retried_synchronously(voyage_stub):
    stub = voyage_stub
    _, batch = setup("voyage", stub)
    stub.batch_fail_ids = {custom_id(2, TEXTS[2:4])}
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    sync = [r for r in stub.requests if r.path == "/v1/embeddings"]
    assert [r.body["input"] for r in sync] == [TEXTS[2:4]]
    assert sync[0].body["input_type"] == "document"
    assert batch.report.texts_retried_sync == 2 and batch.report.texts_from_batch == 3


def test_voyage_invalid_vectors_are_rejected_and_retried(voyage_stub):
    stub = voyage_stub
    _, batch = setup("voyage", stub)
    stub.batch_nan_ids = {custom_id(0, TEXTS[0:2])}
    out = batch.embed(TEXTS)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert [r.body["input"] for r in stub.requests if r.path == "/v1/embeddings"] == [TEXTS[0:2]]


@pytest.mark.parametrize(
    "outcome,sync_texts,status", [("failed", 5, "failed"), ("expired", 4, "completed")]
)
def test_voyage_failed_or_expired_job(voyage_stub, outcome, sync_texts, status):
    stub = voyage_stub
    _, batch = setup("voyage", stub)
    stub.batch_outcome = outcome  # expired: the window closed, half the requests unfinished
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert batch.report.texts_retried_sync == sync_texts
    assert list(batch.report.statuses.values()) == [status]


def test_voyage_timeout_cancels_and_goes_synchronous(voyage_stub):
    stub = voyage_stub
    ticks = iter(range(0, 10_000 * 60, 60))
    _, batch = setup(
        "voyage",
        stub,
        polls=10_000,
        batch_api_timeout_minutes=5,
        embedder_kw={"clock": lambda: float(next(ticks))},
    )
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    cancels = [r for r in stub.requests if r.path.endswith("/cancel")]
    assert len(cancels) == 1 and cancels[0].method == "POST"
    assert list(batch.report.statuses.values()) == ["cancelled"]  # through "cancelling"
    assert batch.report.texts_retried_sync == 5


# -- both ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["gemini", "voyage"])
@pytest.mark.parametrize("concurrency", [1, 2])
def test_jobs_run_concurrency_at_a_time(kind, concurrency):
    key = KINDS[kind][2]
    with StubServer(api_key=key, dims=8) as stub:
        texts = [f"text {i}" for i in range(8)]
        _, batch = setup(
            kind,
            stub,
            polls=2,
            batch_api_concurrency=concurrency,
            embedder_kw={"max_requests_per_job": 2 if kind == "gemini" else 1},
        )
        submitted: list[BatchJob] = []
        all_started = threading.Event()

        def hold(job: BatchJob) -> None:  # the first jobs wait until `concurrency` exist
            submitted.append(job)
            if len(submitted) >= concurrency:
                all_started.set()
            assert all_started.wait(5)

        out = batch.embed(texts, on_submitted=hold)
        np.testing.assert_allclose(out, expected(texts), rtol=1e-5)
        assert len(batch.report.jobs) == len(submitted) == 4
        assert stub.max_in_flight == concurrency  # never more, and that many at once
        assert batch.report.texts_from_batch == 8


@pytest.mark.parametrize("kind", ["gemini", "voyage"])
def test_results_survive_a_crash_and_resume(kind):
    key = KINDS[kind][2]
    with StubServer(api_key=key, dims=8) as stub:
        _, batch = setup(kind, stub)
        cache: dict[int, np.ndarray] = {}
        jobs: list[BatchJob] = []

        def store(start, vectors):
            if cache:
                raise KeyboardInterrupt("crash after the first piece")
            cache[start] = vectors

        with pytest.raises(KeyboardInterrupt):
            batch.embed(TEXTS, on_vectors=store, on_submitted=jobs.append)
        assert len(cache) == 1  # what arrived first is kept
        created = len(stub.requests)
        creations = stub.count(":asyncBatchEmbedContent") + stub.count("/batches")
        out = batch.resume(jobs[0], TEXTS)
        np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
        assert stub.count(":asyncBatchEmbedContent") + stub.count("/batches") == creations
        assert len(stub.requests) > created  # collected again, nothing paid twice
        assert stub.count(":batchEmbedContents") == 0 and stub.count("/embeddings") == 0
        with pytest.raises(EmbeddingError, match="other texts"):
            batch.resume(jobs[0], list(reversed(TEXTS)))


@pytest.mark.parametrize("kind", ["gemini", "voyage"])
def test_keys_never_in_logs_or_errors(kind, caplog):
    caplog.set_level(logging.DEBUG)
    right = KINDS[kind][2]
    wrong = right[:-6] + "WRONG1"  # the stub's 401 echoes the key it was given
    with StubServer(api_key=right, dims=8) as stub:
        _, good = setup(kind, stub, polls=1)
        stub.batch_fail_ids = {gkey(2, 2, 1), custom_id(2, TEXTS[2:4])}
        good.embed(TEXTS)
        _, bad = setup(kind, stub, key=wrong)
        with pytest.raises(RemoteError) as info:
            bad.embed(TEXTS)
        assert info.value.status == 401
        assert any(
            r.levelno == logging.WARNING and "batch" in r.getMessage() for r in caplog.records
        )
        # every request failed with 401 while the server echoed the wrong key back
        assert wrong in stub.requests[-1].headers.get(
            "x-goog-api-key", stub.requests[-1].headers.get("authorization", "")
        )
        for text in (str(info.value), repr(info.value), caplog.text, repr(good.report)):
            assert right not in text and wrong not in text
        for secret in (right, wrong):
            assert all(secret not in str(r.args) for r in caplog.records)


@pytest.mark.parametrize("kind", ["gemini", "voyage"])
def test_engine_backfill_through_the_batch_api(kind, ws: Path, tmp_path: Path):
    from memory_ls.engine import MemoryEngine
    from memory_ls.settings import Settings

    provider_cls, _, key, base = KINDS[kind]
    with StubServer(api_key=key, dims=16) as stub:
        s = Settings(provider=kind)
        s.remote = settings(stub, base, batch_size=4, retries=1)
        s.remote.api_key = key
        e = MemoryEngine(ws, s, index_path=tmp_path / "i.sqlite")
        try:
            assert type(e.provider) is provider_cls
            report = e.sync()
            chunks = e.status()["chunks"]
            assert report.embedded == chunks and report.cache_hits == chunks
            creations = stub.count(":asyncBatchEmbedContent") + stub.count("/v1/batches")
            assert creations >= 1
            # nothing went through the synchronous endpoint
            assert stub.count(":batchEmbedContents") == 0 and stub.count("/v1/embeddings") == 0
            assert e.search("token bucket Redis").mode == "hybrid"
        finally:
            e.close()


def test_embeddings_modules_import_one_way():
    """No import cycle inside memory_ls/embeddings, counting imports inside functions too:
    the per-API batch modules import batch.py, providers import their batch module."""
    import ast

    import memory_ls.embeddings as package

    root = Path(package.__file__).parent
    names = {f.stem for f in root.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for f in root.glob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        graph[f.stem] = deps & names
    assert "batch" in graph["batch_gemini"] and "batch_gemini" in graph["gemini"]
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        assert name not in path, "import cycle: " + " -> ".join([*path, name])
        if name not in done:
            for dep in sorted(graph[name]):
                visit(dep, [*path, name])
            done.add(name)

    for name in sorted(graph):
        visit(name, [])
