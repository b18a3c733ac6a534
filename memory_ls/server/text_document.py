"""Open documents whose edits cost what the edit touches.

pygls applies an incremental change by splitting the whole document into lines and writing it
out again, and converts a position by walking its line a character at a time, on the event
loop: 41 ms a keystroke in a 9 MB note, 1.7 s in a transcript of one 5 MB line. Here the
document keeps where its lines start (updated around each edit, not recomputed), cuts the edit
into the text directly, and converts a position by arithmetic when the line's characters are
one code unit each. The result is pygls's own (``tests/server/test_text_document.py`` replays random
edits on both), but for where lines break: pygls uses ``str.splitlines``, which also breaks at
U+2028, a form feed and five more, where LSP (and the editor) count lines broken by "\n",
"\r\n" and "\r" only; an edit on a line after such a character landed on another line.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
from lsprotocol import types
from pygls.workspace import Workspace
from pygls.workspace.position_codec import PositionCodec, ServerTextPosition, Utf8, Utf32
from pygls.workspace.text_document import TextDocument

from ..chunking import lsp_splitlines

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")  # two UTF-16 units each


PIECE = 1 << 18  # characters split at a time: the GIL is let go between pieces


def line_starts(text: str, base: int = 0) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Where each of ``text``'s lines starts (plus ``base``); no line after a final break.

    Split a piece at a time, each ending just after a "\n" (never inside a "\r\n"): one
    splitlines() of 9 MB holds the GIL for 30 ms, and the event loop with it."""
    parts: list[np.ndarray[Any, np.dtype[np.int64]]] = []
    at = 0
    while at < len(text):
        cut = text.find("\n", at + PIECE) + 1 or len(text)
        lengths = np.fromiter(map(len, lsp_splitlines(text[at:cut])), dtype=np.int64)
        parts.append(lengths)
        at = cut
    lengths = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    starts = np.empty_like(lengths)
    if len(lengths):
        starts[0] = base
        np.cumsum(lengths[:-1], out=starts[1:])
        starts[1:] += base
    return starts


class Lines(Sequence[str]):
    """A document's lines (with their breaks) as LSP counts them, cut from the text on demand."""

    def __init__(self, text: str, starts: np.ndarray[Any, np.dtype[np.int64]]):
        self.text = text
        self.starts = starts

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self.starts)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        end = int(self.starts[i + 1]) if i + 1 < n else len(self.text)
        return self.text[int(self.starts[i]) : end]

    def __iter__(self) -> Iterator[str]:
        return iter(lsp_splitlines(self.text))


def server_position(
    codec: PositionCodec, lines: Sequence[str], pos: types.Position
) -> ServerTextPosition:
    """``codec.position_from_client_units``, without its walk over the line when every
    character of the line is one unit in the client's encoding."""
    if not 0 <= pos.line < len(lines):
        return codec.position_from_client_units(lines, pos)
    line = lines[pos.line].replace("\r\n", "\n")  # as pygls counts
    one_unit = (
        line.isascii()
        or isinstance(codec.impl, Utf32)
        or (not isinstance(codec.impl, Utf8) and not _ASTRAL.search(line))
    )
    if not one_unit:
        return codec.position_from_client_units(lines, pos)
    # pygls: past the end of the line means the last character of it.
    ch = pos.character if pos.character <= len(line) else len(line) - 1
    return ServerTextPosition(pos.line, max(ch, 0))


class MemoryTextDocument(TextDocument):
    _starts: np.ndarray[Any, np.dtype[np.int64]] | None = None

    def _line_starts(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        if self._starts is None:
            self._starts = line_starts(self.source)
        return self._starts

    @property
    def lines(self) -> Sequence[str]:
        return Lines(self.source, self._line_starts())

    def _apply_full_change(self, change: types.TextDocumentContentChangeEvent) -> None:
        super()._apply_full_change(change)
        self._starts = None

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        text, starts = self.source, self._line_starts()
        lines = Lines(text, starts)
        if not len(lines):
            self._source, self._starts = text + change.text, None
            return
        start = server_position(self._position_codec, lines, change.range.start)
        end = server_position(self._position_codec, lines, change.range.end)
        if end.line < start.line:
            return  # pygls writes every line back unchanged and drops the new text
        a = int(starts[start.line]) + min(start.character, len(lines[start.line]))
        b = int(starts[end.line]) + min(end.character, len(lines[end.line]))
        new = text[:a] + change.text + text[b:]
        # Lines from the one before the edit (a break typed after its "\r" joins it) to the
        # one after it (a "\r" left at the edit's end joins its "\n") are found again; the
        # rest only move.
        first = max(start.line - 1, 0)
        tail = end.line + 2
        old_end = int(starts[tail]) if tail < len(starts) else len(text)
        moved = len(new) - len(text)
        base = int(starts[first])
        middle = line_starts(new[base : old_end + moved], base)
        self._source = new
        self._starts = np.concatenate((starts[:first], middle, starts[tail:] + moved))


LEARN_IN_THREAD = 1 << 20  # characters: below this, a document learns its lines when edited


async def learn_lines(doc: TextDocument) -> None:
    """Find where a large document's lines start in a thread, as it opens, so that its first
    edit does not do it on the event loop (36 ms for 9 MB)."""
    if not isinstance(doc, MemoryTextDocument) or doc._starts is not None:
        return
    text = doc.source
    if len(text) < LEARN_IN_THREAD:
        return
    starts = await asyncio.to_thread(line_starts, text)
    if doc._starts is None and doc.source is text:  # not edited meanwhile
        doc._starts = starts


class MemoryWorkspace(Workspace):
    def _create_text_document(
        self,
        doc_uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
    ) -> TextDocument:
        return MemoryTextDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self._position_codec,
        )


def use_fast_documents(workspace: Workspace) -> None:
    """Make ``workspace`` (pygls's, made at initialize) create ``MemoryTextDocument``s; the
    subclass adds no state, so the workspace keeps everything it holds."""
    if type(workspace) is Workspace:
        workspace.__class__ = MemoryWorkspace
