"""YAML front matter, read safely: at most 64 KB, no aliases (an alias bomb expands a few
lines into gigabytes), PyYAML's safe loader (plain data, never objects). memory-ls still
indexes front matter as body text; this only reads it for the checks (``expires:``)."""

from __future__ import annotations

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
