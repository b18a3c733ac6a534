"""Unit tests of the server's pure parts: LSP conversions and watch globs (params: test_params)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

from pygls.workspace.position_codec import PositionCodec

from memory_ls.search.results import SearchHit, SearchResponse
from memory_ls.server import convert
from memory_ls.server.stdio import READ_SIZE, MessageReader
from memory_ls.server.watch import memory_globs, watch_dirs
from memory_ls.settings import Settings


def hit(path: str, score: float, snippet: str = "text") -> SearchHit:
    return SearchHit(path, 1, 2, score, snippet, "memory", f"{path}#L1-L2")


def test_merge_search_orders_by_score_then_folder() -> None:
    a, b = Path("/a"), Path("/b")
    answers = [
        (a, SearchResponse([hit("x.md", 0.5), hit("y.md", 0.9)], "keyword", None)),
        (
            b,
            SearchResponse(
                [hit("z.md", 0.9)], "hybrid", {"id": "local", "model": "m"}, fallback_reason="slow"
            ),
        ),
    ]
    out = convert.merge_search(answers, 2, 1.234)
    assert [r["uri"] for r in out["results"]] == ["file:///a/y.md", "file:///b/z.md"]
    assert out["mode"] == "hybrid" and out["provider"]["id"] == "local"
    assert out["fallbackReason"] == "slow" and out["tookMs"] == 1.23


def test_symbol_names() -> None:
    assert convert.symbol_name("intro\n## Heading ##\nbody") == ("Heading", True)
    assert convert.symbol_name("\n\n  first line  \nsecond") == ("first line", False)
    assert convert.symbol_name("") == ("(empty)", False)
    sym = convert.hit_symbol(Path("/w"), hit("memory/x.md", 1, "# Title\nbody"))
    assert sym.name == "Title" and sym.container_name == "memory/x.md#L1-L2"
    assert (sym.location.range.start.line, sym.location.range.end.line) == (0, 2)


def test_citation_at_and_utf16_ranges() -> None:
    line = "😀 see [x](memory/a.md#L3-L9) and MEMORY.md#L10"
    start, end, cite = convert.citation_at(line, line.index("memory/a") + 2)
    assert (cite.path, cite.start, cite.end) == ("memory/a.md", 3, 9)
    assert convert.citation_at(line, 1) is None
    rng = convert.span_range([line], 0, start, end, PositionCodec())
    assert rng.start.character == start + 1  # the emoji is two UTF-16 units
    spans = list(convert.citation_spans(["no cite", line]))
    assert [(s.line, s.citation.path) for s in spans] == [(1, "memory/a.md"), (1, "MEMORY.md")]


def test_heading_symbols_tree() -> None:
    lines = ["# A", "## B", "~~~", "## not", "~~~", "### C", "# D", "text"]
    syms = convert.heading_symbols(lines, PositionCodec())
    assert [s.name for s in syms] == ["A", "D"]
    assert [c.name for c in syms[0].children] == ["B"]
    assert [c.name for c in syms[0].children[0].children] == ["C"]
    assert syms[0].range.end.line == 5 and syms[1].range.end.line == 7


def test_watch_globs_and_dirs(tmp_path: Path) -> None:
    s = Settings()
    s.extra_paths = ["docs/notes", "./TODO.md"]
    s.sources = ["memory", "sessions"]
    s.sessions.globs = ["agents/*/sessions/*.jsonl"]
    globs = memory_globs(s)
    assert globs[:3] == ["MEMORY.md", "memory.md", "memory/**/*.md"]
    assert {"docs/notes/**/*.md", "TODO.md", "agents/*/sessions/*.jsonl"} <= set(globs)
    dirs = dict(watch_dirs(tmp_path, s))
    assert dirs[tmp_path] is False and dirs[tmp_path / "memory"] is True
    assert dirs[tmp_path / "docs/notes"] is True and dirs[tmp_path / "agents"] is True


async def test_stdin_reader_hands_over_whole_messages() -> None:
    """Over a real pipe, written in uneven pieces: the headers line by line, the body whole
    (one body larger than a read), a message with an extra header, then the end of input."""
    big = b'{"x": "' + b"a" * (3 * READ_SIZE) + b'"}'
    small = b'{"jsonrpc": "2.0"}'
    stream = (
        b"Content-Length: %d\r\n\r\n" % len(big)
        + big
        + b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n" % len(small)
        + small
    )
    r, w = os.pipe()

    def write() -> None:
        for i in range(0, len(stream), 1000):
            os.write(w, stream[i : i + 1000])
        os.close(w)

    writer = threading.Thread(target=write)
    writer.start()
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[str] = loop.create_future()
    reader = MessageReader(r, loop, lambda why: loop.call_soon_threadsafe(ended.set_result, why))
    got = [
        await reader.readline(),
        await reader.readline(),
        await reader.readexactly(len(big)),
        await reader.readline(),
        await reader.readline(),
        await reader.readline(),
        await reader.readexactly(len(small)),
    ]
    # The end of input is the client gone: the server stops the reader, which ends the loop.
    assert await asyncio.wait_for(ended, 10) == "its input ended"
    assert reader.stop() == 0  # every message was handled
    got.append(await reader.readline())
    writer.join()
    os.close(r)
    assert got == [
        b"Content-Length: %d\r\n" % len(big),
        b"\r\n",
        big,
        b"Content-Length: %d\r\n" % len(small),
        b"Content-Type: application/json\r\n",
        b"\r\n",
        small,
        b"",
    ]
