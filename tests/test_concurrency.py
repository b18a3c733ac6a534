"""Several processes on one index, and files that change while they are indexed (from an
audit of concurrency and file churn): every sync converges to what is on disk (and in the
editor), and nothing outside the memory files is ever read."""

from __future__ import annotations

from pathlib import Path

from conftest import write

from memory_ls.engine import MemoryEngine
from memory_ls.settings import Settings


def keyword(ws: Path, idx: Path) -> MemoryEngine:
    return MemoryEngine(ws, Settings(provider="none"), index_path=idx)


def test_unsaved_text_survives_another_process_syncing_the_index(ws: Path, tmp_path: Path):
    # A language server indexes an open buffer's unsaved text; a CLI `index` (or an MCP
    # server's sync before each search) on the same index file wrote the disk text over it,
    # and the editor's searches no longer found what it had typed until the next keystroke.
    idx = tmp_path / "i.sqlite"
    with keyword(ws, idx) as editor:
        editor.sync()
        assert editor.set_document("memory/2026-02-01-deploy.md", "# Deploy\n\nThe zebra plan.\n")
        assert [h.path for h in editor.search("zebra").results] == ["memory/2026-02-01-deploy.md"]
        for force in (False, True):
            with keyword(ws, idx) as other:
                other.sync(force=force)
            hits = editor.search("zebra").results
            assert [h.path for h in hits] == ["memory/2026-02-01-deploy.md"], force
            assert not editor.search("Fly.io").results  # the disk text is not searched either
