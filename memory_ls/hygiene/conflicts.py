"""``conflict``: an older passage that a newer one says has changed.

The pairs judged are the duplicate check's candidates (passages sharing a shingle or a pair of
rare words). Precision first: a pair is a conflict only with an explicit change, never on
closeness alone.

- The newer passage says the change: "moved / switched / migrated (the billing service) from
  X to Y" or "off X (to Y)", "replaced X with Y", "Y instead of X", or "no longer" / "not ...
  anymore" / "stopped" about what the older one states. The older one must state the old value
  X (and not the new one, Y), not be negated itself, and hold every other content word of the
  newer one (its subject; time words such as "in March" aside): "we moved the search
  service off Redis" says nothing about the billing service's Redis.
- Or two dated notes (different dates) state the same thing with one value changed: the same
  words but one or two in a row, which name something (a number, a version, a name), after at
  least two shared content words, and both name something else alike ("the ledger service runs
  Postgres 15" / "... Postgres 16"; not "Edit number 12 of this note" / "... 57 ...").
  A changed value before that is the subject changing ("the analytics service runs ..."), and
  an event ("was", "took", "this morning") is true of its day, not superseded by another day's;
  a changed date or month says when, not what.

The finding sits on the older passage and points at the newer one. Older: the one the change
is said against (a note that says "no longer" is the newer whatever its file); for two dated
notes without such words, the earlier date. A passage already marked superseded (its lines
struck through, ``~~...~~``, or its file's front matter holding ``superseded_by:``, as the code
action writes them) is not flagged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date

from ..sources.frontmatter import front_matter_end, key_line
from .findings import CONFLICT, Finding, Related
from .passages import NEGATIONS, STOPWORDS, Passage, fold

_W = r"[\w.\-/:@+#`']+"
_PHRASE = r"(?:[^.,;:!?]|[.:](?=\w))+?"  # up to a stop (a version's dot is not one)
_MOVE = re.compile(
    rf"\b(?:moved|switched|migrated|changed|went|moving|switching|migrating)\b(?:\s+{_W}){{0,5}}?"
    rf"\s+(?:from|off(?:\s+of)?)\s+(?P<old>{_PHRASE})"
    rf"(?:\s+(?:to|onto|for)\s+(?P<new>{_PHRASE}))?(?=[.,;:!?](?:\s|$)|$)",
    re.IGNORECASE,
)
_REPLACED = re.compile(
    rf"\breplaced\s+(?P<old>{_PHRASE})\s+(?:with|by)\s+(?P<new>{_PHRASE})(?=[.,;:!?](?:\s|$)|$)",
    re.IGNORECASE,
)
_INSTEAD = re.compile(
    rf"(?P<new>{_PHRASE})\s+(?:instead\s+of|rather\s+than)\s+(?P<old>{_PHRASE})"
    r"(?=[.,;:!?](?:\s|$)|$)",
    re.IGNORECASE,
)
_NO_LONGER = re.compile(
    r"\bno\s+longer\b|\bnot\b[^.;!?]*\b(?:anymore|any\s+more)\b|\bstopped\b", re.IGNORECASE
)
_WORD = re.compile(r"[\w][\w.\-/:@+#]*[\w]|[\w]")
# One pass that finds the few passages the patterns above are worth trying on (they backtrack).
_TRIGGER = re.compile(
    r"\b(?:moved|switched|migrated|changed|went|moving|switching|migrating|replaced|instead|"
    r"rather|longer|anymore|any\s+more|stopped)\b",
    re.IGNORECASE,
)
# Words that say when, or that there was a change: not the subject of the change.
CHANGE_WORDS = frozenset(
    fold(w)
    for w in str.split(
        """moved switched migrated changed went moving switching migrating replaced instead
    rather longer anymore stopped now today yesterday week month year sprint morning afternoon
    evening finally recently last ago team decided agreed january february march april may june
    july august september october november december monday tuesday wednesday thursday friday
    saturday sunday jan feb mar apr jun jul aug sep sept oct nov dec"""
    )
)
# An event, true of its day: another day's different value does not supersede it.
_EVENT = re.compile(
    r"\b(?:was|were|had|did|took|today|yesterday|tonight|this\s+(?:morning|afternoon|evening|"
    r"week|sprint)|last\s+(?:night|week)|ago)\b",
    re.IGNORECASE,
)
# A changed date says when, not what: "Date: 2:01 pm on 23 January" / "... on 21 October",
# or "on 13 October" / "on 17 October".
_WHEN = re.compile(
    r"^(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*$|^(?:19|20)\d\d(?:-\d\d){0,2}$"
)
SUPERSEDED_BY = "superseded_by"  # the front matter key that marks a whole file superseded
# A line struck through whole: "~~...~~", after its indentation, quote and list marks.
_STRUCK = re.compile(r"^\s*(?:>\s*)*(?:(?:[-*+]|\d{1,3}[.)])\s+)?(?:\[[ xX]\]\s+)?~~.*~~\s*$")
MAX_VALUE = 2  # words that may change in a row between two statements of the same thing
SUBJECT = 2  # shared content words before the changed value, or besides the old value


@dataclass(frozen=True)
class Change:
    old: frozenset[str]  # content words of what was
    new: frozenset[str]  # the first content word of what is now (none: "off X", "no longer")
    rest: frozenset[str]  # the other content words: the subject of the change
    negates: bool  # "no longer": the newer passage denies the rest of its words

    @property
    def needs(self) -> frozenset[str]:
        """Words every passage it is said of holds."""
        return self.old or self.rest


def _stems(text: str, limit: int) -> frozenset[str]:
    out: list[str] = []
    for w in _WORD.findall(text.replace("`", "")):
        f = fold(w)
        if (
            f
            and f not in STOPWORDS
            and f not in NEGATIONS
            and f not in CHANGE_WORDS
            and f not in out
        ):
            out.append(f)
    return frozenset(out[:limit])


def change(p: Passage) -> Change | None:
    """The change a passage says happened, if it says one."""
    text = p.text
    if not _TRIGGER.search(text):
        return None
    m = _MOVE.search(text) or _REPLACED.search(text)
    if m:
        old, new = _stems(m["old"], 2), _stems(m["new"] or "", 1)
        spans = [m.span("old")] + ([m.span("new")] if m["new"] else [])
        return Change(old, new, _outside(text, spans), False) if old else None
    m = _INSTEAD.search(text)
    if m:
        before = [w for w in _stems_list(m["new"]) if w not in CHANGE_WORDS]
        old = _stems(m["old"], 2)
        if not old or not before:
            return None
        rest = _outside(text, [m.span("old")]) - {before[-1]}
        return Change(old, frozenset(before[-1:]), rest, False)
    if _NO_LONGER.search(text):
        return Change(frozenset(), frozenset(), _outside(text, []), True)
    return None


def _outside(text: str, spans: list[tuple[int, int]]) -> frozenset[str]:
    for a, b in sorted(spans, reverse=True):
        text = text[:a] + " " + text[b:]
    return _stems(text, 1 << 10)


def _stems_list(text: str) -> list[str]:
    return [f for w in _WORD.findall(text.replace("`", "")) if (f := fold(w)) not in STOPWORDS]


def _said(older: Passage, newer: Passage, c: Change) -> bool:
    """Whether ``newer``'s change is said of what ``older`` states."""
    if older.negated:  # (and it says no change of its own: ``judge``)
        return False
    rest = c.rest
    if len(rest) < SUBJECT or not rest <= older.stems:
        return False
    if c.negates:  # "X no longer uses Redis": every word of it in the older statement
        held = set(older.words)
        return all(w in held or fold(w) in CHANGE_WORDS for w in newer.specific)
    return c.old <= older.stems and not (c.new & older.stems)


