"""Files this folder removed that the team index may still hold.

Catching up compares what the local index holds with what the team index holds for the same
paths, and the files this client wrote last. A file removed here whose team row another
machine wrote last (the same note on two machines: the first to push is its writer) is in
neither once the local index has dropped it, so its removal was lost whenever it did not reach
the team index at once: made while PostgreSQL was away, or by a process that connected only
after its own local sync (every ``memory-ls index``). Such removals are kept in the local
index's meta (path -> the hash this folder had), so any later push from this folder, in this
process or another, removes them from the team index too, unless a teammate has changed the
file since (then the team's row is theirs, not the one removed here).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ...index.schema import DatabaseError
from ..indexer import Indexer

if TYPE_CHECKING:
    from ...index.postgres import PgStore

log = logging.getLogger(__name__)
META_KEY = "teamRemovals"


def held(indexer: Indexer, paths: Iterable[str] | None = None) -> dict[str, str]:
    """What the local index holds (path -> hash), of ``paths`` or of every file."""
    with indexer.lock:
        states = indexer.writer.file_states(None if paths is None else list(paths))
        return {p: s.hash for p, s in states.items()}


def before_sync(indexer: Indexer) -> dict[str, str]:
    """What the local index holds before a full sync, with the removals still waiting: a
    rebuild of the local index starts its meta afresh, and must not lose them."""
    with indexer.lock:
        return {**waiting(indexer), **held(indexer)}


def waiting(indexer: Indexer) -> dict[str, str]:
    """The removals the team index has not been told about (path -> hash removed)."""
    try:
        with indexer.lock:
            found = json.loads(indexer.writer.get_meta().get(META_KEY) or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def to_push(
    store: PgStore, indexer: Indexer, local: dict[str, str], pushed: dict[str, str]
) -> dict[str, str]:
    """The removals waiting, the team index's files among them added to ``pushed`` (what
    it holds, which the push compares with ``local``) where they still have the content
    removed here; ``settle`` them once the push is done."""
    gone = waiting(indexer)
    ask = gone.keys() - local.keys() - pushed.keys()
    if ask:
        with store.transaction():  # the push's lock wait (``store.pusher``)
            team = store.file_states(ask)
        pushed.update((p, s.hash) for p, s in team.items() if s.hash == gone[p])
    return gone


def record(indexer: Indexer, before: dict[str, str]) -> None:
    """Keep the files of ``before`` that the local index no longer holds."""
    if not before:
        return
    with indexer.lock:
        now = indexer.writer.file_states(list(before))
        gone = {p: h for p, h in before.items() if p not in now}
        if gone:
            _write(indexer, {**waiting(indexer), **gone})


def settle(indexer: Indexer, paths: Iterable[str]) -> None:
    """The team index has been told about ``paths``."""
    done = set(paths)
    if not done:
        return
    with indexer.lock:
        left = {p: h for p, h in waiting(indexer).items() if p not in done}
        _write(indexer, left)


def _write(indexer: Indexer, removals: dict[str, str]) -> None:
    try:
        indexer.writer.set_meta({META_KEY: json.dumps(removals, sort_keys=True)})
    except DatabaseError as exc:  # a full disk: the removal reaches the team if it is there
        log.warning("removals for the team index not kept (%s)", exc)
