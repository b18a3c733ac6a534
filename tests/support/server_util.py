"""Server parts without a server: a workspace ``Folder`` (engine, lanes) opened on disk."""

from __future__ import annotations

from concurrent.futures import Executor
from pathlib import Path

from memory_ls.server.folder import Folder, FolderHooks
from memory_ls.settings import Settings


async def open_folder(
    root: Path, index: Path, reads: Executor, settings: Settings | None = None
) -> Folder:
    """A synced folder (keyword-only unless ``settings`` say otherwise)."""
    hooks = FolderHooks(
        get_text=lambda uri: None,
        on_indexed=lambda f, u: None,
        on_synced=lambda f: None,
        on_degraded=lambda f: None,
    )
    folder = Folder(
        root.as_uri(), root, settings or Settings(provider="none"), [], reads=reads, hooks=hooks
    )
    await folder.open(index_path=index)
    await folder.sync("test")
    return folder
