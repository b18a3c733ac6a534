"""The server's open documents (server/text_document.py) against pygls's own, lines counted as
LSP counts them (pygls's ``splitlines`` also breaks at U+2028 and others): the same random
edits, in every position encoding, give the same text and the same lines; and an edit in a
large document no longer walks the whole of it."""

from __future__ import annotations

import asyncio
import copy
import random
import re
from collections.abc import Sequence

import pytest
from lsprotocol import types
from pygls.workspace import Workspace
from pygls.workspace.position_codec import PositionCodec
from pygls.workspace.text_document import TextDocument

from memory_ls.server import text_document
from memory_ls.server.text_document import (
    MemoryTextDocument,
    learn_lines,
    line_starts,
    server_position,
    use_fast_documents,
)

PIECES = ["a", "bc", "\n", "\r\n", "\r", "é", "中文", "😀", "\u2028", "\x0c", "\x85", " ", "#L3"]
ENCODINGS = [
    types.PositionEncodingKind.Utf8,
    types.PositionEncodingKind.Utf16,
    types.PositionEncodingKind.Utf32,
]


def lsp_lines(text: str) -> list[str]:
    """Lines with their breaks, broken where LSP says: "\n", "\r\n", "\r"."""
    parts = re.split(r"(\r\n|\r|\n)", text)
    lines = [a + b for a, b in zip(parts[::2], [*parts[1::2], ""], strict=True)]
    return lines if lines[-1] else lines[:-1]


class LspTextDocument(TextDocument):
    """pygls's document, its lines counted by LSP's rule: the reference."""

    @property
    def lines(self) -> Sequence[str]:
        return tuple(lsp_lines(self.source))


def random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(n))


def random_change(rng: random.Random, text: str) -> types.TextDocumentContentChangePartial:
    lines = max(1, len(lsp_lines(text)))

    def pos() -> types.Position:
        # Sometimes past the last line or past a line's end: clients do send such ranges.
        return types.Position(line=rng.randint(0, lines + 1), character=rng.randint(0, 12))

    start, end = pos(), pos()
    if rng.random() < 0.8 and (end.line, end.character) < (start.line, start.character):
        start, end = end, start
    if rng.random() < 0.3:
        end = start  # a plain insertion, as typing is
    return types.TextDocumentContentChangePartial(
        range=types.Range(start=start, end=end), text=random_text(rng, rng.randint(0, 4))
    )


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_random_edits_match_pygls(encoding: types.PositionEncodingKind) -> None:
    rng = random.Random(f"edits-{encoding}")
    for _ in range(150):
        text = random_text(rng, rng.randint(0, 40))
        theirs = LspTextDocument("file:///n.md", text, position_codec=PositionCodec(encoding))
        ours = MemoryTextDocument("file:///n.md", text, position_codec=PositionCodec(encoding))
        for _ in range(25):
            change = random_change(rng, theirs.source)
            # pygls may change the position it is given: each side gets its own copy.
            theirs.apply_change(copy.deepcopy(change))
            ours.apply_change(copy.deepcopy(change))
            assert ours.source == theirs.source, (text, change)
            assert list(ours.lines) == list(theirs.lines)
            assert [ours.lines[i] for i in range(len(ours.lines))] == list(theirs.lines)
        full = types.TextDocumentContentChangeWholeDocument(text="x\ny")
        ours.apply_change(full)
        theirs.apply_change(full)
        assert (ours.source, list(ours.lines)) == (theirs.source, list(theirs.lines))


@pytest.mark.parametrize("piece", [1 << 18, 5, 1])
def test_line_starts_are_lsp_lines(piece: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_document, "PIECE", piece)  # split a few characters at a time
    rng = random.Random(7)
    for _ in range(500):
        text = random_text(rng, rng.randint(0, 30))
        starts = line_starts(text).tolist()
        ends = [*starts[1:], len(text)] if starts else []
        cut = [text[s:e] for s, e in zip(starts, ends, strict=True)]
        assert cut == lsp_lines(text)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_positions_match_pygls(encoding: types.PositionEncodingKind) -> None:
    codec = PositionCodec(encoding)
    lines = ["plain ascii line\n", "é and 中文\r\n", "a 😀 b\n", "last"]
    for line in range(len(lines) + 2):
        for ch in range(25):
            p = types.Position(line=line, character=ch)
            want = codec.position_from_client_units(lines, copy.deepcopy(p))
            assert server_position(codec, lines, p) == want, (line, ch)


def test_the_server_workspace_makes_fast_documents() -> None:
    ws = Workspace(None, types.TextDocumentSyncKind.Incremental)
    use_fast_documents(ws)
    ws.put_text_document(types.TextDocumentItem("file:///a.md", "markdown", 1, "one\ntwo\n"))
    doc = ws.get_text_document("file:///a.md")
    assert isinstance(doc, MemoryTextDocument)
    change = types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(1, 3), types.Position(1, 3)), text=" three"
    )
    ws.update_text_document(types.VersionedTextDocumentIdentifier(2, "file:///a.md"), change)
    assert (doc.source, doc.version) == ("one\ntwo three\n", 2)


def test_an_edit_in_a_long_line_does_not_walk_it() -> None:
    """One 5 MB line: pygls walks it a character at a time to convert the position (1.7 s
    here); the edit must land where pygls would put it."""
    line = "a" * 5_000_000
    ours = MemoryTextDocument("file:///t.jsonl", line)
    change = types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(0, 4_000_000), types.Position(0, 4_000_001)), text="Z"
    )
    ours.apply_change(change)
    assert ours.source[3_999_999:4_000_002] == "aZa" and len(ours.source) == 5_000_000


def test_a_large_document_learns_its_lines_as_it_opens() -> None:
    text = "a line of a large note\n" * 60_000  # 1.4 MB
    ours = MemoryTextDocument("file:///big.md", text)
    small = MemoryTextDocument("file:///small.md", "one\ntwo\n")
    asyncio.run(learn_lines(ours))
    asyncio.run(learn_lines(small))
    assert ours._starts is not None and ours._starts.tolist() == line_starts(text).tolist()
    assert small._starts is None  # learnt on its first edit, no thread hop for it
    change = types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(59_999, 2), types.Position(59_999, 6)), text="X"
    )
    theirs = TextDocument("file:///big.md", text)
    for doc in (ours, theirs):
        doc.apply_change(copy.deepcopy(change))
    assert ours.source == theirs.source and ours.lines[59_999] == "a X of a large note\n"


def test_an_edit_after_a_line_separator_lands_where_the_editor_typed() -> None:
    """U+2028 is no line break to LSP: the editor's line 1 is "MEMORY.md#L3" here, and
    typing at its start must not go into line 0 (pygls's splitlines breaks at U+2028)."""
    doc = MemoryTextDocument("file:///n.md", "a\u2028b\nMEMORY.md#L3\n")
    at = types.Position(line=1, character=0)
    doc.apply_change(
        types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text="See ")
    )
    assert doc.source == "a\u2028b\nSee MEMORY.md#L3\n"
    assert list(doc.lines) == ["a\u2028b\n", "See MEMORY.md#L3\n"]
