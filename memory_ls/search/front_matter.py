"""What a note's front matter does to its score: an expired note is demoted (or left out), a
note tagged with a word of the query, or known by an alias the query names, is lifted.

The front matter is the file row's (``files.meta``), parsed once per file and search."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

from ..sources.frontmatter import FileMeta

EXPIRED_FACTOR = 0.5  # query.expired = demote: an expired note's score is halved
_WORD = re.compile(r"[\w#][\w./-]*")


@dataclass
class FrontMatterWeights:
    """Call with a row's path and meta: the factor for its score, None to leave it out."""

    query: str  # the query's words, lowercased
    today: date
    expired: str  # query.expired: demote | exclude | keep
    boost: float  # query.tagBoost
    _seen: dict[str, float | None] = field(default_factory=dict)
    _words: frozenset[str] = frozenset()
    _padded: str = ""  # the query's words between spaces, for an alias's phrase

    def __post_init__(self) -> None:
        words = _WORD.findall(self.query)
        self._words = frozenset(w.lstrip("#") for w in words)
        self._padded = f" {' '.join(words)} "

    def __call__(self, path: str, meta: str | None) -> float | None:
        if not meta:
            return 1.0
        if path not in self._seen:
            self._seen[path] = self._factor(FileMeta.from_json(meta))
        return self._seen[path]

    def _factor(self, fm: FileMeta | None) -> float | None:
        if fm is None:
            return 1.0
        factor = 1.0
        if fm.expires and self.expired != "keep" and fm.expires < self.today.isoformat():
            if self.expired == "exclude":
                return None
            factor = EXPIRED_FACTOR
        if self.boost and (self.tagged(fm) or self.aliased(fm)):
            factor *= 1.0 + self.boost
        return factor

    def tagged(self, fm: FileMeta) -> bool:
        return any(t in self._words for t in fm.tags)

    def aliased(self, fm: FileMeta) -> bool:
        return any(f" {a} " in self._padded for a in fm.aliases)
