"""A file cut into passages (its sentences, each with its lines) and the words each holds.

What is compared is what a note says: headings, code fences, front matter, tables' rules and
lines of a few words are left out; Markdown's marks (list markers, emphasis, link targets) are
taken off, and words are folded (case, a few English suffixes) so that "Deployed with Helm."
and "- we **deploy** with helm" hold the same words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..search.query import stop_words
from ..sources.frontmatter import front_matter_end

MIN_WORDS = 6  # "Use pnpm.", "Done.": too short to say the same thing twice by chance
_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
_RULE = re.compile(r"^\s*(?:[-*_]\s*){3,}$|^\s*\|?[\s:|-]+\|[\s:|-]*$")
_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]*)[^)]*\)")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=\S)")
_WORD = re.compile(r"[\w][\w.\-/:@+#]*[\w]|[\w]", re.UNICODE)
_MID_CAPITAL = re.compile(r"(?<=[\w,;:)] )([A-Z][\w\-]*)")
_CODE = re.compile(r"`([^`]+)`")

STOPWORDS = frozenset(
    str.split(
        """a an the and or but if then so of to in on at by for with from as into onto about over
    under is are was were be been being am do does did done has have had having it its this that
    these those there here we our us i me my you your he she they them their his her who whom
    which what when where why how all any some each every both few more most other such only own
    same than too very can could will would shall should may might must just also again once
    now still yet up down out off per via use used using uses will 's"""
    )
)
NEGATIONS = frozenset(
    str.split(
        "not no never none nobody nothing neither nor without cannot can't don't doesn't didn't "
        "isn't aren't wasn't weren't won't shouldn't stopped instead longer anymore"
    )
)


@dataclass
class Passage:
    path: str
    start_line: int
    end_line: int
    text: str  # as written, marks taken off
    words: tuple[str, ...]  # folded, in order (for shingles)
    stems: frozenset[str]  # folded words without stopwords
    specific: frozenset[str]  # words that name something: numbers, versions, names, code
    negated: bool
    content: int = 0  # distinct content words: not a stop word of any language search knows


@lru_cache(maxsize=1 << 17)  # words repeat: folding each once made a check 3x faster
def fold(word: str) -> str:
    w = word.lower().strip(".-/:")
    if w.endswith("'s"):
        w = w[:-2]
    if any(c.isdigit() for c in w):
        return w
    for suffix in ("ments", "ment", "ings", "ing", "ied", "ies", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)] + ("y" if suffix in ("ied", "ies") else "")
            break
    return w


_JOINED = re.compile(r"\w[.\-/_:@]\w")


@lru_cache(maxsize=1 << 17)
def _names(word: str) -> str:
    """A word's folded form when it names something on its own (a number, a version, an
    identifier), else ""."""
    if any(c.isdigit() for c in word) or _JOINED.search(word):
        return fold(word)
    return ""


def _specific(text: str) -> set[str]:
    """Words that name a particular thing: a number or version, an identifier (``auth-svc``,
    ``api.example.com``), a capitalised word inside a sentence, anything in backquotes."""
    out = {n for w in _WORD.findall(text) if (n := _names(w))}
    out |= {fold(m) for m in _MID_CAPITAL.findall(text)}
    for code in _CODE.findall(text):
        out |= {fold(w) for w in _WORD.findall(code)}
    return out


def passage(path: str, first: int, last: int, raw: str) -> Passage | None:
    text = _LINK.sub(lambda m: f"{m[1]} {m[2]}", raw)
    specific = _specific(text)
    plain = re.sub(r"[*_`~]+", "", text)
    words = tuple(fold(w) for w in _WORD.findall(plain))
    if len(words) < MIN_WORDS:
        return None
    stems = frozenset(w for w in words if w not in STOPWORDS and w not in NEGATIONS)
    lowered = {w.lower() for w in re.findall(r"[\w']+", plain)}
    negated = bool(lowered & NEGATIONS) or "no longer" in plain.lower()
    stops = stop_words()
    content = len({fold(w) for w in lowered if w not in stops} & stems)
    return Passage(
        path, first, last, plain.strip(), words, stems, frozenset(specific), negated, content
    )


def _blocks(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(first line, its lines' text) of each list item and paragraph, 1-based; headings, code
    fences, front matter, rules and blank lines end a block and are left out."""
    out: list[tuple[int, list[str]]] = []
    start, buf = 0, list[str]()  # a block being read: its first line and its lines

    def close() -> None:
        nonlocal start, buf
        if buf:
            out.append((start, buf))
        start, buf = 0, list[str]()

    fence = False
    skip = front_matter_end(lines)
    for i, line in enumerate(lines, 1):
        if i <= skip:
            continue
        if _FENCE.match(line):
            close()
            fence = not fence
            continue
        stripped = line.strip()
        if fence or not stripped or stripped.startswith(("#", "<!--", ">")) or _RULE.match(line):
            close()
            continue
        item = _LIST.match(line)
        if item or stripped.startswith("|"):
            close()
            stripped = stripped.strip("|") if not item else line[item.end() :].strip()
        if not buf:
            start = i
        buf.append(stripped)
    close()
    return out


def passages(path: str, lines: list[str]) -> list[Passage]:
    """The sentences of a file's blocks, each with the lines it spans."""
    out: list[Passage] = []
    for first, parts in _blocks(lines):
        text = " ".join(parts)
        # Where each of the block's lines starts in its text, to give a sentence its lines.
        starts, pos = [], 0
        for part in parts:
            starts.append(pos)
            pos += len(part) + 1
        offset = 0
        for sentence in _SENTENCE.split(text):
            at = text.find(sentence, offset)
            offset = at + len(sentence)
            a = first + sum(1 for s in starts if s <= at) - 1
            b = first + sum(1 for s in starts if s < offset) - 1
            p = passage(path, a, max(a, b), sentence)
            if p is not None:
                out.append(p)
    return out
