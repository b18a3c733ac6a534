"""Where a workspace's index file lives, and the rebuild files a dead process left beside it."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..index.schema import DatabaseError
from ..settings import Settings, cache_dir

if TYPE_CHECKING:
    from ..index.store import Store

log = logging.getLogger(__name__)


def default_index_path(root: Path) -> Path:
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    return cache_dir() / "index" / f"{root.resolve().name or 'root'}-{digest}.sqlite"


# The meta row naming the workspace folder an index belongs to: a file's name holds only a hash
# of the folder's path, and `memory-ls cache prune` tells by this row an index whose folder is gone.
FOLDER_KEY = "folder"


def remember_folder(store: Store, root: Path) -> None:
    """Record ``root`` in its index (the caller holds the writer lock). Looked up first: a write
    takes the lock another process's sync may hold; a read-only or busy index goes without it
    (the next open tries again), as a missing row only makes prune leave the file alone."""
    try:
        if store.get_meta().get(FOLDER_KEY) != str(root):
            store.set_meta({FOLDER_KEY: str(root)})
    except DatabaseError as exc:
        log.debug("the index's folder was not recorded: %s", exc)


def index_path_for(settings: Settings, root: Path) -> Path:
    """The index file of a workspace folder: ``store.path``, else its own in the cache."""
    path = settings.store.path
    return Path(path).expanduser() if path else default_index_path(root)


def file_identity(path: Path) -> tuple[int, int] | None:
    """Which file is at ``path`` (device and inode), or None: deleted, or a new file there,
    is another identity."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_rebuilds(index_path: Path) -> None:
    """Delete temporary rebuild files left by a process that died (kill -9, power loss)."""
    for f in index_path.parent.glob(f"{index_path.name}.rebuild-*"):
        pid = f.name.rsplit(".rebuild-", 1)[1].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            log.info("removing %s left by a rebuild that did not finish", f.name)
            f.unlink(missing_ok=True)
