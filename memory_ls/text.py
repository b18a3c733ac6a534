"""Text rules shared by indexing and search: what counts as CJK, and the text FTS5 stores.

FTS5's unicode61 tokenizer splits on spaces, so a Chinese sentence would be one giant token.
Both the indexed text and the query therefore rewrite every run of CJK characters as
overlapping bigrams plus the run's last character (``令牌桶限流`` -> ``令牌 牌桶 桶限 限流 流``):
a two-character query word is then one exact token, and a one-character word is a prefix
query (``限*``) that every character of a run can answer.

A leaf module: chunking, the store and the query parser all import it, and it imports none
of them.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path

# Han, Hiragana, Katakana, Hangul (syllables, jamo, compatibility jamo), half-width Katakana.
CJK_RANGES = (
    (0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
    (0xAC00, 0xD7AF), (0x1100, 0x11FF), (0x3130, 0x318F), (0xFF66, 0xFF9F),
)  # fmt: skip
CJK_CHARS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES)
CJK_CHAR = re.compile(f"[{CJK_CHARS}]")
CJK_RUN = re.compile(f"[{CJK_CHARS}]+")


def cjk_grams(run: str) -> list[str]:
    """A CJK run as overlapping bigrams plus its last character (one character: itself)."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


def fts_text(text: str) -> str:
    """The text as stored in FTS5: CJK runs replaced by their grams, the rest unchanged."""
    if not CJK_RUN.search(text):
        return text
    return CJK_RUN.sub(lambda m: " " + " ".join(cjk_grams(m.group())) + " ", text)


@cache
def rules_stamp() -> str:
    """Changes whenever these rules might: an FTS5 index written under other rules is rebuilt
    (a contentless FTS5 row is deleted by re-deriving its tokens, which must match)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
