"""Folders outside the workspace that agents keep for themselves, opted in by path: transcript
folders (``sessions.roots``) and memory folders (``memory.roots``). Their names, their files,
what is wrong with them, and which agents' folders exist on this machine.

A file under a root is keyed ``<kind>:<name>/<path relative to the root>`` in the index, in
citations and in ``memory-ls get`` (``sessions:claude/<project>/<id>.jsonl``,
``memory:openclaw/memory/2026-01-10.md``), so a citation stays short and the same on every
machine. The root folder itself may be a symlink (the user named it); nothing below it may be.
Nothing is ever written under a root.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .settings import Settings

log = logging.getLogger(__name__)

SKIP_DIRS = {"node_modules", "__pycache__"}


@dataclass(frozen=True)
class Agent:
    name: str
    folder: str  # under $HOME; a "*" part: one root per folder it matches, named after it
    globs: tuple[str, ...]
    layout: str  # what is where under it, for the snippet's comment


@dataclass(frozen=True)
class Kind:
    name: str  # its settings section (``<name>.roots``), its files' source, its key prefix
    suffix: str  # the files it reads
    noun: str  # what the snippet counts
    agents: tuple[Agent, ...]  # whose folders ``memory-ls sessions detect`` looks for

    @property
    def prefix(self) -> str:
        return f"{self.name}:"


SESSIONS = Kind(
    "sessions",
    ".jsonl",
    "transcript",
    (
        Agent("openclaw", ".openclaw/agents", ("*/sessions/*.jsonl",), "<agent>/sessions/*.jsonl"),
        Agent("claude", ".claude/projects", ("**/*.jsonl",), "<project>/*.jsonl"),
        Agent("codex", ".codex/sessions", ("**/*.jsonl",), "YYYY/MM/DD/*.jsonl"),
    ),
)
MEMORY = Kind(
    "memory",
    ".md",
    "note",
    (
        # https://docs.openclaw.ai/concepts/memory: MEMORY.md and memory/YYYY-MM-DD.md in the
        # agent's workspace; its other files (AGENTS.md, SOUL.md, ...) are instructions.
        Agent(
            "openclaw",
            ".openclaw/workspace",
            ("MEMORY.md", "memory.md", "memory/**/*.md"),
            "MEMORY.md, memory/*.md",
        ),
        # https://code.claude.com/docs/en/memory (Auto memory): MEMORY.md, the index loaded at
        # every start, and the topic files it links to.
        Agent("claude", ".claude/projects/*/memory", ("**/*.md",), "MEMORY.md and topic files"),
    ),
)
KINDS = (SESSIONS, MEMORY)
PREFIXES = tuple(k.prefix for k in KINDS)


@dataclass(frozen=True)
class Root:
    kind: Kind
    name: str
    folder: Path  # resolved
    given: str  # as configured, for messages
    globs: tuple[str, ...]
    expanded: Path  # as configured with ~ expanded: paths may name it so too

    @property
    def base(self) -> str:
        """``sessions:claude``: what its keys start with, before the first ``/``."""
        return f"{self.kind.prefix}{self.name}"

    @property
    def label(self) -> str:
        return f"{self.kind.name}.roots {self.name} ({self.given})"

    def key(self, sub: str) -> str:
        return f"{self.base}/{sub}"


def split(key: str) -> tuple[str, str] | None:
    """(root base, path under the root) of a key under a root; None for a workspace path."""
    if not key.startswith(PREFIXES):
        return None
    base, _, sub = key.partition("/")
    return base, sub


def slug(text: str) -> str:
    """A citation-safe name: word characters, dots and dashes."""
    return re.sub(r"[^\w.\-]+", "-", text).strip("-.")


def _project(part: str, home: Path) -> str:
    """A Claude Code project folder's name without the home folder it starts with (Claude
    names ``/home/me/src/app``'s folder ``-home-me-src-app``): ``src-app``."""
    encoded = re.sub(r"[^A-Za-z0-9]", "-", str(home))
    if part == encoded:
        return "home"
    return part.removeprefix(encoded + "-") if part.startswith(encoded + "-") else part


def default_name(kind: Kind, folder: Path, home: Path | None = None) -> str:
    """``claude`` for ~/.claude/projects and ``claude-<project>`` for a project's memory folder
    (the agents' usual folders), else the folder's name."""
    for agent in kind.agents:
        pattern = agent.folder.split("/")
        tail = folder.parts[-len(pattern) :]
        if len(tail) == len(pattern) and all(map(fnmatch.fnmatchcase, tail, pattern)):
            wild = [
                _project(p, home or Path.home())
                for p, q in zip(tail, pattern, strict=True)
                if "*" in q
            ]
            return "-".join([agent.name, *filter(None, map(slug, wild))])
    return slug(folder.name) or "root"


