"""YAML front matter, read safely: at most 64 KB, no aliases (an alias bomb expands a few
lines into gigabytes), PyYAML's safe loader (plain data, never objects). The index keeps it
apart from the body (``FileMeta``): search reads its tags, aliases, date and expiry, the checks
its lines; it is never indexed as body text, and memory-ls never adds or changes it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs in the install

MAX_BYTES = 64 * 1024
EXPIRY_KEYS = ("expires", "valid_until")
_DATE_LIKE = re.compile(r"^\s*\d{4}-\d{1,2}-\d{1,2}\s*$")


class _NoAliases(yaml.SafeLoader):
    """The safe loader, refusing any alias before it is expanded."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(
                None, None, "uses an alias (*name), which memory-ls does not expand", mark
            )
        return super().compose_node(parent, index)


def front_matter_end(lines: list[str]) -> int:
    """The line that closes the front matter (``---`` or ``...``), 0 when there is none: a
    file that opens with ``---`` and never closes it opens with a rule, not front matter."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            return i + 1
    return 0


@dataclass(frozen=True)
class FrontMatter:
    end: int  # its closing line (it spans lines 1 to end)
    data: dict[str, Any] | None  # None: unreadable (``problem`` says why)
    problem: str | None = None
    line: int | None = None  # where the problem is, when known


def read(lines: list[str], cut: frozenset[int] = frozenset()) -> FrontMatter | None:
    """The front matter of a file's lines, None when it has none; ``cut``: lines the index
    holds in pieces only (a line of thousands of characters), which it is not read with."""
    end = front_matter_end(lines)
    if not end:
        return None
    body = "\n".join(lines[1 : end - 1])
    if any(1 < n < end for n in cut):
        first = min(n for n in cut if 1 < n < end)
        return FrontMatter(end, None, "front matter with a line too long to read: not read", first)
    if len(body.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        return FrontMatter(end, None, f"front matter over {MAX_BYTES // 1024} KB: not read")
    try:
        data = yaml.load(body, Loader=_NoAliases)  # a SafeLoader that refuses aliases
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line: int | None = 2 + mark.line if mark is not None else None
        what = exc.problem or exc.context or "not YAML"
        return FrontMatter(end, None, f"front matter is not readable YAML: {what}", line)
    except ValueError as exc:  # 2026-02-30 looks like a date to YAML, and is none
        return FrontMatter(end, None, f"front matter holds a date that does not exist: {exc}")
    except (yaml.YAMLError, RecursionError) as exc:
        return FrontMatter(end, None, f"front matter is not readable YAML: {exc}")
    if data is None:
        return FrontMatter(end, {})
    if not isinstance(data, dict):
        return FrontMatter(end, None, "front matter is not a mapping of keys to values")
    return FrontMatter(end, data)


def key_line(lines: list[str], end: int, key: str) -> int | None:
    pattern = re.compile(rf"^\s*['\"]?{re.escape(key)}['\"]?\s*:")
    return next((i for i in range(2, end) if pattern.match(lines[i - 1])), None)


def expiry(value: Any) -> date | str:
    """The date of an ``expires:`` value, or why it is none."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            if _DATE_LIKE.match(value):
                return f"{value.strip()!r} is not a date that exists"
    shown = repr(value) if value is not None else "nothing"
    return f"{shown} is not a date: write it as YYYY-MM-DD"


@dataclass(frozen=True)
class FileMeta:
    """What the index keeps of a Markdown file's front matter (``files.meta``, JSON): the
    lines themselves (the checks read them as the file has them; the chunks, which search
    reads, do not hold them) and what search uses of them. Lowercased tags, the note's other
    names, its stated date and the day it expires (ISO dates; None: none, or unreadable)."""

    end: int
    raw: str
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    date: str | None = None
    expires: str | None = None

    def to_json(self) -> str:
        out: dict[str, Any] = {"end": self.end, "raw": self.raw}
        for key in ("tags", "aliases"):
            if getattr(self, key):
                out[key] = list(getattr(self, key))
        for key in ("date", "expires"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> FileMeta | None:
        """The row's meta; None when there is none or it is not what ``to_json`` writes (an
        index written by another version: the file is then searched as if it had none)."""
        if not text:
            return None
        try:
            d = json.loads(text)
            return cls(
                int(d["end"]), str(d["raw"]),
                tuple(map(str, d.get("tags", ()))), tuple(map(str, d.get("aliases", ()))),
                d.get("date"), d.get("expires"),
            )  # fmt: skip
        except (ValueError, TypeError, KeyError):
            return None

    def lines(self) -> list[str]:
        return self.raw.split("\n")


def file_meta(lines: list[str]) -> FileMeta | None:
    """The front matter of a Markdown file's lines as the index keeps it; None: it has none.
    Unreadable front matter is kept too (its lines, for the check that says why), with no
    tags, dates or expiry."""
    fm = read(lines)
    if fm is None:
        return None
    raw = "\n".join(lines[: fm.end])
    if fm.data is None:
        return FileMeta(fm.end, raw)
    data = fm.data
    stated = _date(data.get("date"))
    whens = [expiry(data[k]) for k in EXPIRY_KEYS if k in data]
    expires = next((w.isoformat() for w in whens if isinstance(w, date)), None)
    return FileMeta(
        fm.end, raw, _names(data.get("tags"), split=True), _names(data.get("aliases")),
        stated, expires,
    )  # fmt: skip


def _names(value: Any, split: bool = False) -> tuple[str, ...]:
    """Tags (``[deploy, helm]``, ``deploy, helm``, ``"#deploy"``) or aliases (a list, or one
    name), lowercased, in order, each once; anything else (numbers, mappings) is skipped."""
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            continue
        parts = re.split(r"[,\s]+", str(item)) if split else [str(item)]
        for p in parts:
            name = " ".join(p.split()).lstrip("#").lower() if split else " ".join(p.split()).lower()
            if name and name not in out:
                out.append(name)
    return tuple(out)


def _date(value: Any) -> str | None:
    when = expiry(value) if value is not None else None
    return when.isoformat() if isinstance(when, date) else None
