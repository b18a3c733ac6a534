"""Transcript folders outside the workspace (``sessions.roots``): their names, their files,
what is wrong with them, and which agents' folders exist on this machine.

A file under a root is keyed ``sessions:<name>/<path relative to the root>`` in the index, in
citations and in ``memory-ls get``, so a citation stays short and the same on every machine.
The root folder itself may be a symlink (the user named it); nothing below it may be.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .settings import Settings

log = logging.getLogger(__name__)

PREFIX = "sessions:"
SKIP_DIRS = {"node_modules", "__pycache__"}


@dataclass(frozen=True)
class Agent:
    name: str
    folder: str  # under $HOME
    globs: tuple[str, ...]
    layout: str  # where its transcripts are, for the snippet's comment


# The agents whose transcript folders ``memory-ls sessions detect`` looks for.
AGENTS = (
    Agent("openclaw", ".openclaw/agents", ("*/sessions/*.jsonl",), "<agent>/sessions/*.jsonl"),
    Agent("claude", ".claude/projects", ("**/*.jsonl",), "<project>/*.jsonl"),
    Agent("codex", ".codex/sessions", ("**/*.jsonl",), "YYYY/MM/DD/*.jsonl"),
)


@dataclass(frozen=True)
class Root:
    name: str
    folder: Path  # resolved
    given: str  # as configured, for messages
    globs: tuple[str, ...]
    expanded: Path  # as configured with ~ expanded: paths may name it so too

    def key(self, sub: str) -> str:
        return f"{PREFIX}{self.name}/{sub}"


def slug(text: str) -> str:
    """A citation-safe name: word characters, dots and dashes."""
    return re.sub(r"[^\w.\-]+", "-", text).strip("-.")


def default_name(folder: Path) -> str:
    """``claude`` for ~/.claude/projects (the agents' usual folders), else the folder's name."""
    for agent in AGENTS:
        if folder.parts[-2:] == tuple(agent.folder.split("/")):
            return agent.name
    return slug(folder.name) or "root"


def configured(settings: Settings) -> tuple[dict[str, Root], list[str]]:
    """The usable roots by name, and what is wrong with the others (they are skipped)."""
    roots: dict[str, Root] = {}
    problems: list[str] = []
    entries = settings.sessions.roots
    if entries and "sessions" not in settings.sources:
        problems.append("sessions.roots is set but `sources` does not include sessions: not read")
        return roots, problems
    for entry in entries:
        p = Path(entry.path).expanduser()
        if not p.is_absolute():
            problems.append(f"sessions.roots: {entry.path}: not absolute (nor ~); ignored")
            continue
        name = slug(entry.name) if entry.name else default_name(p)
        if entry.name and name != entry.name:
            problems.append(f"sessions.roots: name {entry.name!r}: use letters, digits, . - _")
            continue
        if name in roots:
            problems.append(
                f"sessions.roots: {entry.path}: the name {name!r} is taken by "
                f"{roots[name].given}; give one of them a `name`"
            )
            continue
        roots[name] = Root(name, p.resolve(), entry.path, tuple(entry.globs), p)
    return roots, problems


def problem(root: Root) -> str | None:
    """Why a root cannot be read now (missing, a file, unreadable), None when it can."""
    where = f"sessions.roots {root.name} ({root.given})"
    try:
        with os.scandir(root.folder):
            return None
    except FileNotFoundError:
        return f"{where}: no such folder"
    except NotADirectoryError:
        return f"{where}: is a file, not a folder"
    except OSError as exc:
        return f"{where}: cannot read it ({exc.strerror or exc})"


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as ``Path.glob`` reads it: ``*`` and ``?`` stay within a folder, ``**/`` spans
    any number of them (none included)."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:[^/]+/)*", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:  # a character class, as fnmatch
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            out += "[^" + body[1:] + "]" if body[0] == "!" else "[" + body + "]"
            i = end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def _hidden(parts: list[str]) -> bool:
    return any(x.startswith(".") or x in SKIP_DIRS for x in parts)


def matches(root: Root, sub: str) -> bool:
    """True when ``sub`` (relative to the root) is one of its transcripts by name."""
    parts = sub.split("/")
    if not sub.endswith(".jsonl") or "" in parts or ".." in parts or _hidden(parts[:-1]):
        return False
    return any(glob_regex(g).fullmatch(sub) for g in root.globs)


def files(root: Root) -> list[tuple[str, Path]]:
    """(index key, absolute path) of the root's transcripts, regular files reached through no
    symlink below the root."""
    found: dict[str, Path] = {}
    for pattern in root.globs:
        if Path(pattern).is_absolute() or ".." in pattern.split("/"):
            log.warning("sessions.roots %s: glob %s is not relative to it", root.name, pattern)
            continue
        for p in root.folder.glob(pattern):
            sub = p.relative_to(root.folder).as_posix()
            if sub in found or not matches(root, sub):
                continue
            chain = [p, *list(p.parents)[: sub.count("/")]]
            if any(q.is_symlink() for q in chain) or not p.is_file():
                continue
            found[sub] = p
    return [(root.key(sub), found[sub]) for sub in sorted(found)]


def detect(home: Path) -> list[tuple[Agent, Path, int]]:
    """The agents' transcript folders that exist under ``home``, with how many transcripts."""
    out = []
    for agent in AGENTS:
        folder = home / agent.folder
        if folder.is_dir():
            root = Root(agent.name, folder.resolve(), str(folder), agent.globs, folder)
            out.append((agent, folder, len(files(root))))
    return out


def snippet(found: list[tuple[Agent, Path, int]], home: Path) -> str:
    """The TOML to paste into .memory-ls.toml (or ~/.config/memory-ls/config.toml)."""
    lines = ['sources = ["memory", "sessions"]']
    for agent, folder, count in found:
        try:
            shown = "~/" + folder.relative_to(home).as_posix()
        except ValueError:
            shown = str(folder)
        lines += [
            "",
            f"# {agent.name}: {count} transcript{'' if count == 1 else 's'} "
            f"({shown}/{agent.layout})",
            "[[sessions.roots]]",
            f'path = "{shown}"',
            "globs = [" + ", ".join(f'"{g}"' for g in agent.globs) + "]",
        ]
    return "\n".join(lines) + "\n"