def _changed_value(a: Passage, b: Passage) -> bool:
    """The same statement with one value changed (a number, a version, a name)."""
    if a.negated or b.negated:
        return False
    only_a, only_b = a.stems - b.stems, b.stems - a.stems
    if not (1 <= len(only_a) <= MAX_VALUE and 1 <= len(only_b) <= MAX_VALUE):
        return False
    if _EVENT.search(a.text) or _EVENT.search(b.text):
        return False
    if not (only_a & a.specific and only_b & b.specific):
        return False
    if not (a.specific & b.specific):  # a subject named in both: not a counter in a template
        return False
    if any(_WHEN.match(w) for w in only_a | only_b):
        return False
    for p, only in ((a, only_a), (b, only_b)):
        at = [i for i, w in enumerate(p.words) if w in only]
        if at[-1] - at[0] + 1 != len(at):  # not one value in a row
            return False
        beside = p.words[max(at[0] - 1, 0) : at[-1] + 2]
        if any(_WHEN.match(w) for w in beside):  # a day of a month: "on 13 October"
            return False
        shared = {w for w in p.words[: at[0]] if w in a.stems and w in b.stems}
        if len(shared) < SUBJECT:  # the subject changed, not a value of it
            return False
    return True


_UNKNOWN = Change(frozenset(), frozenset(), frozenset(), False)


def judge(
    x: Passage,
    y: Passage,
    x_date: date | None,
    y_date: date | None,
    cx: Change | None = _UNKNOWN,
    cy: Change | None = _UNKNOWN,
) -> tuple[Passage, Passage] | None:
    """(older, newer) when one of two passages of different files supersedes the other;
    ``cx``, ``cy``: their ``change`` when known."""
    if x.path == y.path:
        return None
    cx = change(x) if cx is _UNKNOWN else cx
    cy = change(y) if cy is _UNKNOWN else cy
    if cy is not None and cx is None and _said(x, y, cy):
        older, newer = x, y
    elif cx is not None and cy is None and _said(y, x, cx):
        older, newer = y, x
    elif cx is None and cy is None and x_date and y_date and x_date != y_date:
        if not _changed_value(x, y):
            return None
        return (x, y) if x_date < y_date else (y, x)
    else:
        return None
    # Two dated notes: the change must come after what it changes.
    od, nd = (x_date, y_date) if older is x else (y_date, x_date)
    if od and nd and od >= nd:
        return None
    return older, newer


