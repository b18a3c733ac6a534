"""``session save --skip-known``: the messages of a session that memory already holds are left
out of its note, so an agent that re-learns a fact every session does not write it again.

The messages are checked as one draft (``hygiene``'s duplicate check, the same one
``memory_check`` answers with), each message's lines a paragraph of their own; a message is
known when the passages found written before cover most of its words (``KNOWN_SHARE``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..hygiene.findings import DUPLICATE, Finding, Related
from ..settings import Settings
from ..sources.sessions import Message
from .writer import SessionInput, write_note

KNOWN_SHARE = 0.8  # of a message's words, in lines already written elsewhere

Check = Callable[[str], list[Finding]]  # a draft's text -> its findings


@dataclass(frozen=True)
class Known:
    message: Message
    where: tuple[Related, ...]  # the earlier copies

    def to_json(self) -> dict[str, object]:
        return {"line": self.message.line, "related": [r.to_json() for r in self.where]}


def draft(messages: Sequence[Message]) -> tuple[str, list[int]]:
    """The messages' text as one draft, and for each of its lines the message it is of (-1:
    a blank line between them)."""
    lines: list[str] = []
    owner: list[int] = []
    for i, m in enumerate(messages):
        body = [ln for ln in m.text.split("\n") if ln.strip()]
        if lines and body:
            lines.append("")
            owner.append(-1)
        lines += body
        owner += [i] * len(body)
    return "\n".join(lines) + "\n", owner


def split_known(messages: Sequence[Message], check: Check) -> tuple[list[Message], list[Known]]:
    """The messages to write, and those memory already holds (with where)."""
    text, owner = draft(messages)
    lines = text.split("\n")
    covered: dict[int, set[int]] = {}
    where: dict[int, list[Related]] = {}
    for f in check(text):
        if f.code != DUPLICATE:
            continue
        for n in range(f.start_line, f.end_line + 1):
            i = owner[n - 1] if n - 1 < len(owner) else -1
            if i >= 0:
                covered.setdefault(i, set()).add(n)
                where.setdefault(i, []).extend(r for r in f.related if r not in where[i])
    keep: list[Message] = []
    known: list[Known] = []
    for i, m in enumerate(messages):
        words = len(m.text.split())
        held = sum(len(lines[n - 1].split()) for n in covered.get(i, ()))
        if words and held >= KNOWN_SHARE * words:
            known.append(Known(m, tuple(where[i])))
        else:
            keep.append(m)
    return keep, known


@dataclass(frozen=True)
class Saved:
    """What ``session save`` did: the new note (None: every message was known) and the
    messages it left out."""

    path: Path | None
    known: tuple[Known, ...] = ()

    def to_json(self, root: Path) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path.relative_to(root).as_posix() if self.path else None,
            "uri": self.path.as_uri() if self.path else None,
        }
        if self.known:
            out["skipped"] = [k.to_json() for k in self.known]
        return out


def save_new(
    root: Path, settings: Settings, session: SessionInput, check: Check | None = None
) -> Saved:
    """Write ``session`` as a new note (``writer.write_note``); with ``check``, without the
    messages memory already holds, and no note at all when it holds every one."""
    known: list[Known] = []
    if check is not None and session.messages:
        kept, known = split_known(session.messages, check)
        if not kept:
            return Saved(None, tuple(known))
        session = replace(session, messages=kept)
    return Saved(write_note(root, session, settings), tuple(known))
