"""Provider failures at run time: fallback activation with a safe rebuild, keyword answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write
from http_stub import StubServer, fault_status
from model_util import ensure_test_model

from memory_ls.engine import MemoryEngine
from memory_ls.settings import Settings


def remote_settings(stub: StubServer) -> Settings:
    s = Settings(provider="openai")
    s.remote.base_url = stub.url + "/v1"
    s.remote.api_key = "sk-fallback-test-secret"
    s.remote.retries = 1
    s.remote.backoff_min_ms = 1
    s.remote.backoff_max_ms = 5
    s.remote.query_timeout_ms = 500
    return s


@pytest.mark.model
def test_primary_failure_switches_to_fallback_and_rebuilds(ws: Path, tmp_path: Path):
    with StubServer(api_key="sk-fallback-test-secret", dims=16) as stub:
        s = remote_settings(stub)
        s.fallback = "local"
        s.local.model_path = str(ensure_test_model())
        e = MemoryEngine(ws, s, index_path=tmp_path / "i.sqlite")
        first = e.sync()
        assert e.provider.id == "openai" and first.embedded > 0
        stub.always(fault_status(500))
        write(ws, "memory/2026-03-01-new.md", "# New\n\nA fresh note about caching layers.\n")
        e.sync()
        st = e.status()
        assert st["provider"]["id"] == "local"
        assert "switched to fallback local" in st["fallbackReason"]
        assert "sk-fallback-test-secret" not in st["fallbackReason"]
        assert st["pendingEmbeddings"] == 0 and not st["needsRebuild"]
        resp = e.search("caching layers")
        assert resp.mode == "hybrid" and resp.provider["id"] == "local"
        assert resp.results[0].path == "memory/2026-03-01-new.md"
        assert "switched to fallback" in resp.fallback_reason
        e.close()


def test_search_answers_with_keywords_when_embeddings_fail(ws: Path, tmp_path: Path):
    with StubServer(api_key="sk-fallback-test-secret", dims=16) as stub:
        stub.always(fault_status(401))
        e = MemoryEngine(ws, remote_settings(stub), index_path=tmp_path / "i.sqlite")
        e.sync()
        resp = e.search("token bucket Redis")
        assert resp.mode == "keyword"
        assert resp.results[0].path == "memory/2026-01-10-api-design.md"
        assert "keyword results only" in resp.fallback_reason
        assert "sk-fallback-test-secret" not in resp.fallback_reason
        assert e.status()["fallbackReason"]
        e.close()


def test_backfill_through_the_openai_batch_api(ws: Path, tmp_path: Path):
    with StubServer(api_key="sk-fallback-test-secret", dims=16) as stub:
        s = remote_settings(stub)
        s.remote.batch_api = True
        s.remote.batch_api_min_texts = 1
        s.remote.batch_api_poll_ms = 1
        e = MemoryEngine(ws, s, index_path=tmp_path / "i.sqlite")
        report = e.sync()
        chunks = e.status()["chunks"]
        assert report.embedded == chunks and report.cache_hits == chunks
        assert stub.count("/batches") >= 1 and stub.count("/files") >= 1
        assert stub.count("/v1/embeddings") == 0  # nothing went through the synchronous endpoint
        assert e.search("token bucket Redis").mode == "hybrid"
        e.close()


def test_a_repeated_query_is_embedded_once(ws: Path, tmp_path: Path):
    """Query vectors are remembered per provider and text: asking again skips the endpoint
    and answers exactly as the first time."""
    with StubServer(api_key="sk-fallback-test-secret", dims=16) as stub:
        e = MemoryEngine(ws, remote_settings(stub), index_path=tmp_path / "i.sqlite")
        e.sync()

        def asked(text: str) -> int:
            bodies = [r.body for r in stub.requests if r.path.endswith("/embeddings")]
            return sum(1 for b in bodies if b and b.get("input") in (text, [text]))

        first = e.search("token bucket Redis")
        again = e.search("token bucket Redis")
        assert first.mode == again.mode == "hybrid"
        assert [(h.citation, h.score) for h in again.results] == [
            (h.citation, h.score) for h in first.results
        ]
        assert asked("token bucket Redis") == 1
        cached = e.policy.cached_vector("token bucket Redis")
        assert cached is not None and not cached.flags.writeable  # shared, so read-only
        assert e.policy.cached_vector("dark mode") is None
        e.search("dark mode")
        assert asked("dark mode") == 1
        e.close()


def test_model_changed_under_the_same_name_is_reported_not_raised(ws: Path, tmp_path: Path):
    """An OpenAI-compatible server whose alias now serves another model (other dimensions):
    the sync used to raise a bare ValueError out of the vector phase, and status and searches
    said nothing while new chunks never got vectors."""
    with StubServer(dims=16) as stub:
        s = Settings(provider="openai-compatible", model="local-alias")
        s.remote.base_url = stub.url + "/v1"
        e = MemoryEngine(ws, s, index_path=tmp_path / "i.sqlite")
        assert e.sync().embedded > 0
        e.close()
        stub.dims = 24
        write(ws, "memory/2026-03-01-new.md", "# New\n\nA fresh note about caching layers.\n")
        e = MemoryEngine(ws, s, index_path=tmp_path / "i.sqlite")
        e.sync()
        reason = e.status()["fallbackReason"]
        assert "16-dimensional" in reason and "24" in reason and "delete the index" in reason
        resp = e.search("caching layers")
        assert resp.results[0].path == "memory/2026-03-01-new.md"
        assert "16-dimensional" in resp.fallback_reason
        e.close()
