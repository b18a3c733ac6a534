"""Citations: ``path#Lstart-Lend`` (``path#Lstart`` for one line), made and parsed in one place."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A citation inside any text: a relative path ending in .md or .jsonl (or a file under
# sessions.roots or memory.roots: sessions:<root name>/<path>, memory:<root name>/<path>), then
# #L<start>[-L<end>].
_CITATION = (
    r"(?P<path>(?:(?:sessions|memory):[\w.\-]+/)?(?:[\w.\-]+/)*[\w.\-]+\.(?:md|jsonl))"
    r"#L(?P<start>\d+)(?:-L?(?P<end>\d+))?"
)
CITATION_RE = re.compile(_CITATION)
# The same, tried only where a match can begin first: not inside a path (after a path
# character, or after a "/" that follows one), where the match one step back would have come
# first. Without it, every position of a long run of path characters rescans the run: a 60 KB
# line took 19 s, a 5 MB line hours (re holds the GIL: the whole server froze).
_FIRST_RE = re.compile(r"(?:(?=(?:sessions|memory):)|(?<![\w.\-])(?<![\w.\-]/))" + _CITATION)
MAX_LINE_DIGITS = 15  # a longer line number cites nothing (int() refuses 4,301 digits)


@dataclass(frozen=True)
class Citation:
    path: str
    start: int
    end: int

    def __str__(self) -> str:
        return format_citation(self.path, self.start, self.end)


def format_citation(path: str, start: int, end: int) -> str:
    return f"{path}#L{start}" if start == end else f"{path}#L{start}-L{end}"


# A citation that is the whole text (``memory-ls get``, memory/get, memory_get): its path may
# hold spaces, "#" or any other character a file name can, since nothing follows it. A note in
# a folder with a space (``memory/on call/x.md#L1-L3``) was cited by search but refused by get,
# as "bad line numbers", when the path had to be one CITATION_RE takes inside running text.
_WHOLE_CITATION_RE = re.compile(r"(?P<path>.+\.(?:md|jsonl))#L(?P<start>\d+)(?:-L?(?P<end>\d+))?")

# What a citation of bad line numbers looks like (``MEMORY.md#L0``, ``#L5-L2``, ``#L-3``).
_CITATION_LIKE = re.compile(r"\.(?:md|jsonl)#L")


def citation_problem(text: str) -> str | None:
    """Why ``text``, written as a citation, is none (bad line numbers); None otherwise."""
    if parse_citation(text) is None and _CITATION_LIKE.search(text):
        return f"{text.strip()}: bad line numbers (path#L<from>-L<to>, from 1, to not before from)"
    return None


def parse_citation(text: str) -> Citation | None:
    """The citation that is the whole of ``text`` (surrounding spaces and ./ allowed)."""
    m = _WHOLE_CITATION_RE.fullmatch(text.strip().removeprefix("./"))
    return _from_match(m) if m else None


def find_citations(text: str) -> list[tuple[int, int, Citation]]:
    """(start offset, end offset, citation) of every citation in a line or document."""
    out: list[tuple[int, int, Citation]] = []
    pos = 0
    while True:
        # Right after a match (``a.md#L1b.md#L2``, ``a.md#L1/b.md#L2``), one may begin where
        # _FIRST_RE would not look: try there first.
        m = CITATION_RE.match(text, pos) if pos else None
        if m is None and pos and text.startswith("/", pos):
            m = CITATION_RE.match(text, pos + 1)
        if m is None:
            m = _FIRST_RE.search(text, pos)
        if m is None:
            return out
        c = _from_match(m)
        if c:
            out.append((m.start(), m.end(), c))
        pos = max(m.end(), pos + 1)


def _from_match(m: re.Match[str]) -> Citation | None:
    if len(m["start"]) > MAX_LINE_DIGITS or len(m["end"] or "") > MAX_LINE_DIGITS:
        return None
    start = int(m["start"])
    end = int(m["end"]) if m["end"] else start
    if start < 1 or end < start:
        return None
    return Citation(m["path"], start, end)
