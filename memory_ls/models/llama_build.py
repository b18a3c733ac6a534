"""llama-cpp-python (llama.cpp) for this machine: the runtime of the local models.

Its wheels on PyPI are source only, and pip, pipx and uv compile it with CMake's defaults: one
core (without ninja CMake's makefiles build serially), every llama.cpp tool, and on x86-64 code
for the build machine's CPU cached under a key of the source alone, so a wheel built on one CPU
can be handed to another and die there of an illegal instruction. This module builds it the way
memory-ls needs it, for ``install.sh`` and for ``memory-ls model pull``:

- every core (``CMAKE_BUILD_PARALLEL_LEVEL``), and only what memory-ls uses (no multimodal
  library, tools, examples, tests or server);
- on x86-64, for the instruction sets this CPU has (AVX2, AVX-VNNI, AVX-512 with VNNI, VBMI and
  BF16, from ``/proc/cpuinfo``), never ``-march=native``, with the wheel kept in a folder named
  for exactly those sets (``<cache>/memory-ls/wheels/x86_64-<sets>``), so a later install on a
  CPU with the same sets takes seconds and never gets another CPU's build.

A ``CMAKE_ARGS`` already in the environment (a GPU build, say) wins: pip then builds and caches
the wheel as usual. So does ``CMAKE_BUILD_PARALLEL_LEVEL``. On other architectures, and where
``/proc/cpuinfo`` is missing (macOS), llama.cpp's own defaults and pip's cache apply.

Run as ``python -m memory_ls.models.llama_build`` it installs the runtime into the running
interpreter's environment. Standard library only: ``install.sh`` runs it before anything else of
memory-ls is needed.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# What memory-ls never uses.
LEAN = (
    "-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "
    "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF"
)
AVX2 = "-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
# Before 2013 (no AVX2): SSE4.2 only, since ggml's x86-64 default would assume AVX.
SSE42 = (
    "-DGGML_SSE42=ON -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF"
)
# ggml's AVX512 switch turns on these five (-mavx512f -mavx512cd -mavx512vl ...).
AVX512_BASE = ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")
AVX512_EXTRAS = (("avx512_vnni", "AVX512_VNNI"), ("avx512vbmi", "AVX512_VBMI"),
                 ("avx512_bf16", "AVX512_BF16"))  # fmt: skip
FALLBACK_SPEC = "llama-cpp-python>=0.3.16"


@dataclass(frozen=True)
class Build:
    """How to build llama-cpp-python here: CMake's arguments, and the folder that keeps wheels
    for this CPU's instruction sets (None: pip's own cache, when the build is not ours)."""

    cmake_args: str
    wheels: Path | None
    sets: str = ""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (``flags`` line of /proc/cpuinfo); empty where there is none."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    match = re.search(r"^flags\s*:(.*)$", text, flags=re.M)
    return set(match.group(1).split()) if match else set()


def x86_sets(flags: set[str]) -> tuple[str, str]:
    """(the folder name's sets, CMake's switches) for an x86-64 CPU with ``flags``."""
    if not {"avx2", "fma", "f16c", "bmi2"} <= flags:
        return "sse42", SSE42
    sets, args = ["avx2"], [AVX2]
    if "avx_vnni" in flags:
        sets.append("avx_vnni")
        args.append("-DGGML_AVX_VNNI=ON")
    if set(AVX512_BASE) <= flags:
        sets.append("avx512")
        args.append("-DGGML_AVX512=ON")
        for flag, switch in AVX512_EXTRAS:
            if flag in flags:
                sets.append(flag)
                args.append(f"-DGGML_{switch}=ON")
    return "-".join(sets), " ".join(args)


def plan(env: dict[str, str] | None = None, cache: Path | None = None) -> Build:
    """The build for this machine, from its CPU and the environment."""
    env = dict(os.environ) if env is None else env
    if env.get("CMAKE_ARGS"):
        return Build(env["CMAKE_ARGS"], None)
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return Build(LEAN, None)
    flags = cpu_flags()
    if not flags:
        return Build(LEAN, None)
    sets, switches = x86_sets(flags)
    base = cache or Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memory-ls"
    return Build(f"{LEAN} {switches} -DGGML_NATIVE=OFF", base / "wheels" / f"x86_64-{sets}", sets)


def requirement() -> str:
    """llama-cpp-python as memory-ls's ``local`` extra asks for it."""
    try:
        for req in metadata.requires("memory-ls") or []:
            if re.match(r"llama[-_]cpp[-_]python\b", req):
                return req.split(";", 1)[0].strip()
    except metadata.PackageNotFoundError:
        pass
    return FALLBACK_SPEC


