"""Citations: ``path#Lstart-Lend`` (``path#Lstart`` for one line), made and parsed in one place."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A citation inside any text: a relative path ending in .md or .jsonl (or a transcript under
# sessions.roots: sessions:<root name>/<path>), then #L<start>[-L<end>].
CITATION_RE = re.compile(
    r"(?P<path>(?:sessions:[\w.\-]+/)?(?:[\w.\-]+/)*[\w.\-]+\.(?:md|jsonl))"
    r"#L(?P<start>\d+)(?:-L?(?P<end>\d+))?"
)


@dataclass(frozen=True)
class Citation:
    path: str
    start: int
    end: int

    def __str__(self) -> str:
        return format_citation(self.path, self.start, self.end)


def format_citation(path: str, start: int, end: int) -> str:
    return f"{path}#L{start}" if start == end else f"{path}#L{start}-L{end}"


# What a citation of bad line numbers looks like (``MEMORY.md#L0``, ``#L5-L2``, ``#L-3``).
_CITATION_LIKE = re.compile(r"\.(?:md|jsonl)#L")


def citation_problem(text: str) -> str | None:
    """Why ``text``, written as a citation, is none (bad line numbers); None otherwise."""
    if parse_citation(text) is None and _CITATION_LIKE.search(text):
        return f"{text.strip()}: bad line numbers (path#L<from>-L<to>, from 1, to not before from)"
    return None


def parse_citation(text: str) -> Citation | None:
    """The citation that is the whole of ``text`` (surrounding spaces and ./ allowed)."""
    m = CITATION_RE.fullmatch(text.strip().removeprefix("./"))
    return _from_match(m) if m else None


def find_citations(text: str) -> list[tuple[int, int, Citation]]:
    """(start offset, end offset, citation) of every citation in a line or document."""
    out = []
    for m in CITATION_RE.finditer(text):
        c = _from_match(m)
        if c:
            out.append((m.start(), m.end(), c))
    return out


def _from_match(m: re.Match[str]) -> Citation | None:
    start = int(m["start"])
    end = int(m["end"]) if m["end"] else start
    if start < 1 or end < start:
        return None
    return Citation(m["path"], start, end)
