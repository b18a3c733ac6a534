"""GGUF metadata without gguf.GGUFReader (models/gguf_meta.py), checked against that reader
on the real models and on files written by gguf's own writer."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

import gguf
import numpy as np
import pytest
from e5_util import ensure_e5_model
from model_util import ensure_test_model

from memory_ls.models import gguf_meta
from memory_ls.models.gguf_meta import GgufError


def reference(path: Path) -> tuple[dict[str, object], list[str]]:
    r = gguf.GGUFReader(str(path))
    fields = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    return fields, [t.name for t in r.tensors]


def same(a: object, b: object) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-6)
    return a == b


@pytest.mark.model
@pytest.mark.parametrize("which", ["minilm", "e5"])
def test_real_models_read_as_gguf_reads_them(which: str) -> None:
    path = ensure_test_model() if which == "minilm" else ensure_e5_model()
    fields, names = reference(path)
    got = gguf_meta.metadata(path, fields)
    assert got.keys() == fields.keys()
    assert [k for k in fields if not same(got[k], fields[k])] == []
    assert gguf_meta.check_complete(path) == names
    # One key: read up to it, the rest of the file (the vocabulary) never looked at.
    assert gguf_meta.metadata(path, ["general.architecture"]) == {
        "general.architecture": fields["general.architecture"]
    }
    assert gguf_meta.metadata(path, ["no.such.key"]) == {}


def write_sample(path: Path, endian: gguf.GGUFEndian = gguf.GGUFEndian.LITTLE) -> None:
    w = gguf.GGUFWriter(str(path), "bert", endianess=endian)
    w.add_uint32("bert.context_length", 512)
    w.add_int64("sample.big", -(2**40))
    w.add_float64("sample.f64", 0.125)
    w.add_bool("sample.flag", True)
    w.add_string("sample.text", "naïve — 令牌桶")
    w.add_array("sample.ints", [1, 2, 3])
    w.add_array("sample.words", ["[PAD]", "hello", "世界"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tensor("token_embd.weight", np.arange(24, dtype=np.float16).reshape(4, 6))
    w.add_tensor("cls.output.weight", np.ones((3, 5), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("endian", [gguf.GGUFEndian.LITTLE, gguf.GGUFEndian.BIG])
def test_every_value_type_and_both_byte_orders(tmp_path: Path, endian: gguf.GGUFEndian) -> None:
    path = tmp_path / "sample.gguf"
    write_sample(path, endian)
    fields, names = reference(path)
    got = gguf_meta.metadata(path, fields)
    assert [k for k in fields if not same(got.get(k), fields[k])] == []
    assert got["sample.words"] == ["[PAD]", "hello", "世界"] and got["sample.flag"] is True
    assert gguf_meta.check_complete(path) == names == ["token_embd.weight", "cls.output.weight"]


def test_a_cut_or_damaged_file_is_a_gguf_error(tmp_path: Path) -> None:
    """Every prefix of a file, and random damage to it, gives an answer or GgufError: never
    another exception, a hang or a giant allocation (counts are checked against the file)."""
    whole = tmp_path / "whole.gguf"
    write_sample(whole)
    data = whole.read_bytes()
    cut = tmp_path / "cut.gguf"
    keys = ["sample.words", "general.file_type", "bert.context_length"]
    complete_from = None
    for n in range(len(data)):
        cut.write_bytes(data[:n])
        try:
            gguf_meta.check_complete(cut)
            complete_from = n if complete_from is None else complete_from
        except GgufError:
            assert complete_from is None, f"a {n}-byte prefix refused after {complete_from}"
    # What a cut may lose unnoticed is the writer's padding after the last tensor.
    assert complete_from is not None and not data[complete_from:].strip(b"\0")
    assert len(data) - complete_from < 32
    rng = random.Random(7)
    for _ in range(2000):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(4, len(data))  # keep the magic: the rest is fair game
            damaged[i] = rng.randrange(256)
        cut.write_bytes(bytes(damaged))
        for read in (
            lambda: gguf_meta.metadata(cut, keys),
            lambda: gguf_meta.check_complete(cut),
        ):
            with contextlib.suppress(GgufError):
                read()


def test_not_a_gguf(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    for content, message in ((b"", "empty"), (b"GGML" + bytes(60), "magic")):
        junk.write_bytes(content)
        with pytest.raises(GgufError, match=message):
            gguf_meta.metadata(junk, ["general.architecture"])
    junk.write_bytes(b"GGUF" + (9).to_bytes(4, "little") + bytes(16))
    with pytest.raises(GgufError, match="version 9"):
        gguf_meta.check_complete(junk)
