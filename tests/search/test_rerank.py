"""Reranking: the hosted rerank APIs against a real HTTP server on 127.0.0.1
(tests/support/http_stub.py), the engine's use of them (order, minScore/maxResults after
reranking, fallback to the fused order, cooldown, status), and the local GGUF reranker's refusal
of files that are no reranker.

No reranker weights can be installed here, so the local path is tested for its error handling,
and its scoring mechanics (pair tokens, decode, reading the rank output) on the embedding test
model opened with rank pooling, whose numbers mean nothing.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import pytest
from conftest import write

try:
    from http_stub import StubServer, fault, fault_hang, fault_status
except ImportError:  # tests/ became a package
    from tests.support.http_stub import StubServer, fault, fault_hang, fault_status

from memory_ls.cli import main as cli_main
from memory_ls.engine import MemoryEngine
from memory_ls.engine.reranking import RERANK_FAILURE_COOLDOWN_S, RerankPolicy
from memory_ls.rerank import Reranker, RerankError, create_reranker
from memory_ls.rerank.remote import (
    CohereCompatibleReranker,
    CohereReranker,
    JinaReranker,
    VoyageReranker,
)
from memory_ls.settings import Settings

KEY = "sk-rerank-SECRET-0123456789abcdef"
ENV_VARS = ("VOYAGE_API_KEY", "JINA_API_KEY", "COHERE_API_KEY")
# provider -> (base path on the stub, request path, what /v1/rerank must speak)
FORMATS = {
    "voyage": ("/v1", "/v1/rerank", "voyage"),
    "jina": ("/v1", "/v1/rerank", "jina"),
    "cohere": ("/v2", "/v2/rerank", "voyage"),
    "cohere-compatible": ("/v2", "/v2/rerank", "voyage"),
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def stub():
    with StubServer(api_key=KEY) as server:
        yield server


def settings_for(name: str, stub: StubServer | None, **rerank) -> Settings:
    """Keyword-only search with reranker ``name`` pointed at the stub; fast retries."""
    s = Settings(provider="none")
    s.rerank.provider = name
    if stub is not None:
        base, _, kind = FORMATS[name]
        stub.rerank_format = kind
        s.rerank.base_url = stub.url + base
        s.rerank.api_key = KEY
    if name == "cohere-compatible":
        s.rerank.model = "bge-reranker-v2-m3"
    s.rerank.timeout_ms = 1000
    s.remote.retries = 3
    s.remote.backoff_min_ms = 10
    s.remote.backoff_max_ms = 40
    for k, v in rerank.items():
        setattr(s.rerank, k, v)
    return s


def make(name: str, stub: StubServer, **rerank) -> Reranker:
    reranker, why = create_reranker(settings_for(name, stub, **rerank))
    assert reranker is not None, why
    return reranker


DOCS = ["nothing to see", "relevant and again relevant", "one relevant line"]


# -- wire formats -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FORMATS))
def test_scores_come_back_in_input_order(stub, name):
    r = make(name, stub)
    try:
        assert isinstance(r, Reranker)
        assert r.rerank("which is relevant", DOCS) == [0.0, 2 / 3, 0.5]
        req = stub.last()
        assert req.method == "POST" and req.path == FORMATS[name][1]
        assert req.headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in repr(r)
        stats = r.stats_snapshot()
        assert stats["requests"] == 1 and stats["texts"] == 3 and stats["tokens"] > 0
    finally:
        r.close()


def test_voyage_wire_format(stub):
    make("voyage", stub).rerank("q", ["a", "b"])
    assert stub.last().body == {
        "query": "q",
        "documents": ["a", "b"],
        "model": "rerank-2.5",
        "top_k": 2,
    }


def test_jina_wire_format(stub):
    make("jina", stub).rerank("q", ["a", "b"])
    assert stub.last().body == {
        "model": "jina-reranker-v2-base-multilingual",
        "query": "q",
        "documents": ["a", "b"],
        "top_n": 2,
    }


def test_cohere_wire_format(stub):
    make("cohere", stub, model="rerank-v3.5-custom").rerank("q", ["a", "b"])
    assert stub.last().body == {
        "model": "rerank-v3.5-custom",
        "query": "q",
        "documents": ["a", "b"],
        "top_n": 2,
    }


def test_the_stub_rejects_the_other_formats_fields(stub):
    """The stub is strict, so a wire-format test cannot pass with the wrong field names."""
    stub.rerank_format = "jina"
    s = settings_for("voyage", stub)
    stub.rerank_format = "jina"  # a Voyage body sent to a Jina endpoint
    r, _ = create_reranker(s)
    with pytest.raises(RerankError, match="400.*top_k"):
        r.rerank("q", ["a"])


def test_default_endpoints_and_models():
    s = Settings()
    assert VoyageReranker(s.rerank, s.remote, "k").url == "https://api.voyageai.com/v1/rerank"
    assert JinaReranker(s.rerank, s.remote, "k").url == "https://api.jina.ai/v1/rerank"
    assert CohereReranker(s.rerank, s.remote, "k").url == "https://api.cohere.com/v2/rerank"
    assert CohereReranker(s.rerank, s.remote, "k").model == "rerank-v3.5"


def test_shuffled_answer_is_read_by_index(stub):
    r = make("cohere", stub)
    stub.script(fault("shuffle"))
    assert r.rerank("q", DOCS) == [0.0, 2 / 3, 0.5]


def test_empty_documents_are_sent_as_blanks_and_nothing_costs_no_request(stub):
    r = make("jina", stub)
    assert r.rerank("q", ["", "relevant"]) == [0.0, 0.5]
    assert stub.last().body["documents"] == [" ", "relevant"]
    stub.reset()
    assert r.rerank("q", []) == []
    assert stub.count() == 0


# -- reliability ------------------------------------------------------------------------------


def test_429_retry_after_is_honoured_within_the_budget(stub):
    r = make("voyage", stub, timeout_ms=3000)
    stub.script(fault_status(429, retry_after="1"))
    start = time.monotonic()
    assert r.rerank("q", DOCS)[1] == 2 / 3
    assert 0.95 <= time.monotonic() - start < 2.5
    assert stub.count("/rerank") == 2 and r.stats_snapshot()["retries"] == 1


def test_429_retry_after_past_the_budget_fails_at_once(stub):
    r = make("voyage", stub, timeout_ms=1000)
    stub.always(fault_status(429, retry_after="5"))
    start = time.monotonic()
    with pytest.raises(RerankError, match="429"):
        r.rerank("q", DOCS)
    assert time.monotonic() - start < 0.8 and stub.count() == 1


def test_5xx_then_success(stub):
    r = make("cohere", stub)
    stub.script(fault_status(503), fault_status(500))
    assert r.rerank("q", DOCS) == [0.0, 2 / 3, 0.5]
    assert stub.count() == 3


def test_5xx_every_time_fails_after_the_retries(stub):
    r = make("jina", stub)
    stub.always(fault_status(500))
    with pytest.raises(RerankError, match="500.*4 attempts"):
        r.rerank("q", DOCS)
    assert stub.count() == 4 and r.stats_snapshot()["failures"] == 1


def test_timeout_fails_within_the_budget(stub):
    r = make("voyage", stub, timeout_ms=300)
    stub.always(fault_hang(5))
    start = time.monotonic()
    with pytest.raises(RerankError, match="timed out"):
        r.rerank("q", DOCS)
    assert time.monotonic() - start < 0.8


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("truncate", "invalid JSON"),
        ("garbage", "invalid JSON"),
        ("count", "scored 2 of 3 documents"),
        ("index", "index out of 0..2"),
        ("dup", "twice"),
        ("nan", "no number"),
        ("null", "no number"),
    ],
)
@pytest.mark.parametrize("name", ["voyage", "jina", "cohere"])
def test_malformed_answers_are_errors(stub, name, kind, message):
    r = make(name, stub)
    stub.script(fault(kind))
    with pytest.raises(RerankError, match=message):
        r.rerank("q", DOCS)
    assert stub.count() == 1  # a malformed answer is not retried


def test_answer_without_results(stub):
    r = make("jina", stub)
    stub.script(fault_status(200, body={"data": []}))
    with pytest.raises(RerankError, match="no 'results' list"):
        r.rerank("q", DOCS)


def test_wrong_key_is_scrubbed_from_errors_and_logs(stub, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-rerank-key-ABCDEFGHIJKLMNOP"
    r = make("voyage", stub, api_key=wrong)
    with pytest.raises(RerankError) as info:
        r.rerank("q", DOCS)
    text = str(info.value)
    assert "401" in text and "Incorrect API key provided" in text
    assert wrong not in text and wrong not in caplog.text and wrong not in repr(r)


# -- keys and the factory ---------------------------------------------------------------------


def test_keys_come_from_the_environment_and_the_setting_wins(stub, monkeypatch):
    monkeypatch.setenv("JINA_API_KEY", KEY)
    r, why = create_reranker(settings_for("jina", stub, api_key=""))
    assert r is not None, why
    r.rerank("q", ["a"])
    assert stub.last().headers["authorization"] == f"Bearer {KEY}"
    r, _ = create_reranker(settings_for("jina", stub, api_key="sk-from-settings-000"))
    with pytest.raises(RerankError, match="401"):
        r.rerank("q", ["a"])


@pytest.mark.parametrize(
    ("name", "var"),
    [("voyage", "VOYAGE_API_KEY"), ("jina", "JINA_API_KEY"), ("cohere", "COHERE_API_KEY")],
)
def test_no_key_means_no_reranker_and_says_which_variable(name, var):
    r, why = create_reranker(settings_for(name, None))
    assert r is None and var in why and "rerank.apiKey" in why


def test_cohere_compatible_never_gets_a_hosted_key(stub, monkeypatch):
    monkeypatch.setenv("COHERE_API_KEY", KEY)
    stub.api_key = None
    r = make("cohere-compatible", stub, api_key="")
    assert isinstance(r, CohereCompatibleReranker)
    r.rerank("q", ["a"])
    assert "authorization" not in stub.last().headers
    assert stub.last().body["model"] == "bge-reranker-v2-m3"
    r, why = create_reranker(settings_for("cohere-compatible", None, model=""))
    assert r is None and "rerank.model" in why
    r, why = create_reranker(settings_for("cohere-compatible", None))
    assert r is None and "rerank.baseUrl" in why


def test_provider_none_is_no_reranker_and_no_reason():
    assert create_reranker(Settings()) == (None, None)


# -- the engine -------------------------------------------------------------------------------


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """Three notes whose keyword order (a, b, c) is the reverse of their marker order."""
    root = tmp_path / "ws"
    write(root, "memory/a.md", "# A\n\ndeploy notes: deploy deploy deploy, deploy again.\n")
    write(root, "memory/b.md", "# B\n\ndeploy notes, one relevant line here.\n")
    write(root, "memory/c.md", "# C\n\ndeploy notes: relevant, and relevant again.\n")
    return root


def engine_for(root: Path, tmp_path: Path, settings: Settings) -> MemoryEngine:
    e = MemoryEngine(root, settings, index_path=tmp_path / "idx" / "index.sqlite")
    e.sync("test")
    return e


def paths(resp) -> list[str]:
    return [h.path for h in resp.results]


def test_reranking_reorders_real_hits(notes, tmp_path, stub):
    plain = engine_for(notes, tmp_path / "plain", Settings(provider="none"))
    fused = plain.search("deploy notes", min_score=0)
    plain.close()
    assert paths(fused)[0] == "memory/a.md"  # keywords alone put the marker-less note first
    with engine_for(notes, tmp_path, settings_for("voyage", stub)) as e:
        resp = e.search("deploy notes", min_score=0)
        assert paths(resp) == ["memory/c.md", "memory/b.md", "memory/a.md"]
        assert [round(h.score, 4) for h in resp.results] == [0.6667, 0.5, 0.0]
        fused_by_path = {h.path: h.score for h in fused.results}
        assert all(h.fused_score == pytest.approx(fused_by_path[h.path]) for h in resp.results)
        assert "rerank" not in (resp.fallback_reason or "")
        # The reranker got each candidate's whole text, the answer short snippets.
        sent = stub.last().body
        assert sent["query"] == "deploy notes" and len(sent["documents"]) == 3
        assert any("relevant, and relevant again." in d for d in sent["documents"])
        # Filters in the query text narrow the candidates; the reranker reads the words alone.
        filtered = e.search("deploy -kubernetes notes file:memory/ source:memory", min_score=0)
        assert paths(filtered) == paths(resp) and stub.last().body["query"] == "deploy notes"
        js = resp.to_json(e.root)["results"][0]
        assert js["score"] == pytest.approx(2 / 3, abs=1e-6) and "fusedScore" in js
        # --explain says what the reranker did to each hit: c was third by fused score
        why = e.search("deploy notes", min_score=0, explain=True)
        assert paths(why) == paths(resp)
        top = why.results[0].explain
        assert top is not None and top["rerank"]["fusedRank"] == 3
        assert top["rerank"]["score"] == pytest.approx(2 / 3, abs=1e-6)
        assert top["rank"]["final"] == 1 and top["keyword"]["rank"] == 3


def test_min_score_and_max_results_apply_after_reranking(notes, tmp_path, stub):
    with engine_for(notes, tmp_path, settings_for("jina", stub)) as e:
        # The default minScore (0.35) gates the best (c, 2/3); b (1/2) comes along, a (0) not.
        resp = e.search("deploy notes")
        assert paths(resp) == ["memory/c.md", "memory/b.md"]
        assert resp.below_min_score == 1
        assert paths(e.search("deploy notes", max_results=1)) == ["memory/c.md"]
        # Nothing reaches minScore: empty, and it says how close the best came.
        resp = e.search("deploy notes", min_score=0.7)
        assert resp.results == [] and resp.why_empty() == {"count": 3, "bestScore": 0.666667}
        # topN is at least maxResults, and every candidate was reranked.
        assert all(len(r.body["documents"]) == 3 for r in stub.requests)


def test_top_n_bounds_what_is_sent(tmp_path, stub):
    root = tmp_path / "ws"
    for i in range(8):
        write(root, f"memory/n{i}.md", f"# N{i}\n\nshared words {'relevant ' * (i % 3)}\n")
    with engine_for(root, tmp_path, settings_for("cohere", stub, top_n=5)) as e:
        resp = e.search("shared words", max_results=2, min_score=0)
        sent = stub.last().body["documents"]
        assert len(sent) == 5
        # BM25 favours the shorter notes: the three with the marker twice are not among the
        # five best fused candidates, so the reranker never sees them.
        assert not any(d.count("relevant") == 2 for d in sent)
        assert [h.path for h in resp.results] == ["memory/n1.md", "memory/n4.md"]
        assert [h.score for h in resp.results] == [0.5, 0.5]


@pytest.mark.parametrize(
    ("misbehave", "reason"),
    [
        (fault_status(500), "500"),
        (fault_hang(5), "timed out"),
        (fault("index"), "index out of"),
        (fault("count"), "scored 2 of 3"),
        (fault("truncate"), "invalid JSON"),
    ],
)
def test_a_failed_rerank_answers_in_fused_order(notes, tmp_path, stub, misbehave, reason):
    plain = engine_for(notes, tmp_path / "plain", Settings(provider="none"))
    expected = [(h.path, round(h.score, 6)) for h in plain.search("deploy notes").results]
    plain.close()
    s = settings_for("voyage", stub, timeout_ms=400)
    with engine_for(notes, tmp_path, s) as e:
        stub.always(misbehave)
        start = time.monotonic()
        resp = e.search("deploy notes")
        assert time.monotonic() - start < 2.0
        assert [(h.path, round(h.score, 6)) for h in resp.results] == expected
        assert all(h.fused_score is None for h in resp.results)
        assert "rerank failed" in resp.fallback_reason and reason in resp.fallback_reason
        assert resp.fallback_reason.endswith("fused order")
        js = resp.to_json(e.root)
        assert "rerank failed" in js["fallbackReason"] and "fusedScore" not in js["results"][0]
        # Paused: the next search does not wait for the dead endpoint again.
        sent = stub.count()
        resp = e.search("deploy notes")
        assert stub.count() == sent and "reranking paused" in resp.fallback_reason
        stats = e.status()["rerankerStats"]
        assert stats["fallbacks"] == 1 and stats["paused"] == 1 and stats["lastFailure"]


def test_cooldown_ends_and_reranking_resumes(stub):
    now = [1000.0]
    reranker = make("cohere", stub)
    policy = RerankPolicy(Settings(), reranker, clock=lambda: now[0])
    stub.script(fault_status(400))
    scores, why = policy.scores("q", DOCS)
    assert scores is None and "400" in why
    assert "paused" in policy.paused()
    now[0] += RERANK_FAILURE_COOLDOWN_S + 1
    assert policy.paused() is None
    assert policy.scores("q", DOCS) == ([0.0, 2 / 3, 0.5], None)
    assert policy.status()["rerankerStats"]["lastFailure"] is None
    policy.close()


def test_status_shows_the_reranker_and_never_the_key(notes, tmp_path, stub, caplog):
    caplog.set_level(logging.DEBUG)
    with engine_for(notes, tmp_path, settings_for("voyage", stub)) as e:
        e.search("deploy notes")
        stub.always(fault_status(401))
        e.search("deploy notes again")
        st = e.status()
        assert st["reranker"] == {"id": "voyage", "model": "rerank-2.5", "topN": 20}
        stats = st["rerankerStats"]
        assert stats["reranked"] == 1 and stats["fallbacks"] == 1 and stats["requests"] == 2
        assert stats["texts"] == 3 and stats["failures"] == 1
        assert KEY not in json.dumps(st) and KEY not in caplog.text


def test_an_echoed_wrong_key_never_reaches_the_response(notes, tmp_path, stub, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-rerank-key-ZYXWVUTSRQPONMLK"
    with engine_for(notes, tmp_path, settings_for("cohere", stub, api_key=wrong)) as e:
        resp = e.search("deploy notes")
        assert "401" in resp.fallback_reason and "check the API key" in resp.fallback_reason
        everything = json.dumps([resp.to_json(e.root), e.status()]) + caplog.text
        assert wrong not in everything


def test_status_says_why_there_is_no_reranker(notes, tmp_path):
    with engine_for(notes, tmp_path, settings_for("cohere", None)) as e:
        st = e.status()
        assert st["reranker"] is None and st["rerankerStats"] is None
        assert "COHERE_API_KEY" in st["rerankerReason"]
        assert paths(e.search("deploy notes", min_score=0))[0] == "memory/a.md"
    with engine_for(notes, tmp_path / "none", Settings(provider="none")) as e:
        assert e.status()["reranker"] is None and e.status()["rerankerReason"] is None


def test_cli_reads_rerank_settings_and_reports_them(notes, tmp_path, stub, capsys, monkeypatch):
    monkeypatch.setenv("VOYAGE_API_KEY", KEY)
    write(
        notes,
        ".memory-ls.toml",
        f'provider = "none"\n[rerank]\nprovider = "voyage"\nbaseUrl = "{stub.url}/v1"\ntopN = 7\n',
    )
    index = str(tmp_path / "cli.sqlite")
    assert cli_main(["search", "deploy notes", "-w", str(notes), "--index", index]) == 0
    out = capsys.readouterr().out
    assert out.index("memory/c.md") < out.index("memory/b.md")
    assert cli_main(["status", "-w", str(notes), "--index", index]) == 0
    out = capsys.readouterr().out
    assert "rerank      voyage rerank-2.5 (top 7)" in out and KEY not in out


# -- the local GGUF reranker ------------------------------------------------------------------


def local_settings(path: str | Path) -> Settings:
    s = Settings(provider="none")
    s.rerank.provider = "local"
    s.rerank.model_path = str(path)
    return s


def test_local_needs_a_model_path():
    r, why = create_reranker(local_settings(""))
    assert r is None and "rerank.modelPath" in why


def test_local_missing_file(tmp_path):
    r, why = create_reranker(local_settings(tmp_path / "nope.gguf"))
    assert r is None and "is not a file" in why


def test_local_wrong_file(tmp_path):
    path = write(tmp_path, "model.gguf", "this is a text file, not a model\n" * 10)
    r, why = create_reranker(local_settings(path))
    assert r is None and "not a GGUF file" in why


def test_local_relative_path_is_the_workspace_s(notes, tmp_path):
    with engine_for(notes, tmp_path, local_settings("models/reranker.gguf")) as e:
        why = e.status()["rerankerReason"]
        assert str(notes / "models" / "reranker.gguf") in why


@pytest.fixture(scope="module")
def embedding_model() -> Path:
    from model_util import ensure_test_model

    return ensure_test_model()


@pytest.mark.model
def test_local_truncated_gguf_is_refused(tmp_path, embedding_model):
    path = tmp_path / "cut.gguf"
    path.write_bytes(embedding_model.read_bytes()[:4096])
    r, why = create_reranker(local_settings(path))
    assert r is None and "corrupt or truncated" in why


@pytest.mark.model
def test_local_embedding_model_is_refused_cleanly(notes, tmp_path, embedding_model):
    r, why = create_reranker(local_settings(embedding_model))
    assert r is None and "without a classification head" in why and "'bert'" in why
    with engine_for(notes, tmp_path, local_settings(embedding_model)) as e:
        assert e.status()["reranker"] is None
        resp = e.search("deploy notes")
        assert paths(resp)[0] == "memory/a.md" and "rerank" not in (resp.fallback_reason or "")


@pytest.mark.model
def test_local_scoring_mechanics_on_a_model_without_a_head(embedding_model):
    """What can run without reranker weights: pairs built as llama.cpp builds them, one decode
    each, the rank output read back and squashed to 0..1. MiniLM has no classification head,
    so its numbers say nothing about relevance; the check skipped here is the head check."""
    import llama_cpp

    from memory_ls.rerank.local import LocalReranker, load_rank_model

    llm = load_rank_model(llama_cpp, embedding_model, 128, 1)
    r = LocalReranker(embedding_model, llm, llama_cpp, timeout_s=30)
    try:
        tokens = r.pair_tokens("rate limits", "token bucket")
        cls, sep = llm.tokenize(b"", add_bos=True, special=False)  # [CLS] [SEP]
        q = llm.tokenize(b"rate limits", add_bos=False, special=False)
        d = llm.tokenize(b"token bucket", add_bos=False, special=False)
        assert tokens == [cls, *q, sep, *d, sep]
        assert len(r.pair_tokens("q", "word " * 1000)) == 128  # the document is cut to fit
        scores = r.rerank("how do we throttle traffic", ["token bucket limiter", "tomatoes"])
        assert len(scores) == 2 and all(0 < s < 1 and math.isfinite(s) for s in scores)
        assert r.rerank("how do we throttle traffic", ["token bucket limiter"]) == scores[:1]
        assert r.stats_snapshot()["requests"] == 3
        r._timeout_s = 0.0  # past the budget after the first pair: an error, not a hang
        with pytest.raises(RerankError, match="budget after 1 of 50"):
            r.rerank("q", ["some text " * 20] * 50)
    finally:
        r.close()
    with pytest.raises(RerankError, match="closed"):
        r.rerank("q", ["x"])
