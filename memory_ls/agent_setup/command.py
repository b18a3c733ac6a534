"""``memory-ls setup <agent>``: print what the agent needs; with ``--write``, show the diff,
ask, back up and merge."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..roots import SESSIONS, detect, snippet
from . import claude_code, claude_desktop, codex, cursor, openclaw
from .change import Change, SetupError, write
from .server import hook_argv, mcp_server

Plan = Callable[[dict[str, Any], list[str], Path, Path], tuple[list[str], list[Change]]]

# agent -> (its config format, the sessions.roots agent whose transcripts it writes)
TARGETS: dict[str, tuple[Plan, str | None]] = {
    "claude-code": (claude_code.plan, "claude"),
    "codex": (codex.plan, "codex"),
    "openclaw": (openclaw.plan, "openclaw"),
    "claude-desktop": (claude_desktop.plan, None),
    "cursor": (cursor.plan, None),
}


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "setup",
        help="print an agent's MCP entry, session hook and transcript root; --write merges "
        "them into its config (diff, confirmation, backup)",
    )
    s.add_argument("agent", choices=list(TARGETS), help="the agent to set up")
    s.add_argument("--workspace", "-w", default=".", help="workspace folder (default: .)")
    s.add_argument("--write", action="store_true", help="merge into the agent's config files")
    s.add_argument("--yes", action="store_true", help="with --write: do not ask")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=cmd_setup)


def sessions_root(name: str | None, home: Path) -> str | None:
    """The sessions.roots TOML for the agent's transcripts (roots knows the folders)."""
    agent = next((a for a in SESSIONS.agents if a.name == name), None)
    if agent is None:
        return None
    found = {a.name: (a, f, n) for a, f, n in detect(home)}
    return snippet([found.get(agent.name, (agent, home / agent.folder, 0))], home)


def report(
    args: argparse.Namespace,
    server: dict[str, Any],
    text: list[str],
    root: str | None,
    changes: list[Change],
    written: dict[Path, Path | None],
) -> None:
    if args.json:
        out = {
            "agent": args.agent,
            "mcpServer": server,
            "instructions": text,
            "sessionsRoots": root,
            "files": [
                {
                    "path": str(c.path),
                    "changed": c.changed,
                    "diff": c.diff() if c.changed else "",
                    "notes": list(c.notes),
                    "written": c.path in written,
                    "backup": str(written[c.path]) if written.get(c.path) else None,
                }
                for c in changes
            ],
        }
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return
    print("\n".join(text))
    if root:
        print(
            "Transcripts (sessions.roots, in .memory-ls.toml or ~/.config/memory-ls/config.toml):"
        )
        print("".join(f"  {line}\n" if line else "\n" for line in root.splitlines()), end="")
    for c in changes:
        if c.path in written:
            backup = written[c.path]
            print(f"wrote {c.path}" + (f" (backup: {backup})" if backup else " (new file)"))
        elif not args.write:
            print(
                f"{c.path}: {'would change: run with --write' if c.changed else 'already set up'}"
            )
    for c in changes:
        for note in c.notes:
            print(f"note: {note}", file=sys.stderr)


def confirmed(args: argparse.Namespace) -> bool | None:
    """True to go on, False when the user said no, None when no one can be asked."""
    if args.yes:
        return True
    if not (sys.stdin and sys.stdin.isatty()):
        return None
    try:
        return input("Write these changes? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def cmd_setup(args: argparse.Namespace) -> int:
    workspace = Path(args.workspace).expanduser().resolve()
    if not workspace.is_dir():
        print(f"memory-ls: workspace {workspace} is not a folder", file=sys.stderr)
        return 2
    plan, transcripts = TARGETS[args.agent]
    home = Path.home()
    server = mcp_server(workspace)
    try:
        text, changes = plan(server, hook_argv(workspace), workspace, home)
    except SetupError as exc:
        print(f"memory-ls: {exc}", file=sys.stderr)
        return 2
    root = sessions_root(transcripts, home)
    written: dict[Path, Path | None] = {}
    pending = [c for c in changes if c.changed]
    if args.write and not pending:
        report(args, server, text, root, changes, written)
        if not args.json:
            print(
                "nothing to change: " + ", ".join(str(c.path) for c in changes) + " already set up"
            )
        return 0
    if args.write:
        if not args.json:
            sys.stdout.write("".join(c.diff() for c in pending))
        sys.stdout.flush()
        answer = confirmed(args)
        if answer is None:
            print(
                "memory-ls: setup --write changes files: run it on a terminal to confirm, "
                "or add --yes; nothing was written",
                file=sys.stderr,
            )
            return 2
        if not answer:
            print("memory-ls: nothing was written", file=sys.stderr)
            return 1
        for c in pending:
            written[c.path] = write(c)
    report(args, server, text, root, changes, written)
    return 0
