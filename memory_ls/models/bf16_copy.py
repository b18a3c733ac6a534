"""A bfloat16 copy of a float16 model, for CPUs whose llama.cpp build multiplies bfloat16 natively.

With AVX512-BF16 ggml's dot products take bfloat16 pairs in one instruction, where float16
weights are widened to float32 first: all-MiniLM-L6-v2 embeds 1.3-1.4x as many chunks a
second and answers a query 1.3-1.4x as fast from a bfloat16 copy (bench/embed_speed.py
--weights file), and its vectors match the float16 file's at cosine 0.99998. So the copy keeps
the file's identity: the same index and embedding cache serve both, and machines with and
without the instruction share a team index.

The copy is made once (llama.cpp's own converter, well under a second for MiniLM) in the
cache folder, never beside the user's file, and is written atomically. Any failure leaves
the model file as it is, with a log line. A copy is named after the model's stem and
fingerprint, so a changed model file gets a new one; making it deletes the copies of the
file's earlier versions, which nothing would open again.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from .gguf_meta import metadata
from .gguf_write import write_atomic
from .registry import default_model_dir

log = logging.getLogger(__name__)

# general.file_type of a model whose matrices are float16 (llama.cpp's LLAMA_FTYPE_MOSTLY_F16).
_MOSTLY_F16 = 1
# Fingerprint digits in a copy's name: enough to tell a model file's versions apart.
_FINGERPRINT_CHARS = 16


def copies_dir() -> Path:
    # A folder of its own: `model list` shows the GGUF files of the model folder itself.
    return default_model_dir() / "bf16"


def native_bf16(system_info: str) -> bool:
    """Whether the loaded llama.cpp build uses AVX512-BF16 (it runs only on CPUs that have it)."""
    return "AVX512_BF16 = 1" in system_info


def file_type(path: Path) -> int | None:
    """The GGUF's ``general.file_type``, None when the file does not say."""
    value = metadata(path, ["general.file_type"]).get("general.file_type")
    return None if value is None else int(value)


def weights_for(path: Path, mode: str, fingerprint: str, llama_cpp: Any) -> Path:
    """The file to load for model ``path``: its bfloat16 copy when the model is float16 and
    ``mode`` is "bf16", or "auto" and the build multiplies bfloat16 natively; else ``path``."""
    if mode == "file" or (
        mode == "auto" and not native_bf16(llama_cpp.llama_print_system_info().decode())
    ):
        return path
    try:
        if file_type(path) != _MOSTLY_F16:
            return path
        copy = copies_dir() / f"{path.stem}-{fingerprint[:_FINGERPRINT_CHARS]}.gguf"
        if not copy.is_file():
            write_atomic(copy, lambda tmp: _convert(llama_cpp, path, tmp))
            log.info("local: made a bfloat16 copy of %s at %s", path, copy)
            prune_stale(copy, path.stem)
        return copy
    except Exception as exc:  # noqa: BLE001 - any failure: the file as it is
        log.warning("local: no bfloat16 copy of %s (%s); using the file as it is", path, exc)
        return path


def prune_stale(copy: Path, stem: str) -> None:
    """Delete the other copies of model ``stem`` beside ``copy``.

    Only names this module gives (``<stem>-<16 hex digits>.gguf``) in the copies' own folder
    match: never a model file, a copy of a model whose stem merely starts the same way, or
    another process's half-written copy. Two different files with one stem (``model.gguf``
    in two folders) evict each other's copy, which costs a conversion, not a wrong model.
    """
    name = re.compile(re.escape(stem) + f"-[0-9a-f]{{{_FINGERPRINT_CHARS}}}\\.gguf")
    try:
        stale = [
            p
            for p in copy.parent.iterdir()
            if p != copy and name.fullmatch(p.name) and p.is_file() and not p.is_symlink()
        ]
    except OSError as exc:
        log.warning("local: cannot list %s to prune old copies (%s)", copy.parent, exc)
        return
    for old in stale:
        try:
            old.unlink()
        except OSError as exc:  # held open on Windows, say: a wasted file, not a failure
            log.warning("local: cannot delete the old bfloat16 copy %s (%s)", old, exc)
            continue
        log.info("local: deleted %s, the bfloat16 copy of an earlier %s", old, stem)


def _convert(llama_cpp: Any, src: Path, out: Path) -> None:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_BF16
    params.nthread = 1
    # llama.cpp lists every tensor it converts at INFO level: keep the editor's log readable.
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
    if llama_cpp.llama_model_quantize(str(src).encode(), str(out).encode(), params) != 0:
        raise RuntimeError("llama.cpp could not convert the model")
