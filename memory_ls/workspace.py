"""Which files are memory, and path safety (no escape outside the roots, no symlinks)."""

from __future__ import annotations

import fnmatch
import logging
import os
import posixpath
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from . import roots
from .settings import Settings

log = logging.getLogger(__name__)

ROOT_FILES = ("MEMORY.md", "memory.md")
MEMORY_DIR = "memory"
SKIP_DIRS = roots.SKIP_DIRS


class PathError(ValueError):
    """A path that is not memory of this workspace (outside the roots, a symlink, not .md)."""


@dataclass(frozen=True)
class MemoryFile:
    path: str  # the key everywhere in the index: workspace-relative with forward slashes, or
    # <kind>:<root name>/<path under that root> for a file under sessions.roots or memory.roots
    abs_path: Path
    source: str  # "memory" | "sessions"

    @property
    def folders(self) -> int:
        """The folders between the file and its root folder (none of them may be a symlink;
        the root may: a root is resolved when read, the workspace when opened)."""
        return self.path.count("/") - (roots.split(self.path) is not None)


class Found(list[MemoryFile]):
    """The memory files of one walk, sorted by path, and ``skipped``: what the walk passed over
    and why (``memory/x.md: symlink``), each once, sorted. None of those was followed or
    opened: a symlink's target may be anywhere, and opening a FIFO waits for a writer."""

    def __init__(self, files: Iterable[MemoryFile] = (), skipped: Iterable[str] = ()):
        super().__init__(files)
        self.skipped = sorted(set(skipped))


def shown(key: str) -> str:
    """A path as text any output can carry: bytes of a name that are not UTF-8 as ``\\xNN``."""
    try:
        return key.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        return key.encode("utf-8", "backslashreplace").decode("utf-8")


_KINDS = (
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISDIR, "folder"),
)


def not_regular(mode: int) -> str:
    """Why a file of this mode (from lstat, or fstat) is not read: ``symlink`` or
    ``not a regular file (FIFO)``, a socket, a device..."""
    if stat.S_ISLNK(mode):
        return "symlink"
    kind = next((name for test, name in _KINDS if test(mode)), "unknown type")
    return f"not a regular file ({kind})"


def _skip_dir(name: str) -> bool:
    return name.startswith(".") or name in SKIP_DIRS


def _utf8(key: str) -> bool:
    """False for a name that is not UTF-8 on disk (Python keeps its bytes as lone surrogates):
    SQLite, JSON and URIs cannot carry it, and it failed the whole sync."""
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _walk_md(folder: Path, rel: str, skipped: list[str]) -> list[tuple[str, Path]]:
    """(relative path, absolute path) of the Markdown files under ``folder``, sorted; what is
    neither a file nor a folder (a symlink, a FIFO, a socket, a device: it might be a note or a
    folder of notes, and is not looked into) and folders that cannot be listed go to
    ``skipped``, as "path: why". Hidden names and SKIP_DIRS are passed over without a word.

    os.scandir answers "is this a directory / a symlink" from the directory listing itself,
    which keeps a no-op sync of 10k files well under a second (Path.resolve per file did not).
    """
    found: list[tuple[str, Path]] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        log.warning("cannot list %s: %s", folder, exc)
        skipped.append(f"{shown(rel)}: cannot list ({exc.strerror or exc})")
        return found
    for entry in entries:
        name = entry.name
        if name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            if name not in SKIP_DIRS:
                found += _walk_md(Path(entry.path), f"{rel}/{name}", skipped)
        elif entry.is_file(follow_symlinks=False):
            if name.endswith(".md"):
                found.append((f"{rel}/{name}", Path(entry.path)))
        else:
            try:  # lstat: nothing is followed or opened
                why = not_regular(entry.stat(follow_symlinks=False).st_mode)
            except OSError:  # gone since the listing
                continue
            skipped.append(f"{shown(f'{rel}/{name}')}: {why}")
    return found


