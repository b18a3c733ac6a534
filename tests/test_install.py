"""The release artifacts and every way a user installs them, end to end.

`python -m build` makes the sdist and the wheel once per session; each test then installs the
wheel the way a user would, into empty folders of its own (`uv tool install`, `pipx install`,
`pip install` into a fresh virtualenv, `uvx` for an agent's MCP config, and the `local` extra
for the local model), and searches the demo workspace through the installed `memory-ls`. The
packages come from the package index as they would for a user; pip's and uv's caches are shared
by the session so that the second install does not download again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from model_util import ensure_test_model
from repo_root import REPO

import memory_ls
from memory_ls.embeddings.base import NO_LLAMA_CPP
from memory_ls.models import llama_build, registry

PYTHON = Path(sys.executable)
BIN = PYTHON.parent
DEMO = REPO / "examples" / "demo"
QUERY = "what happened to checkout latency"
HIT = "memory/2026-02-03-incident.md"
INSTALL_TIMEOUT = 900


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    cmd = [str(PYTHON), "-m", "build", "--outdir", str(out), str(REPO)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="session")
def caches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Download caches shared by the session's installs (never the user's own)."""
    root = tmp_path_factory.mktemp("install-caches")
    return {"UV_CACHE_DIR": str(root / "uv"), "PIP_CACHE_DIR": str(root / "pip")}


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("memory_ls-*.whl")
    return wheel


def _env(tmp_path: Path, caches: dict[str, str], **extra: str) -> dict[str, str]:
    """A user's environment in an empty home: no virtualenv active, nothing configured."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(caches)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), **extra)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])  # uv and pipx from dev
    env.pop("MEMORY_LS_PG_URL", None)
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 120):
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    return proc


def _demo_search(exe: Path, tmp_path: Path, env: dict[str, str]) -> dict:
    """Index a copy of the demo with the installed memory-ls and search it; the JSON answer."""
    ws = tmp_path / "demo"
    shutil.copytree(DEMO, ws)
    _run([str(exe), "index", "-w", str(ws)], env)
    found = json.loads(_run([str(exe), "search", "-w", str(ws), "--json", QUERY], env).stdout)
    assert found["results"] and found["results"][0]["path"] == HIT, found
    assert found["results"][0]["citation"].startswith(HIT + "#L")
    return found


def test_the_artifacts_are_ready_to_publish(dist: Path):
    wheel = _wheel(dist)
    (sdist,) = dist.glob("memory_ls-*.tar.gz")
    assert wheel.name == f"memory_ls-{memory_ls.__version__}-py3-none-any.whl"
    _run([str(PYTHON), "-m", "twine", "check", "--strict", str(wheel), str(sdist)], os.environ)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "memory-ls = memory_ls.cli:main" in entry
    assert "Provides-Extra: local" in meta and "Provides-Extra: team" in meta
    # A plain install needs no compiler: llama-cpp-python only with the local extra.
    assert 'Requires-Dist: llama-cpp-python>=0.3.16; extra == "local"' in meta
    assert not any(line.startswith("Requires-Dist: llama") and "extra" not in line
                   for line in meta.splitlines())  # fmt: skip
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "version" in project["dynamic"]  # one place: memory_ls.__version__
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog and f"## [{memory_ls.__version__}]" in changelog


def test_uv_tool_install(dist: Path, caches: dict[str, str], tmp_path: Path):
    """`uv tool install memory-ls`: keyword search at once; `memory-ls model pull` brings the
    model and llama.cpp (here from a wheel install.sh built for this CPU, as a user's second
    install would find it), and the same search runs hybrid."""
    env = _env(tmp_path, caches, UV_TOOL_DIR=str(tmp_path / "tools"))
    env["UV_TOOL_BIN_DIR"] = str(tmp_path / "bin")
    _run(["uv", "tool", "install", str(_wheel(dist))], env, timeout=INSTALL_TIMEOUT)
    exe = tmp_path / "bin" / "memory-ls"
    assert _demo_search(exe, tmp_path, env)["mode"] == "keyword"  # no model yet
    _seed_llama_wheels(Path(env["XDG_CACHE_HOME"]))
    # A uv tool environment has no pip of its own: memory-ls brings it for `model pull`.
    pull = _run([str(exe), "model", "pull"], env, timeout=INSTALL_TIMEOUT)
    assert Path(pull.stdout.strip()).is_file()
    assert "search by meaning is ready" in pull.stderr, pull.stderr
    ws = str(tmp_path / "demo")
    _run([str(exe), "index", "-w", ws], env, timeout=300)
    found = json.loads(_run([str(exe), "search", "-w", ws, "--json", QUERY], env).stdout)
    assert found["mode"] == "hybrid" and found["results"][0]["path"] == HIT, found


def test_pipx_install(dist: Path, caches: dict[str, str], tmp_path: Path):
    env = _env(tmp_path, caches, PIPX_HOME=str(tmp_path / "pipx"))
    env["PIPX_BIN_DIR"] = str(tmp_path / "bin")
    _run([str(PYTHON), "-m", "pipx", "install", str(_wheel(dist))], env, timeout=INSTALL_TIMEOUT)
    _demo_search(tmp_path / "bin" / "memory-ls", tmp_path, env)


def test_pip_install_into_a_fresh_virtualenv(dist: Path, caches: dict[str, str], tmp_path: Path):
    env = _env(tmp_path, caches)
    venv = tmp_path / "venv"
    _run([str(PYTHON), "-m", "venv", str(venv)], env)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(_wheel(dist))]
    _run(pip, env, timeout=INSTALL_TIMEOUT)
    exe = venv / "bin" / "memory-ls"
    _demo_search(exe, tmp_path, env)
    # A model without llama.cpp (declined with --no-runtime): keyword search, and status says
    # how to get the rest, never a traceback.
    models = Path(env["XDG_CACHE_HOME"]) / "memory-ls" / "models"
    models.mkdir(parents=True)
    shutil.copyfile(ensure_test_model(), registry.model_path(registry.DEFAULT_MODEL_NAME, models))
    pull = _run([str(exe), "model", "pull", "--no-runtime"], env)
    assert NO_LLAMA_CPP in pull.stderr
    status = _run([str(exe), "status", "-w", str(tmp_path / "demo"), "--json"], env)
    assert NO_LLAMA_CPP in json.loads(status.stdout)["providerReason"]


def _mcp_exchange(cmd: list[str], env: dict[str, str], cwd: Path) -> list[dict]:
    """initialize, initialized, tools/list over stdio; the server's answers."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "install-test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]  # fmt: skip
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    proc = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(stdin)
    proc.stdin.flush()
    answers: dict[int, dict] = {}
    try:
        while len(answers) < 2:  # notifications may come between the answers
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            message = json.loads(line)
            if "id" in message:
                answers[message["id"]] = message
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return [answers[1], answers[2]]


