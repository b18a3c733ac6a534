"""The words PostgreSQL indexes, produced in Python the way FTS5 produces them.

FTS5's ``unicode61 remove_diacritics 2`` splits on everything but letters and digits, folds case
and strips Latin diacritics; CJK runs arrive as bigrams (``memory_ls.text.fts_text``). Doing the
same here and handing PostgreSQL space-separated tokens means its parser sees plain words only
(no "host" token for ``fly.io``, no hyphenated compounds), so both backends match the same words;
PostgreSQL then stems them with the english Snowball stemmer (FTS5: Porter).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from ...text import fts_text

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
MAX_TOKEN_CHARS = 200  # PostgreSQL refuses lexemes over 2 KB; such "words" are noise anyway


def _latin_fold_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for cp in [*range(0xC0, 0x250), *range(0x1E00, 0x1F00)]:
        base = unicodedata.normalize("NFD", chr(cp))
        stripped = "".join(ch for ch in base if not unicodedata.combining(ch))
        if stripped and stripped != chr(cp):
            table[cp] = stripped
    return table


_FOLD = _latin_fold_table()


def tokens(text: str) -> list[str]:
    """The words of ``text`` (CJK runs already cut into grams) as FTS5 splits and folds them."""
    folded = text.translate(_FOLD).lower()
    return [t for t in _TOKEN.findall(folded) if len(t) <= MAX_TOKEN_CHARS]


def index_text(text: str) -> tuple[str, int]:
    """(the text handed to to_tsvector, its number of tokens: the BM25 document length)."""
    words = tokens(fts_text(text))
    return " ".join(words), len(words)


@lru_cache(maxsize=4096)
def term_tokens(term: str) -> tuple[str, ...]:
    """A query term's words (its CJK grams were made by the query parser)."""
    return tuple(tokens(term))
