"""What memory-ls runs on: Python, SQLite (FTS5, extensions, sqlite-vec) and llama.cpp."""

from __future__ import annotations

import json
import platform
import signal
import subprocess
import sys
from pathlib import Path

from .check import FAIL, OK, WARN, Check, Env

MIN_PYTHON = (3, 11)  # pyproject.toml's requires-python
PIP = f"{sys.executable} -m pip"

# llama.cpp's system-info names -> the /proc/cpuinfo flag each needs.
CPU_FLAGS = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX2": "avx2",
    "AVX_VNNI": "avx_vnni",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}
# Run in a process of its own: a build for instructions this CPU lacks dies of SIGILL, and
# doctor must live to say so.
_PROBE = (
    "import json, llama_cpp; "
    "print(json.dumps([llama_cpp.__version__, llama_cpp.llama_print_system_info().decode()]))"
)
REBUILD = (
    "reinstall llama-cpp-python built for this CPU's instruction sets: "
    f"`{sys.executable} -m memory_ls.models.llama_build` (from the wheel kept for this CPU, or "
    "a new build)"
)
INSTALL_RUNTIME = (
    "`memory-ls model pull` (it builds llama.cpp for this CPU when it is missing), "
    "or install memory-ls with its local extra"
)


def check_python(env: Env) -> Check:
    version = platform.python_version()
    where = f"Python {version} ({sys.executable})"
    if sys.version_info[:2] < MIN_PYTHON:
        need = ".".join(map(str, MIN_PYTHON))
        return Check(
            "python",
            FAIL,
            f"{where}: memory-ls needs {need} or later",
            fix=f"install Python {need}+ and memory-ls with it",
        )
    return Check("python", OK, where)


def check_sqlite(env: Env) -> Check:
    from ..index import schema

    driver = schema.sqlite3
    name = "sqlean.py" if driver.__name__.startswith("sqlean") else "sqlite3 (stdlib)"
    conn, vec_reason = schema.connect(":memory:")  # in memory: nothing is written
    try:
        version = conn.execute("SELECT sqlite_version()").fetchone()[0]
        try:
            conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
            fts5 = True
        except schema.DatabaseError:
            fts5 = False
    finally:
        conn.close()
    loading = hasattr(driver.Connection, "enable_load_extension")
    summary = f"SQLite {version} through {name}"
    detail = (
        f"FTS5: {'yes' if fts5 else 'no'}; extension loading: {'yes' if loading else 'no'}; "
        f"sqlite-vec: {'loads' if vec_reason is None else vec_reason}"
    )
    if not fts5:
        return Check(
            "sqlite",
            FAIL,
            f"{summary} has no FTS5: no keyword search, no index",
            detail,
            f"{PIP} install 'sqlean.py>=3.45' (a sqlite3 with FTS5 built in), or use a Python "
            "whose SQLite has FTS5 (python.org, uv's or the distribution's)",
        )
    if vec_reason is None:
        return Check("sqlite", OK, f"{summary}: FTS5, sqlite-vec", detail)
    fix = f"{PIP} install sqlite-vec" if loading else f"{PIP} install 'sqlean.py>=3.45'"
    if env.settings.store.vector_backend == "sqlite-vec":
        summary += ": sqlite-vec does not load, store.vectorBackend = sqlite-vec uses numpy"
        return Check("sqlite", WARN, summary, detail, fix)
    return Check("sqlite", OK, f"{summary}: FTS5 (sqlite-vec not loaded: numpy searches)", detail)


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """The CPU's flags, None where /proc/cpuinfo does not say (macOS, some ARM kernels)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(("flags", "Features")) and ":" in line:
            return set(line.split(":", 1)[1].split())
    return None


def built_for(system_info: str) -> list[str]:
    """The features llama.cpp says it was built for: ``AVX2 = 1 | FMA = 1 | ...`` -> names."""
    out = []
    for part in system_info.replace("\n", "|").split("|"):
        name, _, value = part.rpartition("=")
        name = name.split(":")[-1].strip()
        if name and value.strip() == "1":
            out.append(name)
    return out


def _wants_local(env: Env) -> bool:
    return env.settings.provider in ("auto", "local") or env.settings.fallback in ("auto", "local")


def check_llama(env: Env) -> Check:
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return Check("llama.cpp", WARN, "importing llama_cpp took over 2 minutes", fix=REBUILD)
    if done.returncode < 0:
        sig = signal.Signals(-done.returncode).name
        why = "instructions this CPU lacks" if sig == "SIGILL" else "a crash"
        return Check("llama.cpp", FAIL, f"importing llama_cpp died of {sig} ({why})", fix=REBUILD)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        status = FAIL if env.settings.provider == "local" else WARN
        summary = f"llama-cpp-python not usable ({last}): no local embedding model"
        return Check("llama.cpp", status, summary, fix=INSTALL_RUNTIME)
    version, info = json.loads(done.stdout.strip().splitlines()[-1])
    features = built_for(info)
    flags = cpu_flags()
    detail = f"built for: {', '.join(features) or 'nothing it names'}"
    summary = f"llama-cpp-python {version}"
    if flags is None:
        return Check("llama.cpp", OK, f"{summary} (the CPU's flags are not known here)", detail)
    missing = [f for f in features if f in CPU_FLAGS and CPU_FLAGS[f] not in flags]
    unused = [f for f, flag in CPU_FLAGS.items() if flag in flags and f not in features]
    if missing:
        summary += f": built for {', '.join(missing)}, which this CPU lacks (illegal instruction)"
        status = FAIL if _wants_local(env) else WARN
        return Check("llama.cpp", status, summary, detail, REBUILD)
    if unused:
        detail += f"\nthe CPU also has {', '.join(unused)}, which this build does not use"
    return Check("llama.cpp", OK, f"{summary}, built for this CPU", detail)