def test_uvx_starts_the_mcp_server(dist: Path, caches: dict[str, str], tmp_path: Path):
    """What an agent's MCP config runs: `uvx --from <wheel> memory-ls mcp -w DIR`."""
    env = _env(tmp_path, caches)
    ws = tmp_path / "demo"
    shutil.copytree(DEMO, ws)
    cmd = ["uvx", "--from", str(_wheel(dist)), "memory-ls", "mcp", "-w", str(ws)]
    _run(["uvx", "--from", str(_wheel(dist)), "memory-ls", "--version"], env, timeout=600)
    init, tools = _mcp_exchange(cmd, env, tmp_path)
    assert init["result"]["serverInfo"]["name"]
    names = {tool["name"] for tool in tools["result"]["tools"]}
    assert {"memory_search", "memory_get", "memory_status"} <= names


def _llama_wheel_folders() -> list[Path]:
    """The folders of llama-cpp-python wheels install.sh built for this CPU (one per CPU's
    instruction sets; memory_ls/models/llama_build.py)."""
    build = llama_build.plan(env={})
    if build.wheels is None:
        return []
    found = [build.wheels] if list(build.wheels.glob("llama_cpp_python-*.whl")) else []
    if not found and os.environ.get("CI"):
        pytest.fail(f"no llama-cpp-python wheel from install.sh in {build.wheels}")
    if not found:
        pytest.skip(
            f"no llama-cpp-python wheel built by install.sh in {build.wheels}: `bash install.sh` "
            "builds it for this CPU (a few minutes, once)"
        )
    return found


def _seed_llama_wheels(cache: Path) -> None:
    """The user's cache as a second install finds it: the wheel built for this CPU."""
    for folder in _llama_wheel_folders():
        shutil.copytree(folder, cache / "memory-ls" / "wheels" / folder.name, dirs_exist_ok=True)


def test_the_local_extra_brings_semantic_search(dist: Path, caches: dict[str, str], tmp_path: Path):
    """`memory-ls[local]` with the model: hybrid search. llama-cpp-python comes from the wheel
    install.sh built for this CPU (compiling it here again would take minutes; how long it
    takes a user is measured in the docs)."""
    wheels = _llama_wheel_folders()
    env = _env(tmp_path, caches)
    venv = tmp_path / "venv"
    _run([str(PYTHON), "-m", "venv", str(venv)], env)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    pip += [arg for folder in wheels for arg in ("--find-links", str(folder))]
    pip += ["--only-binary", "llama-cpp-python", f"{_wheel(dist)}[local]"]
    _run(pip, env, timeout=INSTALL_TIMEOUT)
    # The model as `memory-ls model pull` leaves it (the pull has tests of its own).
    models = Path(env["XDG_CACHE_HOME"]) / "memory-ls" / "models"
    models.mkdir(parents=True)
    shutil.copyfile(ensure_test_model(), registry.model_path(registry.DEFAULT_MODEL_NAME, models))
    found = _demo_search(venv / "bin" / "memory-ls", tmp_path, env)
    assert found["mode"] == "hybrid", found
