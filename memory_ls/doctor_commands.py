"""``memory-ls doctor`` (check and explain) and ``memory-ls cache prune`` (remove the indexes of
folders that are gone). Both import their work when run: ``memory-ls --help`` stays fast."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """doctor, and cache prune."""
    s = sub.add_parser(
        "doctor",
        parents=[common],
        help="check Python, SQLite, llama.cpp, models, the index, the team database, providers, "
        "editors, agents and the cache; say how to fix each problem (exit 1 when one failed)",
    )
    online = "also send one tiny embedding request to the remote provider in use"
    s.add_argument("--online", action="store_true", help=online)
    s.set_defaults(func=cmd_doctor)

    s = sub.add_parser("cache", help="the cache folder ($XDG_CACHE_HOME/memory-ls)")
    prune = s.add_subparsers(dest="cache_cmd", required=True).add_parser(
        "prune",
        help="remove the indexes of workspace folders that no longer exist (never another file)",
    )
    prune.add_argument("--dry-run", action="store_true", help="list what would go; remove nothing")
    prune.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=cmd_cache)


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import Env, render_json, render_text, run_checks
    from .engine.memory_engine import resolve_paths
    from .settings import load

    root = Path(args.workspace or ".").resolve()
    if not root.is_dir():
        print(f"memory-ls: workspace {root} is not a folder", file=sys.stderr)
        return 2
    settings, problems = load(root)
    env = Env(root, resolve_paths(settings, root), problems, online=args.online)
    env.index = Path(args.index).expanduser() if args.index else None
    checks = run_checks(env)
    print(render_json(checks) if args.json else render_text(checks, details=args.verbose))
    return 0 if all(c.status != "fail" for c in checks) else 1


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def cmd_cache(args: argparse.Namespace) -> int:
    from .cache_prune import prune

    found, removed = prune(dry_run=args.dry_run)
    unknown = found.of("unknown")
    freed = sum(e.size for e in removed)
    if args.json:
        out = {
            "folder": str(found.folder),
            "dryRun": args.dry_run,
            "removed": [e.to_json() for e in removed],
            "bytesFreed": freed,
            "kept": [e.to_json() for e in found.entries if e.state == "live"],
            "unknown": [e.to_json() for e in unknown],
        }
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    verb = "would remove" if args.dry_run else "removed"
    for e in removed:
        print(f"{verb} {e.path.name} ({_mb(e.size)}): {e.folder} no longer exists")
    for e in unknown:
        print(f"left   {e.path.name} ({_mb(e.size)}): {e.why}")
    live = len(found.of("live"))
    print(
        f"{found.folder}: {verb} {len(removed)} indexes, {freed} bytes ({_mb(freed)}); "
        f"{live} of existing folders kept, {len(unknown)} unattributed left alone"
    )
    return 0
