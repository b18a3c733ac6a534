"""Editor features on hostile documents, end to end over stdio (keyword-only): a keystroke never
waits behind them (docs/concepts/language-server.md: nothing slow runs on the event loop)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest_asyncio
from lsp_harness import Start, make_workspace, open_doc, request, search, start  # noqa: F401
from lsprotocol import types

from memory_ls.search.citations import find_citations


@pytest_asyncio.fixture
async def keyword_server(start: Start, tmp_path: Path) -> tuple[Path, Any]:  # noqa: F811
    """The test workspace and a keyword-only language server on it."""
    ws = make_workspace(tmp_path / "ws")
    return ws, await start(ws, init_options={"provider": "none"})


async def timed_search(client, query: str) -> float:
    t0 = time.monotonic()
    res = await search(client, query)
    assert res["results"], res
    return time.monotonic() - t0


async def link_targets(client, u: str) -> list[str]:
    """The file name and lines of each document link in ``u``."""
    links = await request(
        client,
        types.TEXT_DOCUMENT_DOCUMENT_LINK,
        types.DocumentLinkParams(text_document=types.TextDocumentIdentifier(uri=u)),
    )
    return [link.target.rsplit("/", 1)[1] for link in links]


async def test_a_long_line_with_a_citation_does_not_freeze_the_server(
    keyword_server: tuple[Path, Any],
) -> None:
    # Each position of a run of path characters used to rescan the run: a 60 KB line froze
    # the server 19 s, this one would have for hours (diagnostics scan the text on the loop).
    ws, client = keyword_server
    line = "a" * 2_000_000 + " memory/nowhere.md#L3 and memory/2026-01-05.md#L5-L6"
    u = open_doc(client, ws / "notes" / "long.md", line + "\n")
    await asyncio.sleep(0.5)  # the diagnostics of the open run now
    assert await timed_search(client, "PostgreSQL ledger") < 10
    assert await link_targets(client, u) == ["2026-01-05.md#L5-L6"]
    deadline = time.monotonic() + 30
    while not client.diagnostics.get(u):
        assert time.monotonic() < deadline, "no diagnostics for the missing file"
        await asyncio.sleep(0.1)
    assert [d.message for d in client.diagnostics[u]] == ["memory/nowhere.md: no such memory file"]


async def test_a_line_number_of_thousands_of_digits_cites_nothing(
    keyword_server: tuple[Path, Any],
) -> None:
    # int() refuses 4,301 digits: the ValueError failed the document's links and diagnostics.
    ws, client = keyword_server
    text = f"memory/2026-01-05.md#L{'9' * 5000} then MEMORY.md#L3\n"
    assert [c for *_, c in find_citations(text)] == [c for *_, c in find_citations("MEMORY.md#L3")]
    u = open_doc(client, ws / "notes" / "digits.md", text)
    assert await link_targets(client, u) == ["MEMORY.md#L3"]


def test_find_citations_is_linear_and_unchanged() -> None:
    # Starts inside a path are skipped, but what is found is what a scan from every position
    # found: glued citations, a path after "//", a sessions: path after other characters.
    assert [(s, e, str(c)) for s, e, c in find_citations("a.md#L1b.md#L2/c.md#L3")] == [
        (0, 7, "a.md#L1"),
        (7, 14, "b.md#L2"),
        (15, 22, "c.md#L3"),
    ]
    assert [str(c) for *_, c in find_citations("x//m/a.md#L2 xsessions:r/t.jsonl#L4")] == [
        "m/a.md#L2",
        "sessions:r/t.jsonl#L4",
    ]
    t0 = time.monotonic()
    assert len(find_citations("a/" * 500_000 + " memory/a.md#L1")) == 1
    assert len(find_citations("a" * 1_000_000 + " memory/a.md#L1")) == 1
    assert time.monotonic() - t0 < 10  # was about 100 s per 100,000 characters, squared


async def test_document_symbols_of_100000_headings(keyword_server: tuple[Path, Any]) -> None:
    # A scan ahead per heading (quadratic) on the event loop: 20 s, searches waited.
    ws, client = keyword_server
    text = "".join(f"# Part {i}\n\n## Detail {i}\n\ntext\n" for i in range(50_000))
    u = open_doc(client, ws / "notes" / "headings.md", text)
    symbols = asyncio.ensure_future(
        request(
            client,
            types.TEXT_DOCUMENT_DOCUMENT_SYMBOL,
            types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=u)),
        )
    )
    await asyncio.sleep(0.2)
    assert await timed_search(client, "PostgreSQL ledger") < 10
    roots = await symbols
    assert len(roots) == 50_000
    assert [s.name for s in roots[-1].children] == ["Detail 49999"]
    assert (roots[1].range.start.line, roots[1].range.end.line) == (5, 9)
    assert (roots[-1].children[0].range.start.line, roots[-1].children[0].range.end.line) == (
        249_997,
        250_000,
    )
