"""What every transcript format shares: content blocks, tool lines, short redacted results.

A format module turns one JSON record into a ``Parsed`` (or None for metadata records);
``sources/sessions.py`` turns that into rendered, line-mapped text. Everything here works on
one record alone, so a tail of a transcript renders exactly as it does inside the whole file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ...redact import redact

USER, ASSISTANT, RESULT, SUMMARY = "user", "assistant", "result", "summary"
TEXT_PARTS = {"text", "input_text", "output_text"}
TOOL_CALL_PARTS = {
    "toolCall",
    "tool_call",
    "tool_use",
    "toolUse",
    "server_tool_use",
    "function_call",
}
RESULT_PARTS = {"tool_result", "toolResult", "function_call_output"}
IMAGE_PARTS = {"image", "input_image", "image_url"}
DOCUMENT_PARTS = {"document", "file", "input_file"}
# Reasoning is the model's scratch work: often encrypted or signed (Codex ``encrypted_content``,
# Claude ``redacted_thinking``), restated by the answer that follows, and large. Left out.
REASONING_PARTS = {"thinking", "redacted_thinking", "reasoning", "reasoning_text"}

ARGS_CHARS = 200  # a tool call's arguments, shown after its name
RESULT_CHARS = 300  # a tool result
# Text past the cut is redacted too, so a secret straddling the cut never shows in part.
_MARGIN = 256

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffd]")
_TOOL_NAME = re.compile(r"[^\w.:/-]")
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+)[;,]")


@dataclass
class Parsed:
    """One record's worth of transcript: who speaks, its text pieces and its tool calls."""

    role: str  # USER | ASSISTANT | RESULT | SUMMARY
    texts: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)  # "name args", redacted and short


def short(text: str, limit: int) -> str:
    """``text`` redacted, on one line, cut to ``limit`` characters; a cut says so and how long
    the whole was. Only about ``limit`` characters are redacted, however long ``text`` is."""
    cap = limit + _MARGIN
    while True:
        red = " ".join(CONTROL.sub("", redact(text[:cap])).split())
        if cap >= len(text) or len(red) >= limit + _MARGIN:
            break
        cap *= 4  # redaction shrank the window: widen it so the cut stays past any secret
    if cap >= len(text) and len(red) <= limit:
        return red
    return f"{red[:limit].rstrip()} … [truncated, {len(text):,} chars]"


def tool_name(value: Any) -> str:
    return _TOOL_NAME.sub("", str(value or ""))[:64] or "tool"


def redacted_strings(value: Any) -> Any:
    """``value`` with every string in it redacted, before it is written as JSON: quoting
    escapes the quotes the rules key on, so ``curl -d '{"password": "..."}'`` in an argument
    became ``\\"password\\": \\"...\\"``, which no rule matched, and the secret was indexed."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redacted_strings(v) for v in value]
    if isinstance(value, dict):
        return {k: redacted_strings(v) for k, v in value.items()}
    return value


def _arg_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(redact(value[: ARGS_CHARS * 4]), ensure_ascii=False)
    shown = redacted_strings(value)
    return json.dumps(shown, ensure_ascii=False, separators=(",", ":"), default=str)


def render_args(args: Any) -> str:
    """A tool call's arguments as ``key=value, ...`` (JSON values); a JSON string is decoded
    first (Codex and OpenAI pass arguments that way), any other string is shown as it is."""
    if isinstance(args, str):
        stripped = args.strip()
        if stripped[:1] in "{[":
            try:
                args = json.loads(stripped)
            except (ValueError, RecursionError):
                return stripped
        else:
            return stripped
    if isinstance(args, dict):
        return ", ".join(f"{k}={_arg_value(v)}" for k, v in args.items())
    return "" if args is None else _arg_value(args)


def tool_line(name: Any, args: Any = None) -> str:
    shown = short(render_args(args), ARGS_CHARS)
    return f"{tool_name(name)} {shown}" if shown else tool_name(name)


def placeholder(part: dict[str, Any]) -> str:
    """``[image: image/png]`` for an attachment: never its bytes, never its URL."""
    kind = "image" if part.get("type") in IMAGE_PARTS else "attachment"
    media = part.get("mimeType") or part.get("media_type")
    source = part.get("source")
    if not media and isinstance(source, dict):
        media = source.get("media_type")
    url = part.get("image_url")
    url = url.get("url") if isinstance(url, dict) else url
    if not media and isinstance(url, str):
        m = _DATA_URL.match(url)
        media = m.group(1) if m else None
    media = tool_name(media) if media else ""
    return f"[{kind}: {media}]" if media else f"[{kind}]"


def result_text(content: Any, is_error: bool = False, name: str = "") -> str:
    """A tool result, short: its text parts (images as placeholders), redacted and cut."""
    if isinstance(content, dict) and "content" in content:  # {content, success} payloads
        is_error = is_error or content.get("success") is False
        content = content["content"]
    pieces: list[str] = []
    if isinstance(content, str):
        pieces.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    pieces.append(part["text"])
                elif part.get("type") in IMAGE_PARTS | DOCUMENT_PARTS:
                    pieces.append(placeholder(part))
    elif content is not None:
        pieces.append(json.dumps(redacted_strings(content), ensure_ascii=False, default=str))
    body = short("\n".join(pieces), RESULT_CHARS) or "(empty)"
    prefix = (f"{tool_name(name)}: " if name else "") + ("error: " if is_error else "")
    return prefix + body


def blocks(content: Any, role: str) -> Parsed:
    """A message's content, a string or a list of parts, whatever the agent: text parts,
    tool calls, tool results (the record becomes a RESULT), attachments as placeholders."""
    out = Parsed(role)
    if isinstance(content, str):
        out.texts.append(content)
        return out
    if not isinstance(content, list):
        return out
    results: list[str] = []
    for part in content:
        if isinstance(part, str):
            out.texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in TEXT_PARTS and isinstance(part.get("text"), str):
            out.texts.append(part["text"])
        elif kind in TOOL_CALL_PARTS:
            args = part.get("arguments", part.get("input"))
            out.tools.append(tool_line(part.get("name") or part.get("toolName"), args))
        elif kind in RESULT_PARTS:
            content_ = part.get("content", part.get("output"))
            results.append(result_text(content_, part.get("is_error") is True))
        elif kind in IMAGE_PARTS | DOCUMENT_PARTS:
            out.texts.append(placeholder(part))
        # REASONING_PARTS and unknown parts: left out
    if results:
        return Parsed(RESULT, [*results, *out.texts], out.tools)
    return out
