"""This workspace's settings and its index: schema, size, files, chunks, pending vectors, and
the drift between the files on disk and the index, all read without writing anything."""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .check import FAIL, OK, WARN, Check, Env


def check_settings(env: Env) -> Check:
    if not env.problems:
        return Check(
            "settings", OK, f"provider {env.settings.provider}, store {env.settings.store.backend}"
        )
    detail = "\n".join(env.problems)
    summary = f"{len(env.problems)} problem(s) in the settings (ignored, defaults used)"
    return Check(
        "settings",
        WARN,
        summary,
        detail,
        "correct .memory-ls.toml or ~/.config/memory-ls/config.toml as the detail says",
    )


def index_path(env: Env) -> Path:
    from ..engine.index_files import index_path_for

    return env.index or index_path_for(env.settings, env.root)


@dataclass
class Drift:
    missing: list[str] = field(default_factory=list)  # on disk, not in the index
    stale: list[str] = field(default_factory=list)  # in the index, changed on disk since
    gone: list[str] = field(default_factory=list)  # in the index, no longer on disk

    def count(self) -> int:
        return len(self.missing) + len(self.stale) + len(self.gone)

    def lines(self, most: int = 5) -> list[str]:
        out = []
        for what, paths in (
            ("not indexed", self.missing),
            ("changed", self.stale),
            ("deleted", self.gone),
        ):
            if paths:
                more = f" (+{len(paths) - most} more)" if len(paths) > most else ""
                out.append(f"{what}: {', '.join(paths[:most])}{more}")
        return out


def _changed(mf: Any, state: tuple[str, float, int], most_bytes: int) -> bool:
    """Whether a sync would index the file again (as index/sync.py decides, reading no more)."""
    from ..sources.markdown import content_hash, read_bytes

    digest, mtime, size = state
    try:
        st = mf.abs_path.lstat()
    except OSError:
        return True
    if not stat.S_ISREG(st.st_mode):
        return True
    if mf.source == "sessions":
        return bool(st.st_size != size)
    if mtime == max(st.st_mtime, st.st_ctime) and size == st.st_size:
        return False
    try:  # the stamp moved: the content decides, as the sync's hash does
        return bool(content_hash(read_bytes(mf.abs_path, most_bytes, mf.folders)) != digest)
    except Exception:
        return True


def drift(env: Env, conn: Any) -> Drift:
    from ..workspace import Workspace

    rows = conn.execute("SELECT path, hash, mtime, size FROM files").fetchall()
    indexed = {p: (h, m, s) for p, h, m, s in rows}
    found = {mf.path: mf for mf in Workspace(env.root, env.settings).discover()}
    out = Drift()
    for path in sorted(found):
        if path not in indexed:
            out.missing.append(path)
        elif _changed(found[path], indexed[path], env.settings.max_file_bytes):
            out.stale.append(path)
    out.gone = sorted(indexed.keys() - found.keys())
    return out


def _count(conn: Any, sql: str) -> int | None:
    from ..index.schema import DatabaseError

    try:
        return int(conn.execute(sql).fetchone()[0])
    except DatabaseError:  # a table or column an older schema lacks
        return None


def _size_mb(path: Path) -> float:
    sides = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
    return sum(p.stat().st_size for p in sides if p.exists()) / 1e6


def _schema(version: str | None) -> tuple[str, str, str]:
    """(status, what to say, fix) of the index's schema version against this code's."""
    from ..index.schema import OLDEST_UPGRADED, SCHEMA_VERSION

    if version is None or not version.isdigit():
        return (
            FAIL,
            f"no schema version ({version!r}): not a memory-ls index",
            "memory-ls index --force",
        )
    v = int(version)
    if v == SCHEMA_VERSION:
        return OK, f"schema {v}", ""
    if v > SCHEMA_VERSION:
        return (
            FAIL,
            f"schema {v} is newer than this memory-ls knows ({SCHEMA_VERSION}): opening it "
            "moves it aside and rebuilds",
            "upgrade memory-ls (or run the newer one)",
        )
    if v < OLDEST_UPGRADED:
        return (
            WARN,
            f"schema {v} is too old to upgrade: the next open rebuilds it",
            "memory-ls index",
        )
    return (
        WARN,
        f"schema {v}, older than this memory-ls writes ({SCHEMA_VERSION}): upgraded in place "
        "when next opened",
        "memory-ls index",
    )


def check_index(env: Env) -> Check:
    from ..index.schema import DatabaseError, connect_read_only

    path = index_path(env)
    w = f" -w {env.root}"
    if not path.is_file():
        return Check("index", WARN, f"no index yet at {path}", fix=f"memory-ls index{w}")
    try:
        conn = connect_read_only(path)
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            files = _count(conn, "SELECT count(*) FROM files")
            chunks = _count(conn, "SELECT count(*) FROM chunks")
            pending = _count(conn, "SELECT count(*) FROM chunks WHERE vec = 0")
            moved = drift(env, conn)
        finally:
            conn.close()
    except DatabaseError as exc:
        return Check(
            "index",
            FAIL,
            f"{path} cannot be read: {exc}",
            fix=f"memory-ls index --force{w}  (it rebuilds the index)",
        )
    status, said, fix = _schema(meta.get("schema"))
    summary = f"{path.name}: {said}, {_size_mb(path):.1f} MB, {files} files, {chunks} chunks"
    lines = [f"path: {path}"]
    if meta.get("provider"):
        lines.append(f"embedded by: {meta['provider']} {meta.get('model', '')}".rstrip())
        if pending:
            lines.append(f"{pending} chunks have no vector yet (searched by keywords only)")
            status = WARN if status == OK else status
            fix = fix or f"memory-ls index{w}"
    else:
        lines.append("keyword-only index (no provider when it was built)")
    if moved.count():
        summary += f"; {moved.count()} files differ from disk"
        lines += moved.lines()
        status = WARN if status == OK else status
        fix = fix or f"memory-ls index{w}  (a running language server syncs on its own)"
    return Check("index", status, summary, "\n".join(lines), fix)
