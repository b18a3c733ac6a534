"""Turning memory files into indexable text: Markdown as is, transcripts rendered."""

from __future__ import annotations

from ..workspace import MemoryFile
from .markdown import SourceError, SourceText, decode


def render(mf: MemoryFile, data: bytes) -> SourceText:
    """The text to index for a file's bytes (may raise SourceError)."""
    text = decode(data, mf.path)
    if mf.source == "sessions":
        try:
            from .sessions import render_transcript
        except ImportError:
            raise SourceError(f"{mf.path}: session transcripts are not supported yet") from None
        return render_transcript(text, mf.path)
    return SourceText(text)


__all__ = ["render", "SourceError", "SourceText"]