def configured(
    settings: Settings, workspace: Path | None = None
) -> tuple[dict[str, Root], list[str]]:
    """The usable roots of every kind by ``base``, and what is wrong with the others (they are
    skipped). A memory root that is, holds or lies in the workspace folder ``workspace`` is
    one of them: its notes would be read twice, under two names."""
    roots: dict[str, Root] = {}
    problems: list[str] = []
    for kind in KINDS:
        entries = getattr(settings, kind.name).roots
        what = f"{kind.name}.roots"
        if entries and kind.name not in settings.sources:
            problems.append(f"{what} is set but `sources` does not include {kind.name}: not read")
            continue
        for entry in entries:
            p = Path(entry.path).expanduser()
            if not p.is_absolute():
                problems.append(f"{what}: {entry.path}: not absolute (nor ~); ignored")
                continue
            name = slug(entry.name) if entry.name else default_name(kind, p)
            if entry.name and name != entry.name:
                problems.append(f"{what}: name {entry.name!r}: use letters, digits, . - _")
                continue
            root = Root(kind, name, p.resolve(), entry.path, tuple(entry.globs), p)
            if root.base in roots:
                problems.append(
                    f"{what}: {entry.path}: the name {name!r} is taken by "
                    f"{roots[root.base].given}; give one of them a `name`"
                )
                continue
            overlap = _overlap(root.folder, workspace) if kind is MEMORY else None
            if overlap:
                problems.append(f"{what}: {entry.path}: {overlap}; ignored")
                continue
            roots[root.base] = root
    return roots, problems


def _overlap(folder: Path, workspace: Path | None) -> str | None:
    if workspace is None:
        return None
    ws = workspace.resolve()
    if folder == ws:
        return "is the workspace folder, whose notes are read already"
    if ws in folder.parents:
        return "is inside the workspace folder (list it in `extraPaths` instead)"
    if folder in ws.parents:
        return "holds the workspace folder, whose notes are read already"
    return None


def problem(root: Root) -> str | None:
    """Why a root cannot be read now (missing, a file, unreadable), None when it can."""
    try:
        with os.scandir(root.folder):
            return None
    except FileNotFoundError:
        return f"{root.label}: no such folder"
    except NotADirectoryError:
        return f"{root.label}: is a file, not a folder"
    except OSError as exc:
        return f"{root.label}: cannot read it ({exc.strerror or exc})"


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
    """True when ``sub`` (relative to the root) is one of its files by name (a hidden note is
    not, as in the workspace)."""
    parts = sub.split("/")
    named = parts if root.kind is MEMORY else parts[:-1]
    if not sub.endswith(root.kind.suffix) or "" in parts or ".." in parts or _hidden(named):
        return False
    return any(glob_regex(g).fullmatch(sub) for g in root.globs)


def files(root: Root) -> list[tuple[str, Path]]:
    """(index key, absolute path) of the root's files, regular files reached through no
    symlink below the root."""
    found: dict[str, Path] = {}
    for pattern in root.globs:
        if Path(pattern).is_absolute() or ".." in pattern.split("/"):
            log.warning("%s: glob %s is not relative to it", root.label, pattern)
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


Found = list[tuple[Agent, Path, int]]


def detect(home: Path, kind: Kind = SESSIONS) -> Found:
    """The agents' folders of this kind that exist under ``home``, with how many files."""
    out = []
    for agent in kind.agents:
        for folder in sorted(home.glob(agent.folder)):
            if folder.is_dir() and not folder.is_symlink():
                name = default_name(kind, folder, home)
                root = Root(kind, name, folder.resolve(), str(folder), agent.globs, folder)
                out.append((agent, folder, len(files(root))))
    return out


def snippet(found: Found, home: Path, kind: Kind = SESSIONS) -> str:
    """The TOML to paste into .memory-ls.toml (or ~/.config/memory-ls/config.toml)."""
    lines = ['sources = ["memory", "sessions"]'] if kind is SESSIONS else []
    for agent, folder, count in found:
        try:
            shown = "~/" + folder.relative_to(home).as_posix()
        except ValueError:
            shown = str(folder)
        many = "" if count == 1 else "s"
        cited = f"{kind.prefix}{default_name(kind, folder, home)}/"
        lines += [
            "",
            f"# {agent.name}: {count} {kind.noun}{many} ({shown}: {agent.layout}), cited {cited}"
            if kind is MEMORY
            else f"# {agent.name}: {count} {kind.noun}{many} ({shown}/{agent.layout})",
            f"[[{kind.name}.roots]]",
            f"path = {json.dumps(shown, ensure_ascii=False)}",
            "globs = [" + ", ".join(json.dumps(g) for g in agent.globs) + "]",
        ]
    return "\n".join(lines).lstrip("\n") + "\n"
