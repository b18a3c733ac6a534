"""A draft checked before it is written (``memory_check``): its copies of what memory holds
and its conflicts with it, against the passages and keys an ``incremental.Checker`` keeps
(the draft is later than everything; it stands in for the file at its path)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import date
from typing import Any, Protocol

from . import conflicts, duplicates
from .conflicts import Superseded
from .corpus import Doc
from .duplicates import RANK, Weights, judge
from .findings import CONFLICT, Finding, Related
from .keys import Keys
from .passages import Passage, passages


class Checker(Protocol):
    """What a draft is checked against (``incremental.Checker``): every file's passages
    (``files[path].pids``), their order, keys and document frequencies, and what says what."""

    @property
    def files(self) -> Mapping[str, Any]: ...
    @property
    def ps(self) -> Mapping[int, Passage]: ...
    @property
    def rank(self) -> Mapping[int, Any]: ...
    @property
    def df(self) -> Counter[str]: ...
    @property
    def keys(self) -> Keys: ...
    @property
    def next_pid(self) -> int: ...
    @property
    def conflicts(self) -> Superseded: ...
    def date_of(self, path: str) -> date | None: ...
    def lines_of(self, path: str) -> list[str] | None: ...


def conflicts_of(ch: Checker, doc: Doc, severity: str) -> list[Finding]:
    """A draft's passages that say a change to what memory holds ("moved off Helm"), or
    that memory says has changed since: one finding each, on the draft, naming the other
    passage (the earliest). Those already marked superseded are left alone."""
    mine = ch.files.get(doc.path)
    left_out = set(mine.pids) if mine else set()
    out: list[Finding] = []
    by_word = ch.conflicts.by_word
    for p in passages(doc.path, doc.lines):
        c = conflicts.change(p)
        cands = {o for w in p.stems & by_word.keys() for o in by_word[w]}
        if c is not None and c.needs:
            word = min(c.needs, key=lambda w: (ch.df.get(w, 0), w))
            cands |= {o for o, q in ch.ps.items() if word in q.stems}
        for o in sorted(cands - left_out, key=lambda o: ch.rank[o]):
            q = ch.ps[o]
            got = conflicts.judge(p, q, doc.date, ch.date_of(q.path), c)
            lines = ch.lines_of(q.path)
            if got is None or (got[0] is q and lines and conflicts.marked(lines, q)):
                continue
            where = Related(q.path, q.start_line, q.end_line)
            if got[1] is p:
                message = (
                    f"changes what {where.citation} says: mark that passage superseded "
                    "when this is written"
                )
            else:
                message = f"memory says this has changed since: {where.citation}"
            at = (p.start_line, p.end_line)
            out.append(Finding(CONFLICT, severity, doc.path, *at, message, [where]))
            break
    return out


def duplicates_of(ch: Checker, doc: Doc, severity: str) -> list[Finding]:
    mine = ch.files.get(doc.path)
    left_out = set(mine.pids) if mine else set()
    ps = passages(doc.path, doc.lines)
    df = Adjusted(ch.df, ps, [ch.ps[i] for i in left_out])
    weight = Weights(df, len(ch.ps) - len(left_out) + len(ps))
    # The draft's passages get ids past every other; the draft's own keys go in ``plus``.
    ids = list(range(ch.next_pid, ch.next_pid + len(ps)))
    keyed = {pid: list(duplicates.keys(p, df)) for pid, p in zip(ids, ps, strict=True)}
    plus: dict[int, list[int]] = {}
    for pid, ks in keyed.items():
        for key in set(ks):
            plus.setdefault(key, []).append(pid)
    local = {pid: p for pid, p in zip(ids, ps, strict=True)}
    best: dict[int, tuple[int, tuple[object, ...], Passage]] = {}
    for pid, ks in keyed.items():
        for group in ch.keys.groups(ks, plus):
            for o in set(group):
                if o == pid or o in left_out or (o in local and o > pid):
                    continue
                earlier = local.get(o) or ch.ps[o]
                how = judge(local[pid], earlier, weight)
                if how in (None, "maybe"):
                    continue
                order = (RANK[how], ch.rank.get(o, ((3, "", ""), o - ch.next_pid)))
                if pid not in best or order < best[pid][1]:
                    best[pid] = (o, order, earlier)
    out: list[Finding] = []
    run: list[tuple[Passage, Passage]] = []
    last = -2
    for i, pid in enumerate(ids):
        if pid not in best:
            continue
        earlier = best[pid][2]
        if run and not (i == last + 1 and earlier.path == run[-1][1].path):
            out.append(duplicates.finding_of(run, severity, True))
            run = []
        run.append((local[pid], earlier))
        last = i
    if run:
        out.append(duplicates.finding_of(run, severity, True))
    return out


class Adjusted(Mapping[str, int]):
    """Document frequencies with a draft's passages in and the file it replaces out."""

    def __init__(self, base: Counter[str], plus: list[Passage], minus: list[Passage]):
        self.base = base
        self.delta: Counter[str] = Counter()
        for p in plus:
            self.delta.update(p.stems)
        for p in minus:
            self.delta.subtract(p.stems)

    def __getitem__(self, w: str) -> int:
        return self.base.get(w, 0) + self.delta.get(w, 0)

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)
