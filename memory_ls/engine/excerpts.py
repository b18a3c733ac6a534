"""Reading memory back: a file's rendered text (an open buffer wins) and excerpts by lines."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

from ..chunking import split_lines
from ..search.results import Excerpt
from ..sources import SourceError, render
from ..sources.markdown import read_bytes
from ..workspace import PathError, Workspace


def read_text(
    workspace: Workspace, buffers: Mapping[str, str], path: str, max_bytes: int
) -> tuple[str, list[int] | None]:
    """The rendered text of a memory file and its line map (transcripts: JSONL lines)."""
    mf = workspace.resolve(path)
    if mf.path in buffers:
        data = buffers[mf.path].encode("utf-8", "surrogatepass")
    else:
        if not mf.abs_path.exists():
            raise PathError(f"{mf.path}: no such file")
        if not workspace.is_memory_file(mf):  # a FIFO would block the reader forever
            raise PathError(f"{mf.path}: not a regular file")
        try:
            data = read_bytes(mf.abs_path, max_bytes, mf.folders)
        except FileNotFoundError:
            raise PathError(f"{mf.path}: no such file") from None
    try:
        src = render(mf, data)
    except SourceError as exc:
        raise PathError(str(exc)) from exc
    return src.text, list(src.line_map) if src.line_map else None


ALIGN_JOIN = " ⏎ "  # between the rendered lines of one JSONL line, in an aligned document


@dataclass(frozen=True)
class FileLines:
    """A memory file read and split once, so that many excerpts of it (the citations of a
    document) cost a lookup each, not a read and a split each."""

    lines: list[str]  # rendered lines, as editors number them
    line_map: list[int] | None = None  # a transcript: each rendered line's JSONL line
    remote: bool = False  # the team index's copy, not a file on this machine

    @classmethod
    def of(cls, text: str, line_map: list[int] | None, remote: bool = False) -> FileLines:
        return cls(split_lines(text), line_map, remote)


def excerpt(
    path: str,
    source: FileLines,
    start: int | None,
    lines: int | None,
    aligned: bool = False,
) -> Excerpt:
    """Lines ``start`` .. ``start + lines - 1`` (1-based; original JSONL lines for a
    transcript). ``aligned``: a transcript's text as one line per JSONL line (its rendered
    lines joined, empty for a record that renders to nothing), so that an editor showing it
    in place of the file (a teammate's, see docs/guides/team.md, "Files of other machines")
    has a hit's line numbers where they belong. Raises ValueError for numbers below 1."""
    if (start is not None and start < 1) or (lines is not None and lines < 1):
        raise ValueError("from and lines must be positive")
    rendered, line_map = source.lines, source.line_map
    first = start or 1
    if line_map:  # a transcript: cite and return original JSONL line numbers
        total = line_map[-1]  # records are rendered in file order
        last = total if lines is None else first + lines - 1
        lo, hi = bisect_left(line_map, first), bisect_right(line_map, last)
        kept = list(zip(rendered[lo:hi], line_map[lo:hi], strict=False))
        if aligned:
            by_line: dict[int, list[str]] = {}
            for ln, orig in kept:
                by_line.setdefault(orig, []).append(ln)
            end = min(last, total)
            picked = [ALIGN_JOIN.join(by_line.get(n, ())) for n in range(first, end + 1)]
        else:
            picked = [ln for ln, _ in kept]
        return Excerpt(path, first, min(last, total), total, "\n".join(picked))
    total = len(rendered)
    last = total if lines is None else min(total, first + lines - 1)
    return Excerpt(path, first, max(first - 1, last), total, "\n".join(rendered[first - 1 : last]))