class Workspace:
    """The memory files of one workspace folder."""

    def __init__(self, root: Path, settings: Settings):
        self.root = root.resolve()
        # As it was opened: paths through a symlinked workspace folder (/tmp on macOS, a synced
        # folder) are its files too; they were "outside the workspace" for memory/get.
        opened = Path(os.path.abspath(root))
        # abspath drops "link/.." by its spelling: then it names another folder, not this one.
        self.opened = opened if opened.resolve() == self.root else self.root
        self.settings = settings
        # sessions.roots and memory.roots, by their keys' start (``memory:openclaw``)
        self.roots, self.config_problems = roots.configured(settings, self.root)
        self._told: set[str] = set()  # the skips logged: each once, not at every sync

    def root_problems(self) -> list[str]:
        """What is wrong with sessions.roots and memory.roots now: their configuration, then
        each root that is missing, a file or unreadable (its files are not indexed meanwhile)."""
        now = (roots.problem(r) for r in self.roots.values())
        return self.config_problems + [p for p in now if p]

    def root_of(self, key: str) -> tuple[roots.Root, str] | None:
        """(root, path under it) of a key under a configured root, None for the others."""
        parts = roots.split(key)
        r = self.roots.get(parts[0]) if parts else None
        return (r, parts[1]) if r is not None and parts is not None else None

    def key_of(self, p: Path) -> str | None:
        """The index key of a normalised absolute path, None outside the workspace and roots.
        A transcript of a root inside the workspace gets the root's key."""
        rooted = self._root_key(p)
        if rooted is not None and rooted[1]:
            return rooted[0]
        for base in (self.root, self.opened):
            try:
                return p.relative_to(base).as_posix()
            except ValueError:
                continue
        return rooted[0] if rooted else None

    def _root_key(self, p: Path) -> tuple[str, bool] | None:
        """(key, whether it is one of the root's files) of a path under a root: of the root
        whose file it is when roots nest (a Claude Code project's memory folder lies in the
        transcripts' ~/.claude/projects), else of the first root it is under."""
        first = None
        for r in self.roots.values():
            for base in (r.folder, r.expanded):
                try:
                    sub = p.relative_to(base).as_posix()
                except ValueError:
                    continue
                if roots.matches(r, sub):
                    return r.key(sub), True
                first = first or (r.key(sub), False)
        return first

    def file_path(self, key: str) -> Path:
        """The absolute path of an index key (one under a root, or workspace-relative)."""
        rooted = self.root_of(key)
        return rooted[0].folder / rooted[1] if rooted else self.root / key

    def outside_file(self, key: str) -> Path | None:
        """The file of a key under sessions.roots or memory.roots (for its URI), None for the
        others."""
        return self.file_path(key) if roots.split(key) else None

    def rel(self, p: Path) -> str:
        return p.relative_to(self.root).as_posix()

    def relative(self, path: str | Path) -> str:
        """A user-given path as a workspace path; one outside the root is returned as given."""
        p = Path(path)
        if p.is_absolute():
            return self.key_of(Path(os.path.normpath(p))) or self.key_of(p.resolve()) or str(p)
        text = p.as_posix()
        if (parts := roots.split(text)) is not None:  # "sessions:name/.." stays one of a root
            base, sub = parts
            norm = posixpath.normpath(sub) if sub else ""
            return text if norm.startswith("..") or norm == "." else f"{base}/{norm}"
        # The key hits and citations use: "memory/../MEMORY.md" was answered under that name.
        return self.key_of(Path(os.path.normpath(self.root / p))) or text

    def discover(self) -> Found:
        """Every memory file, sorted by path (sessions only when that source is on), and what
        was skipped: each reported in every walk's ``skipped``, logged the first time."""
        files: dict[str, MemoryFile] = {}
        skipped: list[str] = []
        if "memory" in self.settings.sources:
            self._notes(files, skipped)
        if "sessions" in self.settings.sources:
            self._transcripts(files, skipped)
        for r in self.roots.values():
            trouble = roots.problem(r)
            if trouble:
                log.warning("%s", trouble)
                continue
            for key, p in roots.files(r):
                files.setdefault(key, MemoryFile(key, p, r.kind.name))
        for key in [k for k in files if not _utf8(k)]:
            del files[key]
            skipped.append(f"{shown(key)}: its name is not UTF-8")
        found = Found([files[k] for k in sorted(files)], skipped)
        for s in found.skipped:
            if s not in self._told:
                self._told.add(s)
                log.warning("skipping %s", s)
        return found

    def _add(self, files: dict[str, MemoryFile], skipped: list[str], p: Path, source: str) -> None:
        """A file found by name (a root note, an extraPaths file, a glob's transcript): added
        if it is a regular file inside the workspace, else skipped, saying why."""
        try:
            rel = self.rel(p.resolve() if not p.is_symlink() else p)
            mode = p.lstat().st_mode
        except ValueError:
            log.warning("skipping %s: outside the workspace", p)
            return
        except OSError:  # gone since it was listed
            return
        if not stat.S_ISREG(mode):
            skipped.append(f"{shown(rel)}: {not_regular(mode)}")
            return
        files.setdefault(rel, MemoryFile(rel, self.root / rel, source))

    def _notes(self, files: dict[str, MemoryFile], skipped: list[str]) -> None:
        """MEMORY.md, memory/**/*.md and extraPaths."""
        try:
            listed = set(os.listdir(self.root))
        except OSError:
            listed = set()
        for name in ROOT_FILES:
            # On case-insensitive file systems MEMORY.md and memory.md are one file.
            if name in listed:
                self._add(files, skipped, self.root / name, "memory")
        mem = self.root / MEMORY_DIR
        if mem.is_symlink():
            skipped.append(f"{MEMORY_DIR}: symlink")
        elif mem.is_dir():
            for rel, p in _walk_md(mem, MEMORY_DIR, skipped):
                files.setdefault(rel, MemoryFile(rel, p, "memory"))
        for extra in self.settings.extra_paths:
            p = (self.root / extra).expanduser()
            if p.is_symlink():
                skipped.append(f"{shown(extra)}: symlink")
            elif p.is_dir():
                try:
                    base = self.rel(p.resolve())
                except ValueError:
                    log.warning("extraPaths: %s is outside the workspace; skipped", extra)
                    continue
                for rel, q in _walk_md(p, base, skipped):
                    files.setdefault(rel, MemoryFile(rel, q, "memory"))
            elif p.suffix == ".md":
                self._add(files, skipped, p, "memory")

    def _transcripts(self, files: dict[str, MemoryFile], skipped: list[str]) -> None:
        """The transcripts sessions.globs match (those of sessions.roots: ``discover``)."""
        for pattern in self.settings.sessions.globs:
            if Path(pattern).is_absolute():  # Path.glob raises on these: skip, never fail
                log.warning("sessions.globs: %s is not relative to the workspace", pattern)
                continue
            for p in sorted(self.root.glob(pattern)):
                # Only the folders below the workspace: one above it may be hidden too
                # (OpenClaw's is ~/.openclaw/workspace), which skipped every transcript.
                below = p.relative_to(self.root).parts[:-1]
                if p.suffix != ".jsonl" or any(_skip_dir(x) for x in below):
                    continue
                # A root's own transcript: its walk below adds it under the root's key.
                if (rooted := self._root_key(p)) is None or not rooted[1]:
                    self._add(files, skipped, p, "sessions")

    def classify(self, rel: str) -> MemoryFile | None:
        """The MemoryFile for an index key (a workspace-relative path, or a file under
        sessions.roots or memory.roots) if it is memory, else None."""
        if not _utf8(rel):
            return None
        if roots.split(rel) is not None:
            rooted = self.root_of(rel)
            if rooted is None or not roots.matches(*rooted):
                return None
            r, sub = rooted
            return MemoryFile(rel, r.folder / sub, r.kind.name)
        if rel.startswith("/") or ".." in rel.split("/"):
            return None
        parts = rel.split("/")
        if any(_skip_dir(x) for x in parts[:-1]):
            return None
        if "memory" in self.settings.sources and rel.endswith(".md"):
            # A hidden note in a folder is not walked (``_walk_md``): taken here, a watcher's
            # event indexed it and the next full sync dropped it again.
            walked = not parts[-1].startswith(".")
            if rel in ROOT_FILES or (parts[0] == MEMORY_DIR and walked):
                return MemoryFile(rel, self.root / rel, "memory")
            for extra in self.settings.extra_paths:
                e = extra.strip("/").removeprefix("./")
                if rel == e or (rel.startswith(e + "/") and walked):
                    return MemoryFile(rel, self.root / rel, "memory")
        if "sessions" in self.settings.sources and rel.endswith(".jsonl"):
            for pattern in self.settings.sessions.globs:
                if (
                    fnmatch.fnmatch(rel, pattern)
                    or Path(rel).match(pattern)
                    or roots.glob_regex(pattern).fullmatch(rel)  # **/ as the walk reads it
                ):
                    return MemoryFile(rel, self.root / rel, "sessions")
        return None

    def is_memory_file(self, mf: MemoryFile) -> bool:
        """True when a classified path exists on disk as a regular file inside the root."""
        p = mf.abs_path
        if p.is_symlink() or not p.is_file():
            return False
        return not any(q.is_symlink() for q in list(p.parents)[: mf.path.count("/")])

    def resolve(self, path: str | Path) -> MemoryFile:
        """A user-given path (absolute or relative) -> MemoryFile, or PathError saying why."""
        text = str(path)
        if (parts := roots.split(text)) is not None:
            if parts[0] not in self.roots:
                kind, _, name = parts[0].partition(":")
                raise PathError(f"{path}: no {kind}.roots entry is named {name!r}")
            p = self.file_path(text)
        else:
            p = Path(path) if Path(path).is_absolute() else self.root / path
        p = Path(os.path.normpath(p))
        rel = self.key_of(p)
        if rel is None:
            kinds = sorted({f"{r.kind.name}.roots" for r in self.roots.values()})
            also = "".join(f" and {k}" for k in kinds)
            raise PathError(f"{path}: outside the workspace {self.root}{also}")
        p = self.file_path(rel)  # under the resolved root folder
        # A symlinked folder on the way would let a read escape the workspace (or the root).
        try:
            linked = any(q.is_symlink() for q in [p, *list(p.parents)[: rel.count("/")]])
        except OSError as exc:  # a name too long for the file system, say
            raise PathError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        if linked:
            raise PathError(f"{path}: symlinks are not memory")
        found = self.classify(rel)
        if found is None and roots.split(rel) is not None:
            raise PathError(f"{path}: not a memory file (not matched by its root's globs)")
        if found is None:
            raise PathError(f"{path}: not a memory file (MEMORY.md, memory.md, memory/**/*.md)")
        return found
