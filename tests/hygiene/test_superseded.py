"""``conflict`` leaves out a passage already marked superseded, as the code action marks it:
its lines struck through (``~~...~~``, list markers outside), or its file's front matter holding
``superseded_by``; taking the mark off flags it again."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from conftest import write

from memory_ls.engine import MemoryEngine
from memory_ls.hygiene import Finding
from memory_ls.settings import Settings

TODAY = date(2026, 6, 1)
OLD = "The billing service is deployed with Helm charts from the infra repo."
NEW = "# Notes\n\n- In March we moved the billing service off Helm to Kustomize overlays.\n"


def engine(root: Path) -> MemoryEngine:
    s = Settings()
    s.provider = "none"
    e = MemoryEngine(root, s, index_path=root.parent / f"{root.name}.sqlite")
    e.sync("test", embed=False)
    return e


def conflicts(found: list[Finding]) -> list[tuple[str, int]]:
    return sorted((f.path, f.start_line) for f in found if f.code == "conflict")


def test_a_struck_passage_or_a_superseded_file_is_not_flagged(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    memory = f"# Memory\n\n- {OLD}\n- Prefer pnpm over npm for every package here.\n"
    write(root, "MEMORY.md", memory)
    write(root, "memory/2026-03-02.md", NEW)
    with engine(root) as e:
        assert conflicts(e.check(TODAY)) == [("MEMORY.md", 3)]
        e.set_document("MEMORY.md", memory.replace(f"- {OLD}", f"- ~~{OLD}~~"))
        assert conflicts(e.check(TODAY)) == []
        # Struck through in part only: still flagged.
        head, tail = OLD.split(" from ")
        half = memory.replace(f"- {OLD}", f"- ~~{head}~~\n  from {tail}")
        e.set_document("MEMORY.md", half)
        assert conflicts(e.check(TODAY)) == [("MEMORY.md", 3)]
        e.set_document("MEMORY.md", memory)
        assert conflicts(e.check(TODAY)) == [("MEMORY.md", 3)]
        marked = "---\nsuperseded_by: memory/2026-03-02.md#L3\n---\n" + memory
        e.set_document("MEMORY.md", marked)
        assert conflicts(e.check(TODAY)) == []
        e.set_document("MEMORY.md", marked.replace("superseded_by", "reviewed"))
        assert conflicts(e.check(TODAY)) == [("MEMORY.md", 6)]
