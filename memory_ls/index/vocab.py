"""Document frequencies of query words, as the index tokenizes them (stemmed, folded)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .schema import FTS_TOKENIZER

DF_CACHE_SECONDS = 10.0


class DocFrequencies:
    """Per connection: uses connection-local temp tables, so a reader never writes the file."""

    def __init__(self, conn: Any):
        self.conn = conn
        self._vocab_ready = False
        self._df_cache: dict[str, int] = {}
        self._df_total = 0
        self._df_time = -DF_CACHE_SECONDS - 1.0

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
        df = [0] * len(words)
        seen: set[int] = set()
        tokens = self.conn.execute("SELECT doc, term FROM temp.query_token_list").fetchall()
        for doc, term in tokens:
            n = self._df_cache.get(term)
            if n is None:
                # One indexed lookup per token (a join made SQLite scan the whole vocabulary).
                row = self.conn.execute(
                    "SELECT doc FROM temp.chunk_terms WHERE term = ?", (term,)
                ).fetchone()
                n = self._df_cache[term] = row[0] if row else 0
            i = doc - 1  # a word of several tokens (fly.io) is as rare as its rarest token
            df[i] = n if i not in seen else min(df[i], n)
            seen.add(i)
        return df, self._df_total

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
