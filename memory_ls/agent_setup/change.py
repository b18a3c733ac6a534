"""A planned change of one config file, its diff, and writing it safely."""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


class SetupError(Exception):
    """A config file memory-ls will not edit (unreadable, or not in the format it expects);
    ``str()`` says why and what to do by hand."""


@dataclass(frozen=True)
class Change:
    path: Path
    before: str | None  # None: the file does not exist yet
    after: str
    notes: tuple[str, ...] = ()  # what was left alone, and why

    @property
    def changed(self) -> bool:
        return self.after != (self.before or "") or self.before is None

    def diff(self) -> str:
        old = (self.before or "").splitlines(keepends=True)
        new = self.after.splitlines(keepends=True)
        src = str(self.path) if self.before is not None else "/dev/null"
        lines = difflib.unified_diff(old, new, src, str(self.path))
        return "".join(x if x.endswith("\n") else x + "\n" for x in lines)


def read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SetupError(f"{path}: cannot read it ({exc})") from exc


def backup_path(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.memory-ls-backup-{stamp}")
    n = 2
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.memory-ls-backup-{stamp}-{n}")
        n += 1
    return candidate


def write(change: Change) -> Path | None:
    """Back the file up (when it exists), then replace it whole: a crash or a full disk leaves
    the old file or the new one, never half of one. Returns the backup's path."""
    path = change.path
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if change.before is not None:
        backup = backup_path(path)
        shutil.copy2(path, backup)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(change.after)
            f.flush()
            os.fsync(f.fileno())
        if change.before is not None:  # keep a private file private (a token may be in it)
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return backup
