"""Citation resolution and its editor features, without a language server: real engines over
workspaces on disk, the buffers given as plain text."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import pytest_asyncio
from conftest import write
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec
from server_util import open_folder

from memory_ls.engine import MemoryEngine
from memory_ls.search.citations import Citation
from memory_ls.server.citations import Citations, _check_all, check_citation
from memory_ls.server.folders import Folders
from memory_ls.settings import Settings


def settings() -> Settings:
    return Settings(provider="none")


def make_a(root: Path) -> Path:
    write(root, "MEMORY.md", "# Memory\n\nThe deploy key lives in the vault.\nUse pnpm.\n")
    write(root, "memory/2026-01-05.md", "# Standup\n\nWe chose PostgreSQL.\nFridays.\n")
    write(root, "memory/team/people.md", "# People\n\nAlice owns billing.\n")
    write(root, "README.md", "not memory\n")
    return root


def make_b(root: Path) -> Path:
    write(root, "memory/only-b.md", "# B\n\nOnly the second folder has this.\n")
    return root


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    eng = MemoryEngine(make_a(tmp_path / "a"), settings(), index_path=tmp_path / "a.sqlite")
    eng.sync("test")
    yield eng
    eng.close()


def test_check_citation(engine: MemoryEngine) -> None:
    ok = check_citation(engine, Citation("memory/2026-01-05.md", 3, 4), None)
    assert ok.problem is None and ok.excerpt is not None and ok.root == engine.root
    assert ok.excerpt.text == "We chose PostgreSQL.\nFridays."

    past = check_citation(engine, Citation("MEMORY.md", 9, 9), None)
    assert past.excerpt is not None and "line 9 is past the end" in (past.problem or "")
    tail = check_citation(engine, Citation("MEMORY.md", 4, 40), None)
    assert "lines past the end" in (tail.problem or "")

    gone = check_citation(engine, Citation("memory/gone.md", 1, 1), None)
    assert gone.missing and gone.excerpt is None and "no such memory file" in (gone.problem or "")
    # A file that exists but is not memory: nothing to say, nothing to link.
    other = check_citation(engine, Citation("README.md", 1, 1), None)
    assert (other.excerpt, other.problem, other.missing) == (None, None, False)

    # Relative to the citing document's folder, after the workspace-relative path.
    rel = check_citation(engine, Citation("people.md", 3, 3), "memory/team")
    assert rel.excerpt is not None and rel.excerpt.path == "memory/team/people.md"
    assert check_citation(engine, Citation("people.md", 3, 3), None).missing
    # Never outside the workspace.
    assert check_citation(engine, Citation("../../MEMORY.md", 1, 1), "memory").missing


@pytest_asyncio.fixture
async def two_folders(tmp_path: Path) -> AsyncIterator[Folders]:
    reads = ThreadPoolExecutor(2)
    folders = Folders()
    for name, make in (("a", make_a), ("b", make_b)):
        folders.add(await open_folder(make(tmp_path / name), tmp_path / f"{name}.sqlite", reads))
    yield folders
    for f in folders.clear():
        await f.close()
    reads.shutdown()


CITING = (
    "# Notes 😀\n"
    "😀 See memory/2026-01-05.md#L3-L4 and [x](memory/only-b.md#L3).\n"
    "Bad: memory/missing.md#L1, MEMORY.md#L99 and people.md#L3.\n"
)


async def test_citations_across_folders(two_folders: Folders, tmp_path: Path) -> None:
    a = tmp_path / "a"
    doc_uri = (a / "memory/team/notes.md").as_uri()
    docs = {doc_uri: CITING}
    cites = Citations(two_folders, docs.get, PositionCodec())
    line = CITING.split("\n")[1]

    # The citation under the cursor: UTF-16 columns (the emoji is two units).
    col = len(line[: line.index("memory/2026")].encode("utf-16-le")) // 2 + 3
    found = await cites.at(doc_uri, types.Position(line=1, character=col))
    assert found is not None
    rng, chk = found
    assert chk.root == a and chk.excerpt is not None and chk.excerpt.from_line == 3
    assert rng.start.character == col - 3 and rng.start.line == 1
    assert await cites.at(doc_uri, types.Position(line=0, character=1)) is None
    assert await cites.at("file:///not/open.md", types.Position(line=0, character=0)) is None

    # Found in the second folder when the document's own folder lacks it.
    col_b = len(line[: line.index("memory/only-b")].encode("utf-16-le")) // 2 + 1
    (loc,) = await cites.definition(doc_uri, types.Position(line=1, character=col_b)) or []
    assert loc.uri == (tmp_path / "b/memory/only-b.md").as_uri()
    assert (loc.range.start.line, loc.range.end.line) == (2, 3)

    hover = await cites.hover(doc_uri, types.Position(line=1, character=col))
    assert hover is not None and "PostgreSQL" in hover.contents.value

    links = await cites.links(doc_uri)
    assert sorted(link.target for link in links) == [
        (a / "MEMORY.md").as_uri() + "#L99",  # past the end: still a file to open
        (a / "memory/2026-01-05.md").as_uri() + "#L3-L4",
        (a / "memory/team/people.md").as_uri() + "#L3",  # relative to the citing document
        (tmp_path / "b/memory/only-b.md").as_uri() + "#L3",
    ]

    diags = await cites.diagnostics(doc_uri, CITING)
    assert sorted(d.message.split(":")[0] for d in diags) == ["MEMORY.md#L99", "memory/missing.md"]
    assert all(d.range.start.line == 2 and d.code == "citation" for d in diags)
    missing = next(d for d in diags if d.message.startswith("memory/missing.md"))
    col_m = CITING.split("\n")[2].index("memory/missing")
    assert missing.range.start.character == col_m

    # A citation of a missing file hovers its problem.
    hover = await cites.hover(doc_uri, types.Position(line=2, character=col_m + 1))
    assert hover is not None and "no such memory file" in hover.contents.value


async def test_citations_without_folders(tmp_path: Path) -> None:
    docs = {"file:///x/notes.md": "See MEMORY.md#L1.\n"}
    cites = Citations(Folders(), docs.get, PositionCodec())
    (chk,) = await cites.check("file:///x/notes.md", [Citation("MEMORY.md", 1, 1)])
    assert chk.missing and chk.problem == "MEMORY.md: no workspace folder"
    assert await cites.links("file:///x/notes.md") == []


def test_a_document_of_many_citations_reads_each_file_once(tmp_path: Path) -> None:
    """A document citing one transcript thousands of times took minutes to check: each
    citation read and rendered the whole file again. The batch reads each file once and
    answers exactly what one get per citation answers."""
    root = make_a(tmp_path / "w")
    records = [
        f'{{"type": "user", "message": {{"role": "user", "content": "msg {i}\\nmore"}}}}'
        for i in range(300)
    ]
    write(root, "sessions/a.jsonl", "not json\n" + "\n".join(records) + "\n")
    s = settings()
    s.sources, s.sessions.globs = ["memory", "sessions"], ["sessions/*.jsonl"]
    eng = MemoryEngine(root, s, index_path=tmp_path / "w.sqlite")
    cites = [Citation("sessions/a.jsonl", i, i + (i % 3)) for i in range(1, 305)]
    cites += [Citation("MEMORY.md", i, i + 1) for i in range(1, 8)]
    cites += [Citation("memory/gone.md", i, i) for i in range(1, 4)]
    reads: list[str] = []
    read_text = eng.read_text

    def counted(path: str | Path) -> tuple[str, list[int] | None]:
        reads.append(str(path))
        return read_text(path)

    try:
        alone = [check_citation(eng, c, None) for c in cites]
        eng.read_text = counted  # type: ignore[method-assign]
        batch = _check_all(eng, cites, list(range(len(cites))), None)
    finally:
        eng.close()
    assert sorted(reads) == ["MEMORY.md", "memory/gone.md", "sessions/a.jsonl"]
    assert [c for _, c in batch] == alone
    # JSONL line 1 is broken, line 2 holds msg 0: lines 1-2, then lines 2-4.
    assert [c.excerpt.text if c.excerpt else None for c in alone[:2]] == [
        "User: msg 0\nmore",
        "User: msg 0\nmore\nUser: msg 1\nmore\nUser: msg 2\nmore",
    ]
    assert "past the end" in (alone[302].problem or "")  # sessions/a.jsonl has 301 lines
    assert all(c.missing for c in alone[-3:])


async def test_a_document_of_many_bad_citations_gets_a_bounded_number_of_diagnostics(
    two_folders: Folders, tmp_path: Path
) -> None:
    # pygls turns every diagnostic into JSON on the event loop: 100,000 held it for a second.
    doc_uri = (tmp_path / "a/notes.md").as_uri()
    text = "".join(f"memory/missing.md#L{i + 1} and MEMORY.md#L{900 + i}\n" for i in range(1500))
    cites = Citations(two_folders, {doc_uri: text}.get, PositionCodec())
    diags = await cites.diagnostics(doc_uri, text)
    assert len(diags) == 1000  # of 3,000
    # The first ones, in the document's order.
    assert [d.range.start.line for d in diags[:4]] == [0, 0, 1, 1]
    assert diags[-1].range.start.line == 499
