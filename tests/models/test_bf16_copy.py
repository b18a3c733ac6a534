"""The bfloat16 copy of a float16 model (local.weights), with the real MiniLM and llama.cpp."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace

import llama_cpp
import numpy as np
import pytest
from conftest import write
from e5_util import ensure_e5_model
from model_util import ensure_test_model

from memory_ls.cli import main as cli_main
from memory_ls.embeddings.local import LocalProvider, open_local
from memory_ls.engine import MemoryEngine
from memory_ls.engine.memory_engine import provider_status
from memory_ls.models import bf16_copy
from memory_ls.settings import Settings

pytestmark = pytest.mark.model

TEXTS = [
    "We chose a token bucket limiter for the public endpoints.",
    "Planted tomatoes and basil in the garden on Saturday.",
    "PostgreSQL 16, never MySQL; four spaces, no tabs.",
]


def opened(path: Path, weights: str) -> LocalProvider:
    settings = Settings()
    settings.local.weights = weights
    return open_local(path, settings)


def test_native_bf16_reads_llama_cpp_system_info() -> None:
    assert bf16_copy.native_bf16("CPU : AVX2 = 1 | AVX512 = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1")
    assert not bf16_copy.native_bf16("CPU : AVX2 = 1 | AVX512 = 1 | AVX512_BF16 = 0 |")
    assert not bf16_copy.native_bf16("CPU : NEON = 1 | ARM_FMA = 1 |")


def test_the_copy_is_the_same_model_under_the_same_key() -> None:
    model = ensure_test_model()
    as_is, copy = opened(model, "file"), opened(model, "bf16")
    try:
        assert as_is.weights == model
        assert copy.weights.parent == bf16_copy.copies_dir()
        assert bf16_copy.file_type(copy.weights) == llama_cpp.LLAMA_FTYPE_MOSTLY_BF16
        # The index and the embedding cache are keyed by this: both files share them.
        assert copy.provider_key == as_is.provider_key
        a, b = as_is.embed_documents(TEXTS), copy.embed_documents(TEXTS)
        assert (a * b).sum(axis=1).min() > 0.9999
        qa, qb = as_is.embed_query(TEXTS[0]), copy.embed_query(TEXTS[0])
        assert float(qa @ qb) > 0.9999
        assert float(a[0] @ a[1]) < 0.5  # and different texts stay apart
    finally:
        as_is.close()
        copy.close()
    assert list(model.parent.glob("*bf16*")) == []  # never beside the user's file


def test_the_copy_is_made_once() -> None:
    model = ensure_test_model()
    first = opened(model, "bf16")
    first.close()
    stamp = first.weights.stat().st_mtime_ns
    again = opened(model, "bf16")
    try:
        assert again.weights == first.weights
        assert again.weights.stat().st_mtime_ns == stamp
        assert [p.name for p in bf16_copy.copies_dir().iterdir()] == [first.weights.name]
    finally:
        again.close()


def test_auto_uses_the_copy_where_llama_cpp_multiplies_bf16() -> None:
    native = bf16_copy.native_bf16(llama_cpp.llama_print_system_info().decode())
    p = opened(ensure_test_model(), "auto")
    try:
        assert (p.weights.parent == bf16_copy.copies_dir()) is native
        assert p.weights == ensure_test_model() or native
    finally:
        p.close()


def test_a_model_that_is_not_float16_is_used_as_it_is() -> None:
    e5 = ensure_e5_model()  # 4-bit blocks
    p = opened(e5, "bf16")
    try:
        assert p.weights == e5
        assert not bf16_copy.copies_dir().exists()
    finally:
        p.close()


def test_no_room_for_a_copy_keeps_the_file(caplog: pytest.LogCaptureFixture) -> None:
    bf16_copy.copies_dir().parent.mkdir(parents=True, exist_ok=True)
    bf16_copy.copies_dir().write_text("a file where the folder would go")
    model = ensure_test_model()
    with caplog.at_level(logging.WARNING):
        p = opened(model, "bf16")
    try:
        assert p.weights == model
        assert p.embed_query(TEXTS[0]).shape == (384,)
        assert "no bfloat16 copy" in caplog.text
    finally:
        p.close()


def test_a_broken_copy_falls_back_to_the_file(caplog: pytest.LogCaptureFixture) -> None:
    model = ensure_test_model()
    good = opened(model, "bf16")
    good.close()
    data = good.weights.read_bytes()
    good.weights.write_bytes(data[: len(data) // 3])  # cut short, as a full disk would
    with caplog.at_level(logging.WARNING):
        p = opened(model, "bf16")
    try:
        assert p.weights == model
        assert float(np.linalg.norm(p.embed_query(TEXTS[1]))) == pytest.approx(1.0, abs=1e-5)
        assert "using" in caplog.text and str(model) in caplog.text
    finally:
        p.close()


def test_a_changed_model_file_replaces_its_old_copy(tmp_path: Path) -> None:
    model = tmp_path / "models" / "minilm.gguf"
    model.parent.mkdir()
    shutil.copyfile(ensure_test_model(), model)
    first = opened(model, "bf16")
    first.close()
    copies = bf16_copy.copies_dir()
    # Names that are not an earlier copy of this file, whatever they look like.
    keep = [
        copies / "minilm-extra-0123456789abcdef.gguf",  # a model whose stem starts the same
        copies / "other-0123456789abcdef.gguf",
        copies / "minilm-0123456789abcdef.gguf.bak",
        copies / f".{first.weights.name}.x1y2z3.tmp",  # another process's half-written copy
    ]
    for path in keep:
        path.write_bytes(b"not ours to delete")
    with model.open("ab") as fh:  # the file changes (a new conversion): a new fingerprint
        fh.write(b"\0" * 64)
    second = opened(model, "bf16")
    try:
        assert second.weights.parent == copies and second.weights != first.weights
        assert not first.weights.exists()
        assert sorted(copies.iterdir()) == sorted([second.weights, *keep])
        assert sorted(model.parent.iterdir()) == [model]
        assert second.embed_query(TEXTS[0]).shape == (384,)
    finally:
        second.close()
    again = opened(model, "bf16")  # the current copy is kept, and so is everything else
    again.close()
    assert sorted(copies.iterdir()) == sorted([second.weights, *keep])


def test_status_says_which_weights_the_local_model_runs_from(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ensure_test_model()
    for weights, shown in (("bf16", "bf16 copy"), ("file", "file")):
        s = Settings(provider="local")
        s.local.model_path = str(model)
        s.local.weights = weights
        with MemoryEngine(ws, s, index_path=tmp_path / f"{weights}.sqlite") as e:
            prov = e.status()["provider"]
        assert prov == {"id": "local", "model": model.stem, "dims": 384, "weights": shown}
    remote = SimpleNamespace(id="openai", model="text-embedding-3-small", dims=1536)
    assert "weights" not in provider_status(remote)
    toml = f'provider = "local"\n[local]\nmodelPath = {json.dumps(str(model))}\nweights = "bf16"\n'
    write(ws, ".memory-ls.toml", toml)
    assert cli_main(["status", "-w", str(ws), "--index", str(tmp_path / "cli.sqlite")]) == 0
    assert f"provider    local {model.stem} (384 dims, bf16 copy)" in capsys.readouterr().out
