"""Codex transcripts ("rollouts"): ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Records, from ``RolloutLine`` / ``RolloutItem`` and ``ResponseItem`` in openai/codex
(``codex-rs/protocol/src/protocol.rs`` and ``models.rs``): ``{"timestamp", "type", "payload"}``
with ``type`` one of ``session_meta``, ``turn_context``, ``event_msg`` (UI events that repeat
the response items), ``compacted`` (``{message, replacement_history?}``) and
``response_item``, whose payload ``type`` is ``message {role, content: [input_text |
output_text | input_image]}``, ``reasoning``, ``function_call {name, arguments (a JSON
string), call_id}``, ``function_call_output {call_id, output (a string, a list of content
items, or {content, success})}``, ``custom_tool_call {name, input}``,
``custom_tool_call_output``, ``local_shell_call {action: {command}}``, ``web_search_call
{action}``, ``ghost_snapshot``, ``compaction`` (encrypted).

Only response items and the compaction summary are rendered: event messages would say the
same things twice. Developer messages and the context Codex injects as user messages
(environment, AGENTS.md instructions) are skipped; reasoning is left out.
"""

from __future__ import annotations

import json
from typing import Any

from .common import ASSISTANT, RESULT, SUMMARY, USER, Parsed, blocks, result_text, tool_line

# Markers of the context Codex sends as user messages (the open tags of codex-rs's protocol):
# not what the user said.
_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions for",
    "<user_shell_command>",
    "<turn_aborted>",
)
# The IDE extension puts editor context before the request itself.
_REQUEST = "## My request for Codex:"


def _output(output: Any) -> Any:
    # Older shell tools returned '{"output": "...", "metadata": {"exit_code": ...}}' as text.
    if isinstance(output, str) and output.startswith('{"output"'):
        try:
            decoded = json.loads(output)
        except (ValueError, RecursionError):
            return output
        if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
            return decoded["output"]
    return output


def _action(payload: dict[str, Any]) -> dict[str, Any]:
    action = payload.get("action")
    if not isinstance(action, dict):
        return {}
    return {k: v for k, v in action.items() if k != "type" and v is not None}


def parse(rec: dict[str, Any]) -> Parsed | None:
    kind = rec.get("type")
    payload = rec.get("payload")
    if not isinstance(payload, dict):
        return None
    if kind == "compacted":
        message = payload.get("message")
        return Parsed(SUMMARY, [message]) if isinstance(message, str) else None
    if kind != "response_item":
        return None
    item = payload.get("type")
    if item in (None, "message"):
        role = payload.get("role")
        if role not in (USER, ASSISTANT):
            return None
        parsed = blocks(payload.get("content"), role)
        texts = [t.split(_REQUEST, 1)[-1] for t in parsed.texts]
        parsed.texts = [t for t in texts if not t.lstrip().startswith(_INJECTED)]
        return parsed
    if item == "function_call":
        return Parsed(ASSISTANT, tools=[tool_line(payload.get("name"), payload.get("arguments"))])
    if item == "custom_tool_call":
        return Parsed(ASSISTANT, tools=[tool_line(payload.get("name"), payload.get("input"))])
    if item == "local_shell_call":
        return Parsed(ASSISTANT, tools=[tool_line("local_shell", _action(payload))])
    if item == "web_search_call":
        return Parsed(ASSISTANT, tools=[tool_line("web_search", _action(payload))])
    if item in ("function_call_output", "custom_tool_call_output"):
        return Parsed(RESULT, [result_text(_output(payload.get("output")))])
    return None  # reasoning, ghost_snapshot, encrypted compaction, future kinds
