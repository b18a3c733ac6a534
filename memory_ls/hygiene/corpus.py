"""What the checks read: each memory file's lines, rebuilt from the chunks the index holds
and, for its front matter (which chunks do not hold), from the file's row; its size, its date,
and where each line's vector is (the index's line vectors, when it has them).

Chunks hold every line verbatim (overlapping), so the lines are those of the file as indexed;
a line too long for one chunk is cut into pieces, of which the longest is kept, and the line is
marked ``cut`` (such a line is over ~1,600 characters: a pasted blob, not a fact anyone
repeats; front matter holding one is not read).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property

import numpy as np

from ..index.backend import IndexBackend
from ..index.chunk_reads import Scope
from ..roots import MEMORY as MEMORY_ROOTS
from ..sources.dates import file_date
from ..sources.frontmatter import FileMeta
from ..workspace import MEMORY_DIR

MEMORY = frozenset({"memory"})
ALL_CHUNKS = 1 << 40


@dataclass
class Doc:
    path: str
    lines: list[str]  # lines[0] is line 1; a line no chunk holds (a blank run) is ""
    size: int  # bytes
    draft: bool = False  # the note an agent is about to write: later than everything
    cut: frozenset[int] = frozenset()  # lines seen in part only (cut into several chunks)
    # line -> (chunk id, row of that line in the chunk's text), for the line vectors
    rows: dict[int, tuple[int, int]] = field(default_factory=dict)
    stated: str | None = None  # the date its front matter states (ISO)

    @cached_property
    def date(self) -> date | None:
        """A dated note's date (``memory/**/YYYY-MM-DD*.md``, else its front matter's
        ``date:``); None for an evergreen file (read once: the orphan check and the order of
        copies ask it of every file)."""
        if not self.stated and not self.path.startswith((MEMORY_DIR + "/", MEMORY_ROOTS.prefix)):
            return None
        return file_date(self.path, 0.0, self.stated)

    def order(self) -> tuple[int, str, str]:
        """Which of two copies came first: evergreen files (``MEMORY.md``, topic files) by
        path, then dated notes by their date, then a draft."""
        d = self.date
        rank = 2 if self.draft else (1 if d else 0)
        return rank, d.isoformat() if d else "", self.path


def draft_doc(path: str, text: str) -> Doc:
    return Doc(path, text.splitlines(), len(text.encode("utf-8", "surrogatepass")), draft=True)


def load_docs(
    store: IndexBackend, leave_out: str | None = None, paths: Iterable[str] | None = None
) -> list[Doc]:
    """Every memory file the index holds (not transcripts), but ``leave_out``, by path;
    ``paths``: those files only (the ones that changed since the last check)."""
    if paths is None:
        ids = store.chunks_in(Scope(sources=MEMORY), ALL_CHUNKS) or []
    else:
        ids = []
        for p in paths:
            ids += store.chunks_in(Scope(sources=MEMORY, prefixes=(p,)), ALL_CHUNKS) or []
    rows = store.chunks_by_ids(ids)
    wanted = None if paths is None else set(paths)
    states = store.file_states(wanted)
    per: dict[str, dict[int, str]] = {}
    where: dict[str, dict[int, tuple[int, int]]] = {}
    alone: dict[str, set[int]] = {}  # lines that are a chunk on their own
    cut: dict[str, set[int]] = {}
    metas: dict[str, FileMeta] = {}
    for cid in sorted(rows):
        r = rows[cid]
        if r.path == leave_out or (wanted is not None and r.path not in wanted):
            continue
        if r.meta and r.path not in metas and (meta := FileMeta.from_json(r.meta)):
            metas[r.path] = meta
        got = per.setdefault(r.path, {})
        at = where.setdefault(r.path, {})
        parts = r.text.split("\n")
        whole = len(parts) == r.end_line - r.start_line + 1  # else a long line was cut
        if r.start_line == r.end_line:
            # Overlap never makes a line a chunk on its own twice: its pieces do.
            if r.start_line in alone.setdefault(r.path, set()) or not whole:
                cut.setdefault(r.path, set()).add(r.start_line)
            alone[r.path].add(r.start_line)
        elif not whole:
            cut.setdefault(r.path, set()).add(r.start_line)
        for i, text in enumerate(parts):
            n = r.start_line + i if whole else r.start_line
            if len(text) > len(got.get(n, "")):
                got[n] = text
            if whole:
                at.setdefault(n, (cid, i))
    docs = []
    for path in sorted(per):
        got = per[path]
        meta = metas.get(path)
        if meta:
            got.update(enumerate(meta.lines(), start=1))
        lines = [got.get(n, "") for n in range(1, max(got) + 1)]
        size = states[path].size if path in states else 0
        cuts = frozenset(cut.get(path, ()))
        stated = meta.date if meta else None
        docs.append(Doc(path, lines, size, rows=where[path], cut=cuts, stated=stated))
    return docs


class LineVectors:
    """The stored line vectors of the lines asked for (unit length), fetched once."""

    def __init__(self, store: IndexBackend):
        self.store = store
        self.found: dict[tuple[str, int], np.ndarray] = {}

    def fetch(self, docs: Iterable[tuple[Doc, Iterable[int]]]) -> None:
        want: dict[int, list[tuple[str, int, int]]] = {}
        for doc, lines in docs:
            for n in lines:
                if n in doc.rows:
                    cid, row = doc.rows[n]
                    want.setdefault(cid, []).append((doc.path, n, row))
        if not want or self.store.lines is None:
            return
        for cid, chunk in self.store.lines.get(sorted(want)).items():
            by_row = {int(r): i for i, r in reversed(list(enumerate(chunk.rows)))}
            for path, n, row in want[cid]:
                if row in by_row:
                    self.found[(path, n)] = chunk.vectors[by_row[row]]

    def cosine(self, a: tuple[str, Iterable[int]], b: tuple[str, Iterable[int]]) -> float | None:
        """The best cosine between a line of ``a`` and a line of ``b``; None: no vectors."""
        va = [self.found[(a[0], n)] for n in a[1] if (a[0], n) in self.found]
        vb = [self.found[(b[0], n)] for n in b[1] if (b[0], n) in self.found]
        if not va or not vb:
            return None
        return float((np.stack(va) @ np.stack(vb).T).max())
