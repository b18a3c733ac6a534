"""Agent transcript formats, recognised per record: Codex rollouts, Claude Code projects,
OpenClaw sessions and plain ``{role, content}`` chat records. See each module for the shapes
it reads and where they were checked."""

from __future__ import annotations

from typing import Any

from . import claude, codex, openclaw
from .common import ASSISTANT, RESULT, SUMMARY, USER, Parsed

__all__ = ["ASSISTANT", "RESULT", "SUMMARY", "USER", "Parsed", "parse"]

_CODEX = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_CLAUDE = {"user", "assistant", "summary", "system"}


def parse(rec: Any) -> Parsed | None:
    """One JSON record -> its role, text and tool calls, or None for a record that is no
    message (metadata, bookkeeping, reasoning alone)."""
    if not isinstance(rec, dict):
        return None
    kind = rec.get("type")
    if kind in _CODEX:
        return codex.parse(rec)
    if kind in _CLAUDE:
        return claude.parse(rec)
    return openclaw.parse(rec)
