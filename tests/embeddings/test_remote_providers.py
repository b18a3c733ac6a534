"""Remote embedding providers against a real HTTP server on 127.0.0.1 (tests/support/http_stub.py).

No mocks of httpx: every test sends real requests to the stub, which checks the wire format,
records what it received and misbehaves on cue.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
import types
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import numpy as np
import pytest

try:
    from http_stub import StubServer, fault, fault_hang, fault_status, vector_for
except ImportError:  # tests/ became a package
    from tests.support.http_stub import StubServer, fault, fault_hang, fault_status, vector_for

from remote_util import fast

from memory_ls.embeddings import factory
from memory_ls.embeddings.base import EmbeddingError, EmbeddingProvider, ProviderUnavailable
from memory_ls.embeddings.gemini import GeminiProvider
from memory_ls.embeddings.ollama import OllamaProvider
from memory_ls.embeddings.openai import (
    MistralProvider,
    OllamaOpenAIProvider,
    OpenAICompatibleProvider,
    OpenAIProvider,
)
from memory_ls.embeddings.remote import (
    RemoteError,
    backoff_delay,
    parse_retry_after,
    redact,
)
from memory_ls.embeddings.voyage import VoyageProvider
from memory_ls.settings import Settings

KEY = "sk-test-SECRET-0123456789abcdef"
GEMINI_KEY = "AIzaSyTEST-secret-key-0123456789abc"
ENV_VARS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "VOYAGE_API_KEY", "MISTRAL_API_KEY")

# name -> (class, base path under the stub, needs key, request path for documents)
PROVIDERS = {
    "openai": (OpenAIProvider, "/v1", "/v1/embeddings"),
    "mistral": (MistralProvider, "/v1", "/v1/embeddings"),
    "voyage": (VoyageProvider, "/v1", "/v1/embeddings"),
    "gemini": (GeminiProvider, "/v1beta", "/v1beta/models/gemini-embedding-001:batchEmbedContents"),
    "ollama": (OllamaProvider, "", "/api/embed"),
    "ollama-v1": (OllamaOpenAIProvider, "/v1", "/v1/embeddings"),
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    # Nothing local to find: the auto order must reach the remote providers.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    _fake_local(monkeypatch, path=None)  # tests that want a local model say so


@pytest.fixture
def stub():
    with StubServer(api_key=KEY, dims=8) as server:
        yield server


def make(name: str, stub: StubServer, key: str = KEY, **overrides):
    cls, base, _ = PROVIDERS[name]
    return cls(fast(stub.url + base, **overrides), api_key=key)


def unit(v) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    return (a / np.linalg.norm(a)).astype(np.float32)


# -- wire formats -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_provider_implements_protocol_and_embeds(stub, name):
    p = make(name, stub)
    try:
        assert isinstance(p, EmbeddingProvider)
        assert p.dims == 0  # unknown until the first answer
        docs = p.embed_documents(["alpha beta", "gamma", "delta epsilon"])
        assert docs.shape == (3, 8) and docs.dtype == np.float32
        for row, text in zip(docs, ["alpha beta", "gamma", "delta epsilon"], strict=True):
            np.testing.assert_allclose(row, unit(vector_for(text, 8)), rtol=1e-5)
        q = p.embed_query("alpha beta")
        assert q.shape == (8,)
        np.testing.assert_allclose(np.linalg.norm(q), 1.0, rtol=1e-5)
        assert p.dims == 8
        assert KEY not in p.provider_key and KEY not in repr(p)
    finally:
        p.close()


def test_openai_wire_format(stub):
    p = make("openai", stub, dimensions=4)
    p.embed_documents(["one", "two"])
    req = stub.last()
    assert req.method == "POST" and req.path == "/v1/embeddings"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.headers["content-type"] == "application/json"
    assert req.body == {"model": "text-embedding-3-small", "input": ["one", "two"], "dimensions": 4}
    assert p.dims == 4
    assert p.max_input_tokens == 8191


def test_openai_reorders_by_index(stub):
    p = make("openai", stub)
    stub.script(fault("shuffle"))
    out = p.embed_documents(["first", "second", "third"])
    for row, text in zip(out, ["first", "second", "third"], strict=True):
        np.testing.assert_allclose(row, unit(vector_for(text, 8)), rtol=1e-5)


def test_mistral_wire_format(stub):
    p = make("mistral", stub, dimensions=6)
    p.embed_query("q")
    assert stub.last().body == {"model": "mistral-embed", "input": ["q"], "output_dimension": 6}
    assert stub.last().headers["authorization"] == f"Bearer {KEY}"
    assert p.max_input_tokens == 8192


def test_voyage_wire_format_query_vs_document(stub):
    p = make("voyage", stub, dimensions=4)
    p.embed_query("what is it")
    assert stub.last().body == {
        "model": "voyage-3.5",
        "input": ["what is it"],
        "input_type": "query",
        "output_dimension": 4,
    }
    p.embed_documents(["it is this"])
    assert stub.last().body["input_type"] == "document"
    assert stub.last().headers["authorization"] == f"Bearer {KEY}"
    assert p.max_input_tokens == 32000
    stub.script(fault("shuffle"))
    out = p.embed_documents(["a", "b"])
    np.testing.assert_allclose(out[0], unit(vector_for("a", 4)), rtol=1e-5)


def test_gemini_wire_format(stub):
    p = GeminiProvider(fast(stub.url + "/v1beta", dimensions=4), api_key=KEY)
    p.embed_query("find me")
    req = stub.last()
    assert req.path == "/v1beta/models/gemini-embedding-001:embedContent"
    assert req.headers["x-goog-api-key"] == KEY
    assert "authorization" not in req.headers and req.query == {}  # key never in the URL
    assert req.body == {
        "model": "models/gemini-embedding-001",
        "content": {"parts": [{"text": "find me"}]},
        "taskType": "RETRIEVAL_QUERY",
        "outputDimensionality": 4,
    }
    p.embed_documents(["doc one", "doc two"])
    req = stub.last()
    assert req.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert [r["taskType"] for r in req.body["requests"]] == ["RETRIEVAL_DOCUMENT"] * 2
    assert [r["content"]["parts"][0]["text"] for r in req.body["requests"]] == [
        "doc one",
        "doc two",
    ]
    assert p.max_input_tokens == 2048


def test_gemini_accepts_models_prefix_and_caps_batches(stub):
    p = GeminiProvider(fast(stub.url + "/v1beta", batch_size=500), api_key=KEY, model="models/x")
    assert p.model == "x" and p.batch_size == 100
    p.embed_documents([f"t{i}" for i in range(150)])
    assert [len(r.body["requests"]) for r in stub.requests] == [100, 50]


def test_ollama_native_wire_format(stub):
    p = OllamaProvider(fast(stub.url, dimensions=4), model="all-minilm")
    p.embed_documents(["x", "y"])
    req = stub.last()
    assert req.path == "/api/embed"
    assert "authorization" not in req.headers
    assert req.body == {
        "model": "all-minilm",
        "input": ["x", "y"],
        "truncate": True,
        "dimensions": 4,
    }
    assert p.max_input_tokens == 512
    assert p.stats.snapshot()["tokens"] == 2  # prompt_eval_count


def test_openai_compatible_needs_model_and_url_but_no_key(stub):
    with pytest.raises(ProviderUnavailable, match="model"):
        OpenAICompatibleProvider(fast(stub.url + "/v1"))
    with pytest.raises(ProviderUnavailable, match="baseUrl"):
        OpenAICompatibleProvider(fast(""), model="m")
    p = OpenAICompatibleProvider(fast(stub.url + "/v1/"), model="bge-small")
    stub.api_key = None
    p.embed_query("hello")
    assert "authorization" not in stub.last().headers
    assert stub.last().path == "/v1/embeddings"
    assert p.max_input_tokens == 512
    assert OpenAICompatibleProvider(fast(stub.url), model="m", api_key="").batch_size == 64


def test_extra_headers_and_input_limits(stub):
    p = make("openai", stub, headers={"X-Team": "memory"}, max_input_tokens=1000)
    p.embed_query("hi")
    assert stub.last().headers["x-team"] == "memory"
    assert p.max_input_tokens == 1000 and p.max_input_bytes == 2000


def test_batches_split_and_keep_order(stub):
    p = make("openai", stub, batch_size=2)
    texts = [f"text {i}" for i in range(5)]
    out = p.embed_documents(texts)
    assert [len(r.body["input"]) for r in stub.requests] == [2, 2, 1]
    for row, text in zip(out, texts, strict=True):
        np.testing.assert_allclose(row, unit(vector_for(text, 8)), rtol=1e-5)
    assert p.embed_documents([]).shape == (0, 8)
    assert stub.count() == 3  # no request for nothing


def test_openai_requests_stay_under_its_summed_token_limit(stub):
    """OpenAI refuses (400, not retried) a request whose inputs sum to over 300,000 tokens:
    with `remote.batchSize` at its documented 2048, 400-token chunks made every request one.
    Counted conservatively (a token per 2 bytes), each request stays under it, in order."""
    p = make("openai", stub, batch_size=2048)
    texts = [f"{i} " + "word " * 320 for i in range(1000)]  # about 400 tokens each
    out = p.embed_documents(texts)
    sent = [r.body["input"] for r in stub.requests]
    assert len(sent) > 1 and all(len(t) <= 2048 for t in sent)
    assert all(sum(len(t) for t in inputs) // 2 <= 300_000 for inputs in sent)
    assert [t for inputs in sent for t in inputs] == texts
    np.testing.assert_allclose(out[-1], unit(vector_for(texts[-1], 8)), rtol=1e-5)


def test_empty_text_is_sent_as_blank(stub):
    p = make("openai", stub)
    p.embed_documents(["", "x"])
    assert stub.last().body["input"] == [" ", "x"]


def test_provider_key_fingerprints_endpoint_model_dims_never_the_key(stub):
    a = make("openai", stub)
    b = make("openai", stub, key="sk-other-key-000000000000")
    c = make("openai", stub, dimensions=4)
    d = OpenAIProvider(fast(stub.url + "/v2"), api_key=KEY)
    e = OpenAIProvider(fast(stub.url + "/v1"), api_key=KEY, model="text-embedding-3-large")
    assert a.provider_key == b.provider_key
    assert len({a.provider_key, c.provider_key, d.provider_key, e.provider_key}) == 4


# -- reliability ------------------------------------------------------------------------------


def test_429_retry_after_is_honoured(stub):
    p = make("openai", stub)
    stub.script(fault_status(429, retry_after="1"))
    start = time.monotonic()
    p.embed_documents(["a"])
    elapsed = time.monotonic() - start
    assert stub.count("/embeddings") == 2
    assert 0.95 <= elapsed < 3.0
    assert p.stats.snapshot()["retries"] == 1


def test_429_retry_after_ms_and_http_date(stub):
    p = make("voyage", stub)
    stub.script(fault_status(429, retry_after_ms="250"))
    start = time.monotonic()
    p.embed_documents(["a"])
    assert 0.24 <= time.monotonic() - start < 2.0
    when = datetime.now(UTC) + timedelta(seconds=30)
    assert 28 <= parse_retry_after({"retry-after": format_datetime(when, usegmt=True)}) <= 31


def test_429_with_a_long_retry_after_gives_up_at_once(stub):
    p = make("openai", stub)
    stub.always(fault_status(429, retry_after="3600"))
    start = time.monotonic()
    with pytest.raises(RemoteError) as info:
        p.embed_documents(["a"])
    assert time.monotonic() - start < 1.0
    assert stub.count() == 1
    assert info.value.status == 429 and info.value.transient
    assert "3600" in str(info.value)


def test_500_is_retried_up_to_the_limit_then_fails(stub):
    p = make("gemini", stub, retries=3, backoff_min_ms=50, backoff_max_ms=80)
    stub.always(fault_status(500))
    start = time.monotonic()
    with pytest.raises(EmbeddingError) as info:
        p.embed_documents(["a", "b"])
    elapsed = time.monotonic() - start
    assert stub.count() == 4  # 1 + 3 retries
    assert 3 * 0.05 <= elapsed < 3 * 0.08 + 1.5  # backoff bounds
    err = info.value
    assert isinstance(err, RemoteError) and err.status == 500 and err.transient
    assert err.attempts == 4
    assert "gemini" in str(err) and "500" in str(err) and "4 attempts" in str(err)
    assert p.stats.snapshot()["failures"] == 1


def test_503_then_success(stub):
    p = make("ollama", stub)
    stub.script(fault_status(503), fault_status(502))
    assert p.embed_documents(["a"]).shape == (1, 8)
    assert stub.count() == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_not_retried(stub, status):
    p = make("openai", stub)
    stub.always(fault_status(status))
    with pytest.raises(RemoteError) as info:
        p.embed_documents(["a"])
    assert stub.count() == 1
    assert info.value.status == status and not info.value.transient
    assert "openai" in str(info.value) and str(status) in str(info.value)


def test_401_wrong_key_is_clear_and_scrubbed(stub, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-key-ABCDEFGHIJKLMNOP"
    p = make("openai", stub, key=wrong)
    with pytest.raises(RemoteError) as info:
        p.embed_query("a")
    text = str(info.value)
    assert stub.count() == 1
    assert "openai" in text and "401" in text and "API key" in text
    assert "Incorrect API key provided" in text  # the server's own words, minus the key
    assert wrong not in text and wrong not in caplog.text
    assert wrong not in "".join(traceback.format_exception(info.value))


def test_query_timeout_fails_fast(stub):
    p = make("openai", stub, query_timeout_ms=300, retries=3)
    stub.always(fault_hang(5))
    start = time.monotonic()
    with pytest.raises(RemoteError, match="timed out") as info:
        p.embed_query("slow")
    elapsed = time.monotonic() - start
    assert elapsed < 0.8  # the whole budget, retries included, is the query timeout
    assert info.value.transient and info.value.status is None


def test_document_timeout_is_retried(stub):
    p = make("openai", stub, batch_timeout_ms=300)
    stub.script(fault_hang(5))
    assert p.embed_documents(["a"]).shape == (1, 8)
    assert stub.count() == 2


def test_connection_refused_fails_within_the_query_budget(stub):
    url = stub.url
    stub.stop()
    p = OpenAIProvider(fast(url + "/v1", query_timeout_ms=400), api_key=KEY)
    start = time.monotonic()
    with pytest.raises(RemoteError, match="cannot reach") as info:
        p.embed_query("a")
    assert time.monotonic() - start < 1.0
    assert info.value.transient


def test_truncated_body_is_an_error_not_retried(stub):
    p = make("openai", stub)
    stub.script(fault("truncate"))
    with pytest.raises(EmbeddingError, match="invalid JSON"):
        p.embed_documents(["a", "b"])
    assert stub.count() == 1


def test_cut_connection_is_retried_then_fails(stub):
    p = make("voyage", stub, retries=1)
    stub.always(fault("cut"))
    with pytest.raises(RemoteError, match="voyage"):
        p.embed_documents(["a", "b"])
    assert stub.count() == 2


def test_html_page_instead_of_json(stub):
    p = make("openai", stub)
    stub.script(fault("garbage"))
    with pytest.raises(EmbeddingError, match="baseUrl"):
        p.embed_query("a")


@pytest.mark.parametrize("name", ["openai", "voyage", "gemini", "ollama"])
@pytest.mark.parametrize(
    "kind,message",
    [
        ("count", "expected 2 vectors"),
        ("nan", "non-finite"),
        ("null", "non-finite|not numbers"),
        ("dims", "dimensions"),
    ],
)
def test_malformed_answers_are_rejected(stub, name, kind, message):
    p = make(name, stub)
    stub.script(fault(kind))
    with pytest.raises(EmbeddingError, match=message):
        p.embed_documents(["a", "b"])
    assert stub.count() == 1


def test_gemini_query_with_no_vector(stub):
    p = make("gemini", stub)
    stub.script(fault("count"))
    with pytest.raises(EmbeddingError, match="expected 1 vectors"):
        p.embed_query("a")


def test_dimensions_must_stay_consistent(stub):
    p = make("openai", stub)
    p.embed_query("a")
    stub.dims = 4
    with pytest.raises(EmbeddingError, match="expected 8 dimensions"):
        p.embed_documents(["b"])


def test_requested_dimensions_are_enforced(stub):
    p = make("openai", stub, dimensions=4)
    stub.script(fault("dims"))
    with pytest.raises(EmbeddingError, match="dimensions"):
        p.embed_query("a")


def test_key_never_in_errors_or_logs(stub, caplog):
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    cases = [
        ("openai", fault_status(500)),
        ("openai", fault_hang(5)),
        ("gemini", fault_status(429, retry_after="0")),
        ("voyage", fault("truncate")),
        ("mistral", fault("nan")),
    ]
    for name, f in cases:
        p = make(name, stub, retries=1, query_timeout_ms=300, batch_timeout_ms=300)
        stub.reset()
        stub.always(f)
        try:
            p.embed_query("secret-free query")
        except EmbeddingError as exc:
            errors.append(exc)
        finally:
            p.close()
    # the server echoes whatever key it was given
    stub.reset()
    g = GeminiProvider(fast(stub.url + "/v1beta"), api_key=GEMINI_KEY)
    with pytest.raises(RemoteError) as info:
        g.embed_query("x")
    errors.append(info.value)
    assert len(errors) == len(cases) + 1
    for exc in errors:
        full = "".join(traceback.format_exception(exc))
        assert KEY not in full and GEMINI_KEY not in full
    assert "retry" in caplog.text  # retries were logged ...
    assert KEY not in caplog.text and GEMINI_KEY not in caplog.text  # ... without the key


def test_stats_count_requests_retries_and_tokens(stub):
    p = make("openai", stub)
    stub.script(fault_status(500))
    p.embed_documents(["one two", "three"])
    snap = p.stats.snapshot()
    assert snap["requests"] == 2 and snap["retries"] == 1 and snap["failures"] == 0
    assert snap["texts"] == 2 and snap["tokens"] == 3 and snap["tokensEstimated"] == 0
    g = make("gemini", stub)  # Gemini reports no usage: estimated
    g.embed_query("abcdefgh")
    assert g.stats.snapshot()["tokensEstimated"] > 0


# -- helpers ----------------------------------------------------------------------------------


def test_backoff_bounds():
    import random

    rng = random.Random(1)
    ceilings = [0.5, 1, 2, 4, 8, 8, 8]
    for attempt, ceiling in enumerate(ceilings):
        for _ in range(50):
            d = backoff_delay(attempt, 0.5, 8.0, rng)
            assert 0.5 <= d <= 8.0
            assert max(0.5, ceiling / 2) <= d <= ceiling


def test_parse_retry_after():
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-3"}) is None
    assert parse_retry_after({}) is None
    past = format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": past}) == 0.0


def test_redact():
    assert redact(f"bad key {KEY}!", [KEY]) == "bad key ***!"
    assert "sk-abcdefghijklmnop" not in redact("got sk-abcdefghijklmnop", [])
    assert GEMINI_KEY not in redact(f"key={GEMINI_KEY}", [])
    assert "tok123456789" not in redact("Authorization: Bearer tok123456789", [])
    assert redact("nothing secret here", ["xy"]) == "nothing secret here"


# -- factory ----------------------------------------------------------------------------------


def settings_for(provider: str, base_url: str = "", **remote) -> Settings:
    s = Settings(provider=provider)
    s.remote = fast(base_url, **remote)
    return s


AUTO_KEYS = {
    "OPENAI_API_KEY": "sk-openai-key-1111111111",
    "GEMINI_API_KEY": "AIza-gemini-key-2222222222222222",
    "VOYAGE_API_KEY": "pa-voyage-key-33333333333333",
    "MISTRAL_API_KEY": "mistral-key-4444444444",
}


@pytest.fixture
def open_stub():
    with StubServer(api_key=None, dims=8) as server:
        yield server


@pytest.mark.parametrize(
    "present,expected,cls,base",
    [
        (list(AUTO_KEYS), "openai", OpenAIProvider, "/v1"),
        (
            ["GEMINI_API_KEY", "VOYAGE_API_KEY", "MISTRAL_API_KEY"],
            "gemini",
            GeminiProvider,
            "/v1beta",
        ),
        (["VOYAGE_API_KEY", "MISTRAL_API_KEY"], "voyage", VoyageProvider, "/v1"),
        (["MISTRAL_API_KEY"], "mistral", MistralProvider, "/v1"),
    ],
)
def test_auto_order_by_available_key(open_stub, monkeypatch, present, expected, cls, base):
    for var in present:
        monkeypatch.setenv(var, AUTO_KEYS[var])
    provider, reason = factory.create_provider(settings_for("auto", open_stub.url + base))
    assert reason is None and type(provider) is cls and provider.id == expected
    provider.embed_query("hello")
    key = AUTO_KEYS[factory.ENV_KEYS[expected]]
    req = open_stub.last()
    sent = req.headers.get("x-goog-api-key") or req.headers["authorization"].removeprefix("Bearer ")
    assert sent == key  # each provider gets its own key
    provider.close()


def test_auto_with_nothing_is_keyword_only():
    provider, reason = factory.create_provider(settings_for("auto"))
    assert provider is None
    assert "memory-ls model pull" in reason and "OPENAI_API_KEY" in reason


def test_auto_settings_key_counts_as_openai(open_stub, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", AUTO_KEYS["GEMINI_API_KEY"])
    s = settings_for("auto", open_stub.url + "/v1", api_key="sk-from-settings-5555555")
    provider, _ = factory.create_provider(s)
    assert provider.id == "openai"
    provider.embed_query("x")
    assert open_stub.last().headers["authorization"] == "Bearer sk-from-settings-5555555"


def _fake_local(monkeypatch, *, path="model.gguf", fail=False):
    module = types.ModuleType("memory_ls.embeddings.local")

    class FakeLocal:
        id, model, provider_key, dims = "local", "fake", "k", 4
        max_input_tokens, max_input_bytes = 256, 1024

        def close(self):
            pass

    def find_local_model(settings):
        return path

    def open_local(p, settings):
        if fail:
            raise RuntimeError("corrupt model file")
        return FakeLocal()

    module.find_local_model = find_local_model
    module.open_local = open_local
    monkeypatch.setitem(sys.modules, "memory_ls.embeddings.local", module)


def test_auto_prefers_a_local_model(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", AUTO_KEYS["OPENAI_API_KEY"])
    _fake_local(monkeypatch)
    provider, reason = factory.create_provider(settings_for("auto"))
    assert provider.id == "local" and reason is None


def test_auto_skips_a_missing_or_broken_local_model(open_stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", AUTO_KEYS["OPENAI_API_KEY"])
    _fake_local(monkeypatch, path=None)
    provider, _ = factory.create_provider(settings_for("auto", open_stub.url + "/v1"))
    assert provider.id == "openai"
    _fake_local(monkeypatch, fail=True)
    provider, _ = factory.create_provider(settings_for("auto", open_stub.url + "/v1"))
    assert provider.id == "openai"
    monkeypatch.delenv("OPENAI_API_KEY")
    provider, reason = factory.create_provider(settings_for("auto"))
    assert provider is None and "corrupt model file" in reason


@pytest.mark.parametrize(
    "name,cls",
    [
        ("openai", OpenAIProvider),
        ("gemini", GeminiProvider),
        ("voyage", VoyageProvider),
        ("mistral", MistralProvider),
    ],
)
def test_explicit_provider_needs_its_key(monkeypatch, name, cls):
    provider, reason = factory.create_provider(settings_for(name))
    assert provider is None and factory.ENV_KEYS[name] in reason
    monkeypatch.setenv(factory.ENV_KEYS[name], "k-" + "9" * 20)
    provider, reason = factory.create_provider(settings_for(name))
    assert type(provider) is cls and reason is None
    assert provider.base_url.startswith("https://")  # its real default endpoint


def test_explicit_ollama_and_compatible(open_stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", AUTO_KEYS["OPENAI_API_KEY"])
    provider, _ = factory.create_provider(settings_for("ollama"))
    assert type(provider) is OllamaProvider and provider.base_url == "http://localhost:11434"
    provider, _ = factory.create_provider(settings_for("ollama", open_stub.url + "/v1"))
    assert type(provider) is OllamaOpenAIProvider
    s = settings_for("openai-compatible", open_stub.url + "/v1")
    provider, reason = factory.create_provider(s)
    assert provider is None and "model" in reason
    s.model = "bge-m3"
    provider, _ = factory.create_provider(s)
    provider.embed_query("x")
    # a hosted key is never sent to a server it does not belong to
    assert "authorization" not in open_stub.last().headers
    assert open_stub.last().body["model"] == "bge-m3"


def test_create_provider_never_raises(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", AUTO_KEYS["OPENAI_API_KEY"])
    provider, reason = factory.create_provider(settings_for("openai", "ftp://nowhere"))
    assert provider is None and "baseUrl" in reason
    s = settings_for("openai")
    s.provider = "bogus"
    assert factory.create_provider(s)[0] is None
    provider, reason = factory.create_provider(settings_for("none"))
    assert provider is None and "keyword-only" in reason


def test_create_fallback(open_stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", AUTO_KEYS["OPENAI_API_KEY"])
    monkeypatch.setenv("GEMINI_API_KEY", AUTO_KEYS["GEMINI_API_KEY"])
    s = settings_for("openai", open_stub.url + "/v1", dimensions=4)
    assert factory.create_fallback(s) is None  # fallback "none"
    s.fallback = "openai"
    assert factory.create_fallback(s) is None  # same as the primary
    s.fallback = "gemini"
    s.model = "text-embedding-3-large"
    fb = factory.create_fallback(s)
    # the primary's endpoint, model and dimensions are not the fallback's
    assert type(fb) is GeminiProvider
    assert fb.base_url == GeminiProvider.default_base_url
    assert fb.model == "gemini-embedding-001" and fb.dimensions == 0
    assert fb.client.retries == s.remote.retries
    s.fallback = "voyage"  # no key: unavailable, logged, no exception
    assert factory.create_fallback(s) is None


def test_fallback_after_a_local_primary_uses_remote_settings(open_stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", AUTO_KEYS["OPENAI_API_KEY"])
    s = settings_for("local", open_stub.url + "/v1")
    s.fallback = "openai"
    fb = factory.create_fallback(s)
    assert fb.base_url == open_stub.url + "/v1"
    fb.embed_query("x")
    assert open_stub.count("/v1/embeddings") == 1


def test_fallback_auto_skips_the_primary(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", AUTO_KEYS["OPENAI_API_KEY"])
    monkeypatch.setenv("VOYAGE_API_KEY", AUTO_KEYS["VOYAGE_API_KEY"])
    s = settings_for("openai")
    s.fallback = "auto"
    fb = factory.create_fallback(s)
    assert fb is not None and fb.id == "voyage"


# -- OpenAI Batch API -------------------------------------------------------------------------


def batch_setup(stub, *, batch_size=2, polls=1, **remote):
    from memory_ls.embeddings.batch_openai import OpenAIBatchEmbedder

    stub.batch_polls = polls
    settings = fast(
        stub.url + "/v1",
        batch_size=batch_size,
        batch_api=True,
        batch_api_poll_ms=1,
        **remote,
    )
    provider = OpenAIProvider(settings, api_key=KEY)
    return provider, OpenAIBatchEmbedder(provider, settings)


TEXTS = [f"note number {i}" for i in range(5)]


def expected(texts, dims=8):
    return np.vstack([unit(vector_for(t, dims)) for t in texts])


def test_batch_end_to_end(stub):
    from memory_ls.embeddings.batch_openai import ENDPOINT

    provider, batch = batch_setup(stub, polls=2)
    seen: list[tuple[int, int]] = []
    jobs = []
    out = batch.embed(
        TEXTS, on_vectors=lambda s, v: seen.append((s, len(v))), on_submitted=jobs.append
    )
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert sorted(seen) == [(0, 2), (2, 2), (4, 1)]
    calls = [(r.method, r.path) for r in stub.requests]
    assert calls[0] == ("POST", "/v1/files") and calls[1] == ("POST", "/v1/batches")
    batch_id = jobs[0].batch_id
    polls = [c for c in calls if c == ("GET", f"/v1/batches/{batch_id}")]
    assert len(polls) == 5  # validating x2, in_progress x2, completed
    assert calls[-1][1].endswith("/content")
    assert not any(p.endswith("/embeddings") for _, p in calls)  # nothing synchronous
    upload = stub.requests[0]
    assert upload.headers["authorization"] == f"Bearer {KEY}"
    assert upload.headers["content-type"].startswith("multipart/form-data")
    create = stub.requests[1].body
    assert create["endpoint"] == ENDPOINT == "/v1/embeddings"
    assert create["completion_window"] == "24h"
    lines = [json.loads(x) for x in stub.files[create["input_file_id"]].splitlines()]
    assert [ln["body"]["input"] for ln in lines] == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:5]]
    assert all(ln["method"] == "POST" and ln["url"] == "/v1/embeddings" for ln in lines)
    assert batch.report.statuses == {batch_id: "completed"}
    assert batch.report.texts_from_batch == 5 and batch.report.texts_retried_sync == 0


def test_batch_failed_item_is_retried_synchronously(stub):
    from memory_ls.embeddings.batch import custom_id

    provider, batch = batch_setup(stub)
    stub.batch_fail_ids = {custom_id(2, TEXTS[2:4])}
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    sync = [r for r in stub.requests if r.path == "/v1/embeddings"]
    assert [r.body["input"] for r in sync] == [TEXTS[2:4]]
    assert batch.report.texts_retried_sync == 2 and batch.report.texts_from_batch == 3


@pytest.mark.parametrize("outcome,sync_texts", [("failed", 5), ("expired", 4)])
def test_batch_failed_or_expired(stub, outcome, sync_texts):
    provider, batch = batch_setup(stub)
    stub.batch_outcome = outcome
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert batch.report.texts_retried_sync == sync_texts
    assert list(batch.report.statuses.values()) == [outcome]


def test_batch_concurrent_jobs(stub):
    from memory_ls.embeddings.batch_openai import OpenAIBatchEmbedder

    provider, _ = batch_setup(stub)
    batch = OpenAIBatchEmbedder(
        provider,
        fast(stub.url, batch_api_poll_ms=1, batch_api_concurrency=2),
        max_requests_per_job=1,
    )
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert stub.count("/v1/files") == 3 and len(batch.report.jobs) == 3


def test_batch_timeout_cancels_and_goes_synchronous(stub):
    from memory_ls.embeddings.batch_openai import OpenAIBatchEmbedder

    stub.batch_polls = 10_000
    settings = fast(
        stub.url + "/v1", batch_size=2, batch_api_poll_ms=1, batch_api_timeout_minutes=5
    )
    provider = OpenAIProvider(settings, api_key=KEY)
    ticks = iter(range(0, 10_000 * 60, 60))  # each look at the clock: one more minute
    batch = OpenAIBatchEmbedder(provider, settings, clock=lambda: float(next(ticks)))
    out = batch.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert any(r.path.endswith("/cancel") for r in stub.requests)
    assert batch.report.texts_retried_sync == 5


def test_batch_results_survive_a_crash_and_resume(stub):
    provider, batch = batch_setup(stub)
    cache: dict[int, np.ndarray] = {}
    jobs = []

    def store(start, vectors):
        if cache:
            raise KeyboardInterrupt("crash after the first piece")
        cache[start] = vectors

    with pytest.raises(KeyboardInterrupt):
        batch.embed(TEXTS, on_vectors=store, on_submitted=jobs.append)
    assert len(cache) == 1  # what arrived first is kept
    uploads = stub.count("/v1/files")
    out = batch.resume(jobs[0], TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-5)
    assert stub.count("/v1/files") == uploads  # nothing paid twice
    with pytest.raises(EmbeddingError, match="other texts"):
        batch.resume(jobs[0], list(reversed(TEXTS)))


def test_batch_embedder_only_when_enabled(stub):
    from memory_ls.embeddings.batch import batch_embedder_for

    provider = make("openai", stub)
    assert batch_embedder_for(provider, fast(stub.url)) is None
    on = fast(stub.url, batch_api=True, batch_api_min_texts=10)
    b = batch_embedder_for(provider, on)
    assert b is not None and b.should_use(10) and not b.should_use(9)
    assert type(batch_embedder_for(make("voyage", stub), on)).__name__ == "VoyageBatchEmbedder"
    assert batch_embedder_for(make("mistral", stub), on) is None


def test_tiny_query_budget_still_makes_one_attempt(stub):
    p = make("openai", stub, query_timeout_ms=50)
    stub.always(fault_hang(2))
    start = time.monotonic()
    with pytest.raises(RemoteError, match="timed out"):
        p.embed_query("a")
    assert stub.count() == 1 and time.monotonic() - start < 0.5
