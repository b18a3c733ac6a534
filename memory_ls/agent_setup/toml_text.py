"""Small textual edits of a TOML file that keep every other byte of it: a table appended, a
top-level key inserted above the first table, one statement or one table's keys replaced.

Why text and not a TOML library that round-trips: these edits touch only lines memory-ls wrote
or is replacing, so comments, spacing and key order elsewhere stay exactly as the user left them,
with no new dependency; and every result is parsed back with ``tomllib`` and compared with what
it must mean (``verify``), so an edit that a file's layout would defeat (a multi-line string that
looks like a table, an inline table) is refused instead of written.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Sequence
from typing import Any

from .change import SetupError

HEADER = re.compile(r"^\s*\[")


def string(s: str) -> str:
    # A JSON string is a TOML basic string: the same quotes and escapes (\" \\ \n \uXXXX).
    return json.dumps(s, ensure_ascii=False)


def array(items: Sequence[str]) -> str:
    return "[" + ", ".join(string(x) for x in items) + "]"


def first_header(lines: list[str], start: int = 0) -> int:
    return next((i for i in range(start, len(lines)) if HEADER.match(lines[i])), len(lines))


def statement_end(lines: list[str], i: int, limit: int) -> int:
    """End (exclusive) of the key = value statement that starts at ``lines[i]``: the first
    prefix that parses on its own (a multi-line array or string parses once it is closed)."""
    for j in range(i + 1, limit + 1):
        try:
            tomllib.loads("".join(lines[i:j]))
            return j
        except tomllib.TOMLDecodeError:
            continue
    raise SetupError(f"cannot find where the statement on line {i + 1} ends")


def statements(lines: list[str], start: int, end: int) -> list[tuple[str | None, list[str]]]:
    """The lines from ``start`` to ``end`` as (key, lines): key None for blanks and comments."""
    out: list[tuple[str | None, list[str]]] = []
    i = start
    while i < end:
        stripped = lines[i].strip()
        if not stripped or stripped.startswith("#"):
            out.append((None, [lines[i]]))
            i += 1
            continue
        j = statement_end(lines, i, end)
        key = next(iter(tomllib.loads("".join(lines[i:j]))), None)
        out.append((key, lines[i:j]))
        i = j
    return out


def top_level_insert(lines: list[str], new: list[str]) -> None:
    """Insert top-level statements above the first table (and the comments just above it,
    which belong to that table)."""
    at = first_header(lines)
    while at > 0 and lines[at - 1].lstrip().startswith("#"):
        at -= 1
    if at < len(lines):
        new = [*new, "\n"]
    lines[at:at] = new


def append_table(lines: list[str], header: str, body: list[str]) -> None:
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    lines += (["\n"] if lines else []) + [f"{header}\n", *body]


def verify(text: str, expected: dict[str, Any], where: str) -> None:
    try:
        ok = tomllib.loads(text) == expected
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        raise SetupError(f"{where}: its layout defeats a safe edit; nothing was written")
