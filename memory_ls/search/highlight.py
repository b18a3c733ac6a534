"""Where a hit matches its query: the line to jump to and the query terms the hit contains.

Editors used to guess this from the snippet with their own word splitting, which drifted
from the search itself (stop words, CJK grams, porter stemming, folded diacritics). Here the
lines of the picked chunks go into an in-memory FTS5 table of the thread's own (emptied for
each search) with the index's own tokenizer and each query term is matched there, so a line
holds a term exactly when the index would say so (``limits`` finds ``limiting``, ``限流``
finds ``令牌桶限流``).
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..index.backend import SearchSource
from ..index.rows import ChunkRow
from ..index.schema import FTS_TOKENIZER, Connection, connect
from ..sources.sessions import ROLE_LABELS, TOOL_LABEL
from ..text import fts_text
from .query import keywords, match_expression, parse_filters, query_terms, word_expression

Term = tuple[str, bool]  # (word or CJK gram, is a prefix), as query_terms gives them

_HEADING = re.compile(r"^ {0,3}#{1,6}\s")
_ROLE_STARTS = tuple(ROLE_LABELS.values())
_MESSAGE_STARTS = (*_ROLE_STARTS, TOOL_LABEL)


@dataclass(frozen=True)
class Highlight:
    best_line: int  # 1-based line of the original file (a transcript's JSONL line)
    matched_terms: list[str]  # the query's terms found in the chunk, in query order


def term_groups(query: str) -> list[list[Term]]:
    """The terms the search matches for ``query``, grouped by the word they come from (a CJK
    word gives its grams). Filters (``file:``, ``after:``, ``-excluded``) are not terms."""
    return word_groups(parse_filters(query)[0])


def word_groups(words: str) -> list[list[Term]]:
    """``term_groups`` of a query's words (its text without the filters)."""
    searched = set(query_terms(words))  # deduplicated and capped as the search does
    groups = [[t for t in query_terms(w) if t in searched] for w in keywords(words)]
    return [g for g in groups if g]


_scratch = threading.local()


def _lines_table() -> Connection:
    """This thread's in-memory FTS5 table of lines. Contentless, so that emptying it is one
    cheap command: a table made per call cost twice as much (0.4 against 0.2 ms a call)."""
    conn = getattr(_scratch, "conn", None)
    if conn is None:
        conn, _ = connect(":memory:", vec=False)
        conn.execute(
            f"CREATE VIRTUAL TABLE lines USING fts5(body, content='', tokenize='{FTS_TOKENIZER}')"
        )
        _scratch.conn = conn
    return conn


def _filled(lines: Sequence[str]) -> Connection:
    """This thread's lines table holding ``lines`` (rowid: the index), and nothing else."""
    conn = _lines_table()
    with conn:  # one transaction: a commit per row costs FTS5 a segment per row
        conn.execute("BEGIN")
        conn.execute("INSERT INTO lines(lines) VALUES ('delete-all')")
        conn.executemany(
            "INSERT INTO lines(rowid, body) VALUES (?, ?)",
            [(i, fts_text(line)) for i, line in enumerate(lines)],
        )
    return conn


_MATCH = "SELECT rowid FROM lines WHERE lines MATCH ?"


def _matching_lines(lines: Sequence[str], terms: Sequence[Term]) -> dict[int, set[Term]]:
    """For each line (by index) that FTS5 finds any of the terms in, those terms."""
    conn = _filled(lines)
    found: dict[int, set[Term]] = {}
    for t in terms:
        for (i,) in conn.execute(_MATCH, (match_expression([t]),)):
            found.setdefault(i, set()).add(t)
    return found


def with_words(texts: Sequence[str], required: Sequence[str], excluded: Sequence[str]) -> set[int]:
    """The indexes of the texts holding every ``+required`` word and no ``-excluded`` one, as
    the search matches words (stemmed, diacritics folded, CJK by grams): a substring test
    dropped a note about something "good" for ``-go`` and one about a "café" for ``+cafe``.
    A word without letters (an emoji) is looked for as it is."""
    conn = _filled(texts)

    def holding(word: str) -> set[int]:
        expr = word_expression(word)
        if expr is None:
            return {i for i, t in enumerate(texts) if word in t.lower()}
        return {i for (i,) in conn.execute(_MATCH, (expr,))}

    keep = set(range(len(texts)))
    for w in required:
        keep &= holding(w)
    for w in excluded:
        keep -= holding(w)
    return keep


def terms_in(text: str, terms: Sequence[Term]) -> set[Term]:
    """The terms FTS5 finds in ``text`` (as the index tokenizes it: stemmed, folded)."""
    found = _matching_lines([text], terms) if terms and text else {}
    return found.get(0, set())


