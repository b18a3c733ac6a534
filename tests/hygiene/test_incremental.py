"""The check after an edit, kept up to date file by file (``hygiene/incremental.py``): it reads
again only the files the engine wrote since the last check, and answers what a check from
scratch answers; a write by another process makes it read every file's hash again."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest
from conftest import write

from memory_ls.engine import MemoryEngine
from memory_ls.hygiene import Finding, check_index
from memory_ls.index.store import Store
from memory_ls.settings import Settings

TODAY = date(2026, 6, 1)
FACT = "- The billing service is deployed with Helm charts from the infra repo.\n"


def notes(root: Path) -> None:
    write(root, "MEMORY.md", "# Memory\n\n" + FACT + "- Topics: memory/deploy.md\n")
    write(root, "memory/deploy.md", "# Deploy\n\n- Rollbacks use the previous Helm release.\n")
    write(root, "memory/ops.md", "# Ops\n\n- Pages go to the platform rotation first.\n")
    write(root, "memory/2026-03-02.md", "# Notes\n\n- Alice fixed the flaky login test.\n")


def engine(root: Path, index: Path) -> MemoryEngine:
    e = MemoryEngine(root, Settings(provider="none"), index_path=index)
    e.sync("test", embed=False)
    return e


def from_scratch(e: MemoryEngine) -> list[Finding]:
    with e.indexer.reader() as r:
        return check_index(r, e.settings.hygiene, TODAY)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ``paths`` of each ``file_states`` call (None: every file)."""
    calls: list[Any] = []
    real = Store.file_states

    def spy(self: Store, paths: Any = None) -> Any:
        calls.append(None if paths is None else sorted(paths))
        return real(self, paths)

    monkeypatch.setattr(Store, "file_states", spy)
    return calls


def test_an_edit_reads_only_its_file_and_matches_a_check_from_scratch(
    tmp_path: Path, reads: list[Any]
):
    root = tmp_path / "notes"
    notes(root)
    with engine(root, tmp_path / "i.sqlite") as e:
        first = e.check(TODAY)
        assert [f.code for f in first] == ["orphan"]  # memory/ops.md
        steps = [
            ("memory/2026-03-02.md", "# Notes\n\n" + FACT),  # a copy comes
            ("memory/ops.md", "# Ops\n\n" + FACT),  # another, in the orphan
            ("memory/2026-03-02.md", "# Notes\n\n- Nothing to say.\n"),  # one goes
            ("MEMORY.md", "# Memory\n\n" + FACT + "- memory/deploy.md, memory/ops.md\n"),
            ("memory/new.md", "# New\n\n- A topic file the index never links to.\n"),
        ]
        for rel, text in steps:
            write(root, rel, text)
            assert e.set_document(rel, text)
            reads.clear()
            got = e.check(TODAY)
            assert reads and all(r == [rel] for r in reads), rel  # that file's, not every file's
            assert got == from_scratch(e), rel
        codes = {(f.code, f.path) for f in e.check(TODAY)}
        assert codes == {("duplicate", "memory/ops.md"), ("orphan", "memory/new.md")}
        e.clear_document("memory/new.md")
        (root / "memory/new.md").unlink()
        e.sync("test", embed=False)
        assert e.check(TODAY) == from_scratch(e)
        assert {(f.code, f.path) for f in e.check(TODAY)} == {("duplicate", "memory/ops.md")}


def test_a_write_by_another_process_is_seen(tmp_path: Path, reads: list[Any]):
    root = tmp_path / "notes"
    notes(root)
    index = tmp_path / "i.sqlite"
    with engine(root, index) as e:
        assert [f.code for f in e.check(TODAY)] == ["orphan"]
        write(root, "memory/2026-03-02.md", "# Notes\n\n" + FACT)
        with engine(root, index):  # a CLI's `memory-ls index`: another connection's commit
            pass
        reads.clear()
        got = e.check(TODAY)
        assert reads[0] is None  # every file's hash: this engine did not write it
        assert ("duplicate", "memory/2026-03-02.md") in {(f.code, f.path) for f in got}
        assert got == from_scratch(e)
