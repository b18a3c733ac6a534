"""The house rules, checked: imports flow one way (no cycle between packages or modules, counting
imports inside functions), every package imports alone, no module grows past ~400 lines."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import memory_ls

ROOT = Path(memory_ls.__file__).parent
MAX_LINES = 440  # "about 400", with some room


def module_name(f: Path) -> str:
    rel = f.relative_to(ROOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(f: Path) -> set[str]:
    """memory_ls modules imported by ``f`` (absolute or relative), at any depth."""
    me = module_name(f).split(".")
    package = me if f.name == "__init__.py" else me[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if node.module is None:  # from . import x: x is a module of that package
                out |= {f"{target}.{a.name}" for a in node.names}
            else:
                out.add(target)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m == "memory_ls" or m.startswith("memory_ls.")}


def graph() -> dict[str, set[str]]:
    files = {module_name(f): f for f in ROOT.rglob("*.py")}
    g: dict[str, set[str]] = {}
    for name, f in files.items():
        deps = set()
        for m in imports(f):
            while m not in files and "." in m:  # from .x import name: name is not a module
                m = m.rsplit(".", 1)[0]
            if m != name and m in files and not name.startswith(m + "."):
                deps.add(m)  # a package's own __init__ does not count as a cycle
        g[name] = deps
    return g


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(n: str, path: list[str]) -> list[str] | None:
        if n in path:
            return [*path[path.index(n) :], n]
        if n in done:
            return None
        for d in sorted(g.get(n, ())):
            if found := visit(d, [*path, n]):
                return found
        done.add(n)
        return None

    for n in sorted(g):
        if found := visit(n, []):
            return found
    return None


def test_no_import_cycle_between_modules():
    assert find_cycle(graph()) is None


def test_packages_depend_one_way():
    """server -> engine -> search -> index, never back; embeddings -> models (package level)."""
    top: dict[str, set[str]] = {}
    for name, deps in graph().items():
        mine = name.split(".")[1] if "." in name else name
        top.setdefault(mine, set()).update(d.split(".")[1] for d in deps if "." in d)
    for pkg in top:
        top[pkg].discard(pkg)
    assert find_cycle(top) is None
    assert "server" not in top["engine"] | top["search"] | top["index"]
    assert "engine" not in top["search"] | top["index"] and "search" not in top["index"]
    # Model files sit below the providers that run them: embeddings and rerank import models.
    assert not top["models"] & {"embeddings", "rerank", "engine", "server"}
    # Saving sessions sits above search; the floors that read transcripts never import it.
    assert "sessions" not in top["sources"] | top["index"] | top["search"] | top["engine"]


@pytest.mark.parametrize(
    "package",
    [
        "server",
        "engine",
        "search",
        "index",
        "embeddings",
        "models",
        "sessions",
        "sources",
        "settings",
        "mcp",
    ],
)
def test_each_package_imports_alone(package: str):
    code = f"import memory_ls.{package}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_no_module_over_about_400_lines():
    big = {
        module_name(f): n
        for f in ROOT.rglob("*.py")
        if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert big == {}


# The search path, from the handlers to the JSON: its functions stay short enough to read and
# take few enough parameters that each stage's inputs travel as one value (search/context.py).
SEARCH_PATH = [
    "search/*.py",
    "engine/searcher.py",
    "engine/reranking.py",
    "engine/route.py",
    "engine/team/route.py",
    "engine/team/unsaved.py",
    "server/requests.py",
    "server/convert.py",
    "params.py",
    "mcp/tools.py",
]
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 6  # self and cls not counted


def test_search_path_functions_are_short_with_few_parameters():
    too_long: dict[str, int] = {}
    too_many: dict[str, int] = {}
    for pattern in SEARCH_PATH:
        for f in sorted(ROOT.glob(pattern)):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                where = f"{module_name(f)}.{node.name}"
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                a = node.args
                named = [*a.posonlyargs, *a.args, *a.kwonlyargs]
                params = [p for p in named if p.arg not in ("self", "cls")]
                if lines > MAX_FUNCTION_LINES:
                    too_long[where] = lines
                if len(params) > MAX_PARAMETERS:
                    too_many[where] = len(params)
    assert too_long == {}
    assert too_many == {}