def installed() -> bool:
    try:
        metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return False
    return True


def _pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]


def _run(cmd: list[str], env: dict[str, str], log: Path) -> None:
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise RuntimeError(
            f"{' '.join(cmd[3:5])} failed (exit {proc.returncode}); the log: {log}\n"
            + "\n".join(tail)
        )


def _from_folder(spec: str, wheels: Path, env: dict[str, str], log: Path) -> bool:
    """Install a wheel from ``wheels`` that meets ``spec``; False when there is none. pip runs
    isolated so that no configured index or find-links can supply another CPU's build."""
    cmd = _pip("install", "-q", "--isolated", "--no-index", "--find-links", str(wheels))
    cmd += ["--no-deps", "--force-reinstall", spec]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    return proc.returncode == 0


def _build_wheel(spec: str, wheels: Path, env: dict[str, str], log: Path) -> None:
    wheels.mkdir(parents=True, exist_ok=True)
    # Two installs at once never see half a wheel: each builds in its own folder, then renames.
    with tempfile.TemporaryDirectory(prefix=".build.", dir=wheels) as tmp:
        cmd = _pip("wheel", "--no-deps", "--no-cache-dir", "--no-binary", "llama-cpp-python")
        _run([*cmd, "-w", tmp, spec], env, log)
        for wheel in Path(tmp).glob("llama_cpp_python-*.whl"):
            os.replace(wheel, wheels / wheel.name)


def install(
    *, with_deps: bool = True, log: Path | None = None, say: Callable[[str], None] = print
) -> Path:
    """Install llama-cpp-python into this interpreter's environment, built as the module
    docstring says; return the build log. Raises RuntimeError when pip fails."""
    build = plan()
    cores = str(os.cpu_count() or 2)
    env = {**os.environ, "CMAKE_ARGS": build.cmake_args}
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", cores)
    spec = requirement()
    log = log or Path(tempfile.mkstemp(prefix="memory-ls-llama-build-", suffix=".log")[1])
    if build.wheels is None:
        say(f"installing {spec} with pip (CMAKE_ARGS: {build.cmake_args})")
        _run(_pip("install", "-q", spec), env, log)
        return log
    if not _from_folder(spec, build.wheels, env, log):
        say(
            f"compiling {spec} for this CPU ({build.sets}) on "
            f"{env['CMAKE_BUILD_PARALLEL_LEVEL']} cores: a few minutes, once (log: {log})"
        )
        with _ticker():
            _build_wheel(spec, build.wheels, env, log)
        if not _from_folder(spec, build.wheels, env, log):
            raise RuntimeError(f"the wheel built in {build.wheels} does not install; log: {log}")
    if with_deps:  # the wheel went in alone; its own dependencies (numpy, jinja2, ...) now
        _run(_pip("install", "-q", spec), env, log)
    return log


@contextmanager
def _ticker() -> Iterator[None]:
    """Elapsed time on a terminal while the compiler runs (nothing when not a terminal)."""
    if not sys.stderr.isatty():
        yield
        return
    stop = threading.Event()

    def tick() -> None:
        start = time.monotonic()
        while not stop.wait(1.0):
            minutes, seconds = divmod(int(time.monotonic() - start), 60)
            sys.stderr.write(f"\r  compiling llama.cpp: {minutes}:{seconds:02d}")
            sys.stderr.flush()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sys.stderr.write("\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m memory_ls.models.llama_build",
        description="Install llama-cpp-python built for this CPU into this environment.",
    )
    ap.add_argument("--no-deps", action="store_true", help="the wheel alone, not its deps")
    ap.add_argument("--print", action="store_true", help="print the build plan and stop")
    args = ap.parse_args(argv)
    if args.print:
        build = plan()
        print(f"CMAKE_ARGS={build.cmake_args}\nwheels={build.wheels or '(pip cache)'}")
        return 0
    try:
        install(with_deps=not args.no_deps, say=lambda m: print(m, file=sys.stderr))
    except RuntimeError as exc:
        print(f"llama_build: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
