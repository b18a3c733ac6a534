"""Indexes left in the cache by workspace folders that no longer exist (``cache_prune``)."""

from __future__ import annotations

from .check import OK, WARN, Check, Env


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def check_cache(env: Env) -> Check:
    from ..cache_prune import scan

    found = scan()
    live, stale, unknown = found.of("live"), found.of("stale"), found.of("unknown")
    summary = f"{found.folder}: {len(live)} live indexes ({_mb(found.size('live'))})"
    lines = [f"{e.path.name}: {e.folder} (gone)" for e in stale]
    if unknown:
        lines.append(
            f"{len(unknown)} files ({_mb(found.size('unknown'))}) record no folder that can be "
            "told, and are left alone: `memory-ls cache prune --dry-run` lists them"
        )
    if not stale:
        return Check(
            "cache",
            OK,
            summary + (f", {len(unknown)} unattributed" if unknown else ""),
            "\n".join(lines),
        )
    n = len(stale)
    what = "index of a folder that no longer exists" if n == 1 else "indexes of folders gone"
    summary = f"{n} {what} ({_mb(found.size('stale'))}); " + summary
    return Check("cache", WARN, summary, "\n".join(lines), "memory-ls cache prune")
