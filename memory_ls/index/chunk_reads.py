"""A search's reads of chunk rows from SQLite: by id, and which chunks a filter lets through.

Filters on path, date and source were applied to the candidates only, so a match ranked past
them was never seen (a folder's notes in a memory of a few hundred: ``file:memory/b/`` found
nothing). When few chunks pass such a filter, the search scores those chunks alone
(``search/retrieve.py``); ``Scope`` is what the index can tell about them without scoring.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .rows import ChunkRow
from .schema import Connection


@dataclass(frozen=True)
class Scope:
    """Chunks a filtered search may return: of one of ``sources`` (None: any), under every
    path prefix, and with ``after`` / ``before`` (inclusive ISO dates) of dated files only."""

    sources: frozenset[str] | None = None
    prefixes: tuple[str, ...] = ()
    after: str | None = None
    before: str | None = None
    tags: tuple[str, ...] = ()  # files whose front matter may hold these tags (a superset)


def where(scope: Scope, mark: str) -> tuple[str, list[object]]:
    """The scope as SQL over the files table ``f`` (``mark``: the driver's parameter mark),
    and its parameters: a filter on files, far fewer rows than chunks, read whole."""
    sql: list[str] = ["TRUE"]
    args: list[object] = []
    if scope.sources is not None:
        marks = ",".join([mark] * len(scope.sources))
        sql.append(f"f.source IN ({marks})" if scope.sources else "FALSE")
        args += sorted(scope.sources)
    for p in scope.prefixes:  # by characters: no collation decides what a prefix is
        sql.append(f"substr(f.path, 1, {mark}) = {mark}")
        args += [len(p), p]
    if scope.after or scope.before:
        sql.append("f.date IS NOT NULL")
    if scope.after:
        sql.append(f"f.date >= {mark}")
        args.append(scope.after)
    if scope.before:
        sql.append(f"f.date <= {mark}")
        args.append(scope.before)
    for tag in scope.tags:  # the JSON string of the tag, anywhere in meta: a superset
        sql.append(f"f.meta LIKE {mark} ESCAPE '\\'")
        args.append("%" + re.sub(r"([%_\\])", r"\\\1", json.dumps(tag, ensure_ascii=False)) + "%")
    return " AND ".join(sql), args


def chunks_in(conn: Connection, scope: Scope, cap: int) -> list[int] | None:
    """The ids of the chunks in ``scope``, None when there are more than ``cap``."""
    cond, args = where(scope, "?")
    rows = conn.execute(
        # CROSS JOIN: files first, far fewer (left to itself, SQLite walked every chunk).
        f"SELECT c.id FROM files f CROSS JOIN chunks c ON c.path = f.path WHERE {cond} LIMIT ?",
        [*args, cap + 1],
    ).fetchall()
    return None if len(rows) > cap else [r[0] for r in rows]


def chunks_by_ids(conn: Connection, ids: Iterable[int]) -> dict[int, ChunkRow]:
    ids = list(ids)
    out: dict[int, ChunkRow] = {}
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.text, f.date, f.meta "
            f"FROM chunks c LEFT JOIN files f ON f.path = c.path WHERE c.id IN ({marks})",
            part,
        ).fetchall()
        out.update({r[0]: ChunkRow(*r) for r in rows})
    return out
