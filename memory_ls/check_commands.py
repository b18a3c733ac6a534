"""``memory-ls check``: the memory checks (duplicates, load caps, expired notes, front matter,
orphan topic files) over a workspace, for people, pre-commit hooks and CI. Its work is imported
when run: ``memory-ls --help`` stays fast."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SEVERITIES = ("error", "warning", "information", "hint")


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser(
        "check",
        parents=[common],
        help="find duplicated, expired and over-long memory and orphan topic files "
        "(exit 1 when a finding is at or above --fail-on)",
    )
    s.add_argument(
        "--fail-on",
        choices=SEVERITIES,
        default="warning",
        help="exit 1 when a finding is this serious or more (default warning)",
    )
    s.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from .engine import MemoryEngine
    from .hygiene import at_or_above
    from .index.schema import DatabaseError

    root = Path(args.workspace or ".").resolve()
    if not root.is_dir():
        print(f"memory-ls: workspace {root} is not a folder", file=sys.stderr)
        return 2
    with MemoryEngine(root, index_path=args.index) as engine:
        for problem in engine.problems:
            print(f"memory-ls: settings: {problem}", file=sys.stderr)
        try:  # keywords only, as a search syncs: the line vectors already stored are used
            engine.sync("check", embed=False)
        except (DatabaseError, OSError) as exc:
            print(f"memory-ls: the index could not be updated ({exc}); checking it as it is",
                  file=sys.stderr)  # fmt: skip
        found = engine.check()
    if args.json:
        print(json.dumps({"findings": [f.to_json() for f in found]}, ensure_ascii=False, indent=2))
    else:
        for f in found:
            print(f"{f.path}:{f.start_line}-{f.end_line}  {f.code}  {f.message}")
            for r in f.related:
                print(f"    see {r.citation}")
        counts: dict[str, int] = {}
        for f in found:
            counts[f.code] = counts.get(f.code, 0) + 1
        summary = ", ".join(f"{n} {code}" for code, n in sorted(counts.items()))
        print(f"{len(found)} findings" + (f": {summary}" if summary else ""), file=sys.stderr)
    return 1 if any(at_or_above(f.severity, args.fail_on) for f in found) else 0