def highlight(
    query: str,
    chunks: Sequence[tuple[str, Sequence[int]]],
    closest: Sequence[Mapping[int, float]] | None = None,
) -> list[Highlight]:
    """For each chunk, given as its text and the original line number of each of its lines:
    the line matching most of the query's words, and the query's terms found in the chunk.

    A word counts in proportion to its terms a line holds (a CJK word by its grams), so one
    long CJK word does not outweigh the other words. On a tie a body line beats a heading
    that only names the topic, then the line closest to the query by meaning (``closest``:
    per chunk, line index -> cosine of its line vector), then the earlier line. A chunk
    matching no term (a vector-only hit) points at its closest line, else its first."""
    return highlight_groups(term_groups(query), chunks, closest)


def highlight_groups(
    groups: list[list[Term]],
    chunks: Sequence[tuple[str, Sequence[int]]],
    closest: Sequence[Mapping[int, float]] | None = None,
) -> list[Highlight]:
    """``highlight`` for the term groups of a query already parsed (``word_groups``)."""
    terms = list(dict.fromkeys(t for g in groups for t in g))
    split = [text.split("\n") for text, _ in chunks]
    flat = [line for lines in split for line in lines]
    found = _matching_lines(flat, terms) if terms and flat else {}
    out: list[Highlight] = []
    base = 0
    for k, (lines, (_, numbers)) in enumerate(zip(split, chunks, strict=True)):
        sims = closest[k] if closest else {}
        best, best_key = 0, (0.0, False, -2.0)
        in_chunk: set[Term] = set()
        for i, line in enumerate(lines):
            here = found.get(base + i)
            if not here and i not in sims:
                continue
            in_chunk |= here or set()
            score = sum(len((here or set()).intersection(g)) / len(g) for g in groups)
            key = (score, not _HEADING.match(line), sims.get(i, -1.0))
            if key > best_key:
                best, best_key = i, key
        out.append(Highlight(numbers[best], [w for w, p in terms if (w, p) in in_chunk]))
        base += len(lines)
    return out


def line_numbers(
    text: str, start_line: int, end_line: int, line_map: Sequence[int] | None
) -> list[int]:
    """The original line number of each line of a chunk's text.

    A note's chunk is its lines start..end, one to one. A transcript's chunk is a window of
    its rendered lines, numbered by the file's line map (rendered line -> JSONL line) once
    the window is placed: it starts inside message ``start_line``, ends inside message
    ``end_line``, and a role label (``User: ``) starts a message and nothing else. When the
    text cannot be placed for sure (a line too long for one chunk was cut into pieces, or
    two placements fit), every line gets ``start_line``: the hit's first line, never a
    wrong one."""
    lines = text.split("\n")
    if start_line == end_line:
        return [start_line] * len(lines)
    if line_map is None:
        if len(lines) == end_line - start_line + 1:
            return list(range(start_line, end_line + 1))
    else:
        placed = _place(lines, start_line, end_line, line_map)
        if placed is not None:
            return placed
    return [start_line] * len(lines)


def _place(lines: list[str], start: int, end: int, line_map: Sequence[int]) -> list[int] | None:
    """The line numbers of the one window of messages start..end that ``lines`` fits."""
    span = line_map[bisect_left(line_map, start) : bisect_right(line_map, end)]
    fits: list[list[int]] = []
    for offset in range(len(span) - len(lines) + 1):
        if span[offset] != start:
            break  # the window must begin inside message ``start``
        window = list(span[offset : offset + len(lines)])
        if window[-1] != end:
            continue
        firsts = [
            (offset == 0) if j == 0 else window[j] != window[j - 1] for j in range(len(lines))
        ]
        if all(
            line.startswith(_MESSAGE_STARTS) if first else not line.startswith(_ROLE_STARTS)
            for line, first in zip(lines, firsts, strict=True)
        ):
            fits.append(window)
    return fits[0] if len(fits) == 1 else None


def highlight_rows(
    words: str,
    rows: Sequence[ChunkRow],
    store: SearchSource,
    closest: Sequence[Mapping[int, float]] | None = None,
) -> list[Highlight]:
    """``highlight`` for chunks of the index, numbered with their files' line maps; ``words``:
    the query's words (its filters taken out)."""
    infos = store.file_infos(r.path for r in rows) if rows else {}
    maps = {path: info[2] for path, info in infos.items()}
    return highlight_groups(
        word_groups(words),
        [(r.text, line_numbers(r.text, r.start_line, r.end_line, maps.get(r.path))) for r in rows],
        closest,
    )
