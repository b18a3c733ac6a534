"""Run the checks in order and render them: text for a terminal, JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from .cache import check_cache
from .check import FAIL, OK, WARN, Check, Env
from .clients import check_agents, check_editors
from .local_model import check_models
from .providers import check_providers
from .runtime import check_llama, check_python, check_sqlite
from .team import check_team
from .workspace_index import check_index, check_settings

CHECKS: tuple[tuple[str, Callable[[Env], Check]], ...] = (
    ("python", check_python),
    ("sqlite", check_sqlite),
    ("llama.cpp", check_llama),
    ("settings", check_settings),
    ("models", check_models),
    ("index", check_index),
    ("team", check_team),
    ("providers", check_providers),
    ("editors", check_editors),
    ("agents", check_agents),
    ("cache", check_cache),
)
MARKS = {OK: "[ ok ]", WARN: "[warn]", FAIL: "[FAIL]"}


def run_checks(env: Env) -> list[Check]:
    """Every check's finding; a check that raises is a failed check saying so, and the others
    still run (a doctor that dies of what it inspects explains nothing)."""
    out = []
    for name, check in CHECKS:
        try:
            out.append(check(env))
        except Exception as exc:
            said = f"the check itself failed: {type(exc).__name__}: {exc}"
            out.append(Check(name, FAIL, said, fix="run with -v and report it as a memory-ls bug"))
    return out


def passed(checks: Sequence[Check]) -> bool:
    return all(c.status != FAIL for c in checks)


def render_json(checks: Sequence[Check]) -> str:
    return json.dumps({"checks": [c.to_json() for c in checks], "ok": passed(checks)}, indent=2)


def render_text(checks: Sequence[Check], *, details: bool = False) -> str:
    """A line a check, then (when not ok) its detail and its fix, indented."""
    width = max(len(c.id) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{MARKS.get(c.status, c.status)} {c.id:<{width}}  {c.summary}")
        pad = " " * (len(MARKS[OK]) + 1)
        if c.detail and (details or c.status != OK):
            lines += [f"{pad}{line}" for line in c.detail.splitlines()]
        for i, line in enumerate(c.fix.splitlines() if c.status != OK else ()):
            lines.append(f"{pad}{'fix: ' if i == 0 else '     '}{line}")
    failed = sum(c.status == FAIL for c in checks)
    warned = sum(c.status == WARN for c in checks)
    lines.append(f"\n{len(checks)} checks: {failed} failed, {warned} warnings")
    return "\n".join(lines)