def finding(older: Passage, newer: Passage, severity: str) -> Finding:
    where = Related(newer.path, newer.start_line, newer.end_line)
    return Finding(
        CONFLICT,
        severity,
        older.path,
        older.start_line,
        older.end_line,
        f"probably superseded by {where.citation}",
        [where],
    )


def marked(lines: list[str], p: Passage) -> bool:
    """Whether a passage is already marked superseded: every line of it struck through, or
    its file's front matter holding ``superseded_by``."""
    end = front_matter_end(lines)
    if end and key_line(lines, end, SUPERSEDED_BY):
        return True
    own = [line for line in lines[p.start_line - 1 : p.end_line] if line.strip()]
    return bool(own) and all(_STRUCK.match(line) for line in own)


class Superseded:
    """Which passage supersedes which, kept up to date by ``incremental.Checker`` (which owns
    the passages, their order and the files whose findings changed: ``dirty``; ``lines_of``:
    a file's lines, to leave out the passages already marked superseded)."""

    def __init__(
        self,
        ps: Mapping[int, Passage],
        rank: Mapping[int, object],
        date_of: Callable[[str], date | None],
        dirty: set[str],
        lines_of: Callable[[str], list[str] | None] = lambda path: None,
    ):
        self.ps, self.rank, self.date_of, self.dirty = ps, rank, date_of, dirty
        self.lines_of = lines_of
        self.newer: dict[int, int] = {}  # an older passage -> a newer one that supersedes it
        self.changes: dict[int, str] = {}  # a passage saying a change -> a word it needs
        self.by_word: dict[str, set[int]] = {}  # that word -> the passages that need it
        self.said: dict[int, Change | None] = {}  # each passage's change, read once

    def watch(self, pids: list[int], df: Mapping[str, int]) -> None:
        """Note the passages that say a change ("moved off Helm", "no longer"), by the rarest
        word a passage they are said of must hold."""
        for pid in pids:
            c = self.said[pid] = change(self.ps[pid])
            if c is not None and c.needs:
                word = min(c.needs, key=lambda w: (df.get(w, 0), w))
                self.changes[pid] = word
                self.by_word.setdefault(word, set()).add(pid)

    def changed(self, pids: list[int], all_old: bool) -> None:
        """Judge the pairs of a passage saying a change and one holding the word it needs
        (the duplicate check's keys miss most: the two share only a subject and a value).
        ``all_old``: the passages saying a change among ``pids`` are new, and every other
        passage is asked about them."""
        for pid in pids:
            for w in self.ps[pid].stems & self.by_word.keys():
                for c in self.by_word[w]:
                    if c != pid:
                        self.judge(pid, c)
        mine = [(pid, self.changes[pid]) for pid in pids if pid in self.changes]
        if all_old and mine:
            for o, p in self.ps.items():
                for pid, word in mine:
                    if word in p.stems and o != pid:
                        self.judge(o, pid)

    def judge(self, a: int, b: int) -> None:
        """Whether one of a pair supersedes the other; an older passage keeps its earliest
        newer one."""
        pa, pb = self.ps[a], self.ps[b]
        if pa.path == pb.path:
            return
        ca, cb = self.said.get(a, _UNKNOWN), self.said.get(b, _UNKNOWN)
        got = judge(pa, pb, self.date_of(pa.path), self.date_of(pb.path), ca, cb)
        if got is None:
            return
        older, newer = (a, b) if got[0] is pa else (b, a)
        old = self.newer.get(older)
        if old is None or self.rank[newer] < self.rank[old]:  # type: ignore[operator]
            self.newer[older] = newer
            self.dirty.add(self.ps[older].path)

    def forget(self, pid: int) -> None:
        self.newer.pop(pid, None)
        self.said.pop(pid, None)
        word = self.changes.pop(pid, None)
        if word is not None:
            self.by_word[word].discard(pid)
            if not self.by_word[word]:
                del self.by_word[word]

    def stale(self, gone: set[int]) -> set[int]:
        """The older passages whose newer one is gone (to be judged again)."""
        out = {older for older, newer in self.newer.items() if newer in gone}
        for older in out:
            del self.newer[older]
            self.dirty.add(self.ps[older].path)
        return out

    def findings(self, pids: list[int], severity: str) -> list[Finding]:
        out = []
        for pid in pids:
            if pid not in self.newer:
                continue
            older = self.ps[pid]
            lines = self.lines_of(older.path)
            if lines is None or not marked(lines, older):
                out.append(finding(older, self.ps[self.newer[pid]], severity))
        return out
