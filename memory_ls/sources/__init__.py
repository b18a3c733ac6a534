"""Turning memory files into indexable text: Markdown as is, transcripts rendered."""

from __future__ import annotations

from ..workspace import MemoryFile
from .markdown import SourceError, SourceText, decode


def render(mf: MemoryFile, data: bytes) -> SourceText:
    """The text to index for a file's bytes (may raise SourceError)."""
    if mf.source == "sessions":
        from .sessions import render_transcript

        # A transcript is read line by line: NUL bytes or bad UTF-8 spoil a line (skipped and
        # logged there), not the whole file.
        return render_transcript(data.decode("utf-8", errors="replace"), mf.path)
    return SourceText(decode(data, mf.path))


__all__ = ["render", "SourceError", "SourceText"]
