"""Document frequencies of query words, as the index tokenizes them (stemmed, folded)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .keyword_scan import ID_BOUNDS
from .schema import FTS_TOKENIZER

DF_CACHE_SECONDS = 10.0
# Counting a word's chunks reads its whole list: 20-30 ms for a word in 60% of a million
# chunks, paid at its first sight (and every 10 s). From this many chunks, a word that fills
# more than COMMON_SHARE of a probe window is counted in WINDOWS windows spread over the ids
# instead (1/64 of the index; within 2% for such words on perf.py's corpus, about 1 ms).
# Such a word is left out of the keyword query anyway (``query.commonTermFraction``), and
# its count only weighs it in the keyword score's coverage, where 2% changes nothing.
ESTIMATE_FROM = 100_000
COMMON_SHARE = 0.3
WINDOWS = 16
MIN_WINDOW = 64  # ids a window spans at least: a share of a handful of chunks means little
_IN_WINDOW = "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid >= ? AND rowid < ?"
# FTS5's row of lengths per chunk: a few bytes a row, where chunks holds the text.
_CHUNKS_IN = "SELECT count(*) FROM chunks_fts_docsize WHERE id >= ? AND id < ?"


class DocFrequencies:
    """Per connection: uses connection-local temp tables, so a reader never writes the file."""

    def __init__(self, conn: Any):
        self.conn = conn
        self._vocab_ready = False
        self._df_cache: dict[str, int] = {}
        self._df_total = 0
        self._df_time = -DF_CACHE_SECONDS - 1.0
        self._ids: tuple[int, int] | None = None  # (first, last) chunk id, for estimates

    def count(self, words: Sequence[str]) -> tuple[list[int], int]:
        """For each query word, the number of chunks holding it (as the index tokenizes it:
        stemmed, folded), and the number of chunks. Uses connection-local temp tables, so a
        reader never writes to the index file."""
        if not self._vocab_ready:
            self.conn.executescript(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_tokens USING fts5("
                f"  w, tokenize = '{FTS_TOKENIZER}');"
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_token_list USING fts5vocab("
                "  'temp', 'query_tokens', 'instance');"
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_terms USING fts5vocab("
                "  'main', 'chunks_fts', 'row');"
            )
            self._vocab_ready = True
        self.conn.execute("DELETE FROM temp.query_tokens")
        self.conn.executemany(
            "INSERT INTO temp.query_tokens(rowid, w) VALUES (?, ?)",
            [(i, w) for i, w in enumerate(words, start=1)],
        )
        now = time.monotonic()
        if now - self._df_time > DF_CACHE_SECONDS:
            # Frequencies only steer which words to skip: a few seconds stale is fine, and
            # counting 100k rows on every search is not.
            self._df_cache.clear()
            self._df_total = self._rows()
            self._df_time = now
            self._ids = None
        df = [0] * len(words)
        seen: set[int] = set()
        tokens = self.conn.execute("SELECT doc, term FROM temp.query_token_list").fetchall()
        per_word = Counter(doc for doc, _ in tokens)
        for doc, term in tokens:
            n = self._df_cache.get(term)
            if n is None:
                # A sample is matched by the word (MATCH stems its text again, and stemming a
                # stem may change it: "databas" -> "databa"), so only a word of one token.
                sampled = self._estimate(words[doc - 1]) if per_word[doc] == 1 else None
                n = self._df_cache[term] = sampled or self._count(term)
            i = doc - 1  # a word of several tokens (fly.io) is as rare as its rarest token
            df[i] = n if i not in seen else min(df[i], n)
            seen.add(i)
        return df, self._df_total

    def _count(self, term: str) -> int:
        # One indexed lookup per token (a join made SQLite scan the whole vocabulary).
        row = self.conn.execute(
            "SELECT doc FROM temp.chunk_terms WHERE term = ?", (term,)
        ).fetchone()
        return row[0] if row else 0

    def _estimate(self, word: str) -> int | None:
        """The chunks holding ``word`` (one token) estimated from a sample of the ids, for a
        word in more than COMMON_SHARE of them on a large index; None: count it."""
        total = self._df_total
        if total < ESTIMATE_FROM:
            return None
        if self._ids is None:
            self._ids = self.conn.execute(ID_BOUNDS).fetchone()
        first, last = self._ids
        if first is None or last - first + 1 < total:
            return None
        span = last - first + 1
        width = max(MIN_WINDOW, span // (WINDOWS * 64))
        phrase = '"' + word.replace('"', '""') + '"'

        def window(start: int) -> tuple[int, int]:
            """(chunks holding the word, chunks) in the ids from ``start``: ids of deleted
            chunks are gaps, so a window's chunks are counted, not assumed."""
            at = (start, start + width)
            held = self.conn.execute(_IN_WINDOW, (phrase, *at)).fetchone()[0]
            return int(held), int(self.conn.execute(_CHUNKS_IN, at).fetchone()[0])

        held, chunks = window(first + span // 2)
        if not chunks or held < COMMON_SHARE * chunks:  # the usual case: count it
            return None
        sample = [window(first + span * k // WINDOWS) for k in range(WINDOWS)]
        held, chunks = sum(h for h, _ in sample), sum(c for _, c in sample)
        estimate = round(held / max(chunks, 1) * total)
        return estimate if estimate > COMMON_SHARE * total else None

    def _rows(self) -> int:
        """Chunks in the index, from FTS5's averages record (id 1 of its data table: the row
        count first, as a varint), which FTS5 keeps exact in the same transaction as every
        write. ``count(*)`` reads the whole table: 15-25 ms at a million chunks, paid by the
        first search after every pause of 10 s."""
        row = self.conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
        n = varint(row[0]) if row and row[0] else None
        if n is None:  # no record yet (an empty index) or not the expected layout
            return int(self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        return n


def varint(data: bytes) -> int | None:
    """SQLite's varint (as FTS5 writes it): 7 bits a byte, high bit set while more follow,
    the ninth byte whole; None when ``data`` ends first."""
    n = 0
    for i, byte in enumerate(data[:9]):
        if i == 8:
            return (n << 8) | byte
        n = (n << 7) | (byte & 0x7F)
        if byte < 0x80:
            return n
    return None
