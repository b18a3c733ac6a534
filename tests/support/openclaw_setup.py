"""What the OpenClaw tests (tests/integrations/test_openclaw.py) and bench/openclaw_eval.py
share: Node 24 from install.sh, the plugin built (npm ci, npm run build) under a lock, the
pinned openclaw package installed once into a cache, and the environment OpenClaw runs in.

Whatever cannot be had here (no npm, no registry) raises ``Missing``: the tests skip on it
outside CI and fail in CI, the benchmark stops."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from repo_root import REPO

OPENCLAW_VERSION = "2026.9.6"
PLUGIN = REPO / "integrations" / "openclaw"
DRIVER = REPO / "tests" / "integrations" / "openclaw_drive.mjs"
INSTALL_SH = REPO / "editors" / "vscode" / "e2e" / "install.sh"
MEMORY_LS = Path(sys.executable).parent / "memory-ls"


class Missing(Exception):
    """A part the OpenClaw runs need is not here (npm, the registry, Node 24)."""


class BuildFailed(Exception):
    """``npm run build`` of the plugin failed: its output."""


def node24() -> Path:
    """The Node 24 binary of ``install.sh --node-only`` (OpenClaw needs Node >= 24.16)."""
    if shutil.which("npm") is None:
        raise Missing("npm is not on PATH")
    try:
        out = subprocess.run(
            ["bash", str(INSTALL_SH), "--node-only"],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError) as error:
        raise Missing(f"install.sh --node-only failed: {error}") from None
    for line in out.splitlines():
        if line.startswith("MEMORY_LS_E2E_NODE="):
            return Path(line.split("=", 1)[1])
    raise Missing("install.sh printed no MEMORY_LS_E2E_NODE")


def npm(node_bin: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """npm (the one on PATH) on the Node 24 of install.sh, in the plugin folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("npm_")}
    env["PATH"] = f"{node_bin}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["npm", *args], cwd=PLUGIN, env=env, capture_output=True, text=True, timeout=timeout
    )


@contextlib.contextmanager
def plugin_folder() -> Iterator[Path]:
    """The plugin folder, for this process alone while it builds it, installs it (``openclaw
    plugins install <folder>`` copies it), packs it (``npm pack``'s prepack empties dist/ and
    builds it again) or imports from its dist/: interleaved between two pytest-xdist workers,
    an install copied a folder without dist/, and OpenClaw loaded no plugin."""
    with open(Path(tempfile.gettempdir()) / "memory-ls-openclaw-plugin.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield PLUGIN
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_plugin(node_bin: Path) -> None:
    """The plugin as its package ships it: ``npm ci`` (TypeScript, from package-lock.json) and
    ``npm run build`` (tsc: src/*.ts to dist/*.js and .d.ts)."""
    with plugin_folder():
        for args in (("ci", "--no-audit", "--no-fund"), ("run", "build")):
            try:
                done = npm(node_bin, *args, timeout=600)
            except (subprocess.SubprocessError, OSError) as error:
                raise Missing(f"npm {' '.join(args)} in {PLUGIN} failed: {error}") from None
            if done.returncode != 0 and args[0] == "ci":
                raise Missing(f"npm ci in {PLUGIN} failed: {done.stderr[-2000:]}")
            if done.returncode != 0:
                raise BuildFailed(
                    f"npm run build failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
                )


def openclaw_package(node_bin: Path) -> Path:
    """The openclaw package, installed once into the cache (a temp folder renamed at the end)."""
    cache = Path(
        os.environ.get("MEMORY_LS_OPENCLAW_CACHE") or Path.home() / ".cache" / "memory-ls-openclaw"
    )
    dest = cache / f"openclaw-{OPENCLAW_VERSION}"
    package = dest / "node_modules" / "openclaw"
    if (dest / ".complete").exists():
        return package
    tmp = cache / f"openclaw-{OPENCLAW_VERSION}.tmp.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    env = {**os.environ, "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("npm_config_user_agent", None)
    started = time.monotonic()
    install = ["npm", "install", "--prefix", str(tmp), "--no-audit", "--no-fund"]
    try:
        subprocess.run(
            [*install, f"openclaw@{OPENCLAW_VERSION}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
    except (subprocess.SubprocessError, OSError) as error:
        shutil.rmtree(tmp, ignore_errors=True)
        why = getattr(error, "stderr", "") or error
        raise Missing(f"npm install openclaw@{OPENCLAW_VERSION} failed: {why}") from None
    (tmp / ".complete").write_text(f"{time.monotonic() - started:.1f}s\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return package


def openclaw_env(
    root: Path, home: Path, node: Path, *, with_memory_ls: bool = True
) -> dict[str, str]:
    """The environment OpenClaw runs in: its home, Node 24 and this memory-ls on PATH (or not),
    caches under ``root``, no provider keys of the user's."""
    path = [str(node.parent)] + ([str(MEMORY_LS.parent)] if with_memory_ls else [])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "npm_"))}
    env.update(
        PATH=os.pathsep.join([*path, "/usr/bin", "/bin"]),
        OPENCLAW_HOME=str(home),
        XDG_CACHE_HOME=str(root / "xdg-cache"),
        XDG_CONFIG_HOME=str(root / "xdg-config"),
        NO_COLOR="1",
    )
    for key in ("OPENAI_API_KEY", "GEMINI_API_KEY", "VOYAGE_API_KEY", "MISTRAL_API_KEY"):
        env.pop(key, None)
    return env
