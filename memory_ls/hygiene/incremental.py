"""The checks kept up to date as files change: ``Checker`` holds, per index, each memory file's
lines, passages and keys, keyed by the file's content hash in the index (``file_states``: the
hash every sync and every indexed editor buffer records). A check reads the hashes, re-reads
and re-splits only the files whose hash moved, and judges only the candidate pairs those files'
passages are in, so the check after one edit costs that file's pairs, not the workspace's.

The first check (and one after more than a tenth of the passages changed) builds everything at
once, as ``duplicates.candidates`` always did: the keys of every passage sorted together. After
that the keys of changed files are kept beside those (``Keys.extra``) and the passages of removed
ones are marked dead. A changed file's rarest-word keys are counted with the document
frequencies of the moment: the keys of files not read again keep theirs, which the next full
build refreshes.

Which hashes to read: every file's, unless the caller passes ``since`` (the engine's journal of
the files it wrote to the index), when only those files' are. Each file's findings are kept too
and found again only for the files that changed or whose copies did (``dirty``); orphans only
when memory files came or went or an index file changed.

Safe to share between threads (a lock around each call): the language server's refresh and a
``memory/check`` draft take turns.
"""

from __future__ import annotations

import posixpath
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date

from ..index.backend import IndexBackend
from ..index.rows import FileState
from ..workspace import ROOT_FILES
from . import checks, drafts, duplicates
from .conflicts import Superseded
from .corpus import Doc, LineVectors, draft_doc, load_docs
from .duplicates import COSINE, RANK, Weights, judge
from .findings import CONFLICT, DUPLICATE, LOAD_CAP, ORPHAN, Finding
from .keys import Keys
from .passages import Passage, passages

REBUILD_SHARE = 0.1  # changed passages, of those the last full build read, that rebuild all
PACE_EVERY = 32  # pairs judged between two calls of Checker.pace (about a millisecond)

# Given the mark of the last check (None: none), a new mark and the paths written since
# (None: unknown, every file's hash is read): the engine's journal of its index's writes.
Since = Callable[[object], tuple[object, set[str] | None]]


@dataclass
class _File:
    hash: str
    doc: Doc | None  # None: not a memory file (a transcript)
    pids: list[int] = field(default_factory=list)
    single: list[Finding] = field(default_factory=list)  # load-cap, front-matter, expired


@dataclass(frozen=True)
class _Match:
    earlier: int
    how: str


class Checker:
    def __init__(self, caps: tuple[checks.LoadCap, ...] = checks.LOAD_CAPS) -> None:
        self.caps = caps  # the load caps checked (checks.caps_of: the documented and the user's)
        # Called now and then by a long check (a worker thread): the language server waits
        # there while requests run (server/lanes.py Requests.yield_to); elsewhere nothing.
        self.pace: Callable[[], None] = _no_pace
        self.lock = threading.Lock()
        self.files: dict[str, _File] = {}
        self.ps: dict[int, Passage] = {}
        self.rank: dict[int, tuple[tuple[int, str, str], int]] = {}
        self.df: Counter[str] = Counter()
        self.keys = Keys()
        self.check_conflicts = False
        self.best: dict[int, _Match] = {}  # a later passage -> the passage it repeats
        self.pending: set[tuple[int, int]] = set()  # (earlier, later): for the vectors to say
        self.next_pid = 0
        self.built = 0  # passages read by the last full build
        self.churn = 0  # passages changed since
        self.single_for: tuple[date, tuple[tuple[str, str], ...]] | None = None
        self.mark: object = None  # the journal's, as of the last refresh
        self.found: dict[str, list[Finding]] = {}  # each file's findings, when it has some
        self.dirty: set[str] = set()  # files whose findings may have changed since
        self.orphans: dict[str, list[Finding]] = {}  # by file
        self.orphans_stale = True  # to find again: memory files came or went, or an index changed
        self.conflicts = Superseded(self.ps, self.rank, self.date_of, self.dirty, self.lines_of)

    # -- keeping up with the index ---------------------------------------------------------
    def _reset(self) -> None:
        lock, pace = self.lock, self.pace
        self.__init__(self.caps)  # type: ignore[misc]
        self.lock, self.pace = lock, pace

    def refresh(
        self,
        store: IndexBackend,
        on: dict[str, str],
        today: date,
        vectors: bool = False,
        since: Since | None = None,
    ) -> set[str]:
        """Bring the cache up to the index; the paths that changed (their findings may have,
        and those of the files that repeat them). ``vectors``: try again the close pairs
        whose line vectors were missing (after an embedding pass). ``since``: which files
        were written since the last refresh (only their hashes are read), when it knows."""
        mark, known = since(self.mark) if since else (None, None)
        single_for = (today, tuple(sorted(on.items())))
        full = self.single_for != single_for or not self.files
        full = full or self.churn > REBUILD_SHARE * max(self.built, 1000)
        if known is not None and not full:
            states = store.file_states(known)
            changed = {p for p in known if p in self.files and p not in states}
        else:
            states = store.file_states()
            changed = {p for p in self.files if p not in states}
        changed |= {
            p for p, st in states.items() if p not in self.files or self.files[p].hash != st.hash
        }
        if full:
            self._full(store, states, on, today)
            changed |= set(self.files)
        elif changed:
            self._update(store, states, changed, on, today)
        if vectors and self.pending:
            self._confirm(store, list(self.pending))
        if since is not None:
            self.mark = mark
        return changed

    def _full(
        self, store: IndexBackend, states: Mapping[str, FileState], on: dict[str, str], today: date
    ) -> None:
        self._reset()
        self.single_for = (today, tuple(sorted(on.items())))
        self.check_conflicts = CONFLICT in on
        docs = {d.path: d for d in load_docs(store)}
        for path, st in states.items():
            self.files[path] = _File(st.hash, None)
        new = self._add(sorted(docs.values(), key=Doc.order), states, on, today)
        self.built, self.churn = len(new), 0
        if CONFLICT in on:
            self.conflicts.watch(new, self.df)
        if DUPLICATE not in on and CONFLICT not in on:
            return
        keyed = ((pid, set(duplicates.keys(self.ps[pid], self.df))) for pid in new)
        pairs: set[tuple[int, int]] = set()
        for group in self.keys.build(keyed):
            pairs.update((a, b) for i, a in enumerate(group) for b in group[i + 1 :])
        self._judge(store, pairs)
        if CONFLICT in on:
            self.conflicts.changed(new, all_old=False)

    def _update(
        self,
        store: IndexBackend,
        states: Mapping[str, FileState],
        changed: set[str],
        on: dict[str, str],
        today: date,
    ) -> None:
        gone: set[int] = set()
        had = {p for p in changed if p in self.files and self.files[p].doc is not None}
        for path in changed:
            f = self.files.pop(path, None)
            if f is not None:
                gone.update(f.pids)
        redo = self._drop(gone)
        present = [p for p in changed if p in states]
        docs = {d.path: d for d in load_docs(store, paths=present)}
        for path in present:
            self.files[path] = _File(states[path].hash, None)
        new = self._add(sorted(docs.values(), key=Doc.order), states, on, today)
        self.churn += len(gone) + len(new)
        self.dirty |= changed
        # Orphans follow which memory files there are and what the index files link.
        if had != set(docs) or any(posixpath.basename(p) in ROOT_FILES for p in changed):
            self.orphans_stale = True
        if CONFLICT in on:
            self.conflicts.watch(new, self.df)
        if DUPLICATE not in on and CONFLICT not in on:
            return
        for pid in new:
            self.keys.add(pid, set(duplicates.keys(self.ps[pid], self.df)))
        pairs: set[tuple[int, int]] = set()
        for pid in [*new, *redo]:
            for group in self.keys.groups(list(duplicates.keys(self.ps[pid], self.df))):
                pairs.update(self._ordered(pid, o) for o in group if o != pid)
        self._judge(store, pairs)
        if CONFLICT in on:
            self.conflicts.changed([*new, *redo], all_old=True)

    def _add(
        self, docs: list[Doc], states: Mapping[str, FileState], on: dict[str, str], today: date
    ) -> list[int]:
        new: list[int] = []
        for n, doc in enumerate(docs):
            if n % 8 == 0:
                self.pace()
            f = self.files.setdefault(
                doc.path, _File(states[doc.path].hash if doc.path in states else "", None)
            )
            f.doc = doc
            f.single = _single(doc, on, today, self.caps)
            self.dirty.add(doc.path)
            order = doc.order()
            for i, p in enumerate(passages(doc.path, doc.lines)):
                pid, self.next_pid = self.next_pid, self.next_pid + 1
                self.ps[pid], self.rank[pid] = p, (order, i)
                self.df.update(p.stems)
                f.pids.append(pid)
                new.append(pid)
        return new

    def _drop(self, gone: set[int]) -> set[int]:
        """Forget passages; the later passages whose match was one of them (to match again)."""
        for pid in gone:
            p = self.ps.pop(pid)
            self.rank.pop(pid)
            for w in p.stems:
                self.df[w] -= 1
                if self.df[w] <= 0:
                    del self.df[w]
            self.keys.drop(pid)
            self.best.pop(pid, None)
            self.conflicts.forget(pid)
        redo = {later for later, m in self.best.items() if m.earlier in gone}
        for later in redo:
            del self.best[later]
            self.dirty.add(self.ps[later].path)
        redo |= self.conflicts.stale(gone)
        self.pending = {pair for pair in self.pending if not (set(pair) & gone)}
        return redo

    def _ordered(self, a: int, b: int) -> tuple[int, int]:
        return (a, b) if self.rank[a] < self.rank[b] else (b, a)

    def _judge(self, store: IndexBackend, pairs: Iterable[tuple[int, int]]) -> None:
        weight = Weights(self.df, len(self.ps))
        maybe = []
        for n, (a, b) in enumerate(pairs):
            if n % PACE_EVERY == 0:
                self.pace()
            if self.check_conflicts:
                self.conflicts.judge(a, b)
            how = judge(self.ps[b], self.ps[a], weight)
            if how == "maybe":
                maybe.append((a, b))
            elif how is not None:
                self._keep(b, _Match(a, how))
        if maybe:
            self._confirm(store, maybe)

    def _confirm(self, store: IndexBackend, maybe: list[tuple[int, int]]) -> None:
        """Ask the line vectors about close pairs; those without vectors wait (``pending``)."""
        if store.lines is None:
            self.pending.update(maybe)
            return
        vectors = LineVectors(store)
        docs = {p: f.doc for p, f in self.files.items() if f.doc is not None}
        vectors.fetch((docs[self.ps[i].path], _span(self.ps[i])) for pair in maybe for i in pair)
        for a, b in maybe:
            cos = vectors.cosine(
                (self.ps[b].path, _span(self.ps[b])), (self.ps[a].path, _span(self.ps[a]))
            )
            if cos is None:
                self.pending.add((a, b))
                continue
            self.pending.discard((a, b))
            if cos >= COSINE and duplicates.names_agree(self.ps[b], self.ps[a]):
                self._keep(b, _Match(a, "paraphrase"))

    def date_of(self, path: str) -> date | None:
        f = self.files.get(path)
        return f.doc.date if f is not None and f.doc is not None else None

    def _keep(self, later: int, m: _Match) -> None:
        """The best match of a passage: the closest, then the earliest."""
        old = self.best.get(later)
        if old is None or (RANK[m.how], self.rank[m.earlier]) < (
            RANK[old.how],
            self.rank[old.earlier],
        ):
            self.best[later] = m
            self.dirty.add(self.ps[later].path)

    def lines_of(self, path: str) -> list[str] | None:
        """A file's lines as last read (for the width of a diagnostic's last line)."""
        f = self.files.get(path)
        return f.doc.lines if f is not None and f.doc is not None else None

    # -- findings ---------------------------------------------------------------------------
    def findings(self, on: dict[str, str]) -> list[Finding]:
        """Every finding over the files as last refreshed: those of the files that changed
        (or whose copies did) found again, the others' kept."""
        if self.orphans_stale:
            old, self.orphans_stale = self.orphans, False
            docs = [f.doc for f in self.files.values() if f.doc is not None]
            self.orphans = {}
            for o in checks.orphans(docs, on[ORPHAN]) if ORPHAN in on else []:
                self.orphans.setdefault(o.path, []).append(o)
            self.dirty |= set(old) | set(self.orphans)
        for path in self.dirty:
            mine: list[Finding] = []
            f = self.files.get(path)
            if f is not None:
                mine += f.single
                if DUPLICATE in on and any(pid in self.best for pid in f.pids):
                    mine += self._duplicates(f.pids, on[DUPLICATE], draft=False)
                if CONFLICT in on:
                    mine += self.conflicts.findings(f.pids, on[CONFLICT])
            mine += self.orphans.get(path, [])
            if mine:
                self.found[path] = sorted(mine, key=lambda f: (f.start_line, f.code))
            else:
                self.found.pop(path, None)
        self.dirty.clear()
        return [f for path in sorted(self.found) for f in self.found[path]]

    def _duplicates(self, pids: list[int], severity: str, draft: bool) -> list[Finding]:
        """Adjacent passages of a file repeating the same file are one finding."""
        out: list[Finding] = []
        run: list[tuple[Passage, Passage]] = []
        last = -2
        for i, pid in enumerate(pids):
            m = self.best.get(pid)
            if m is None:
                continue
            later, earlier = self.ps[pid], self.ps[m.earlier]
            if run and not (i == last + 1 and earlier.path == run[-1][1].path):
                out.append(duplicates.finding_of(run, severity, draft))
                run = []
            run.append((later, earlier))
            last = i
        if run:
            out.append(duplicates.finding_of(run, severity, draft))
        return out

    def check(
        self,
        store: IndexBackend,
        on: dict[str, str],
        today: date,
        vectors: bool = False,
        since: Since | None = None,
    ) -> list[Finding]:
        with self.lock:
            self.refresh(store, on, today, vectors, since)
            return self.findings(on)

    def draft(
        self, store: IndexBackend, on: dict[str, str], text: str, path: str, today: date
    ) -> list[Finding]:
        """The findings ``text`` written to ``path`` would cause, all on the draft (later than
        everything; it stands in for the file at ``path``, whose passages are left out)."""
        with self.lock:
            self.refresh(store, on, today)
            doc = draft_doc(path, text)
            out = _single(doc, on, today, self.caps)
            if ORPHAN in on:
                docs = [f.doc for p, f in self.files.items() if f.doc is not None and p != path]
                out += [f for f in checks.orphans([*docs, doc], on[ORPHAN]) if f.path == path]
            if DUPLICATE in on:
                out += drafts.duplicates_of(self, doc, on[DUPLICATE])
            if CONFLICT in on:
                out += drafts.conflicts_of(self, doc, on[CONFLICT])
            return sorted(out, key=lambda f: (f.path, f.start_line, f.code))


def _no_pace() -> None:
    pass


def _span(p: Passage) -> range:
    return range(p.start_line, p.end_line + 1)


def _single(
    doc: Doc, on: dict[str, str], today: date, caps: tuple[checks.LoadCap, ...]
) -> list[Finding]:
    out = checks.load_cap(doc, on[LOAD_CAP], caps) if LOAD_CAP in on else []
    return out + checks.front_matter(doc, today, on)
