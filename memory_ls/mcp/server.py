"""The MCP server object (the SDK's low-level ``Server``) and serving it over stdio.

Built on the low-level ``Server`` because ``memory_get`` takes a parameter named ``from``,
which no Python function signature (what the SDK's decorator API derives schemas from) can
spell.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, cast

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from .. import __version__
from ..methods import METHODS
from ..params import ParamError
from ..sources.sessions import no_surrogates
from .resources import list_resources, read_resource
from .schemas import INSTRUCTIONS, TOOLS
from .tools import MemoryTools

log = logging.getLogger(__name__)


def _result(payload: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def build_server(tools: MemoryTools) -> Server[Any]:
    # Each declared method's tool calls the MemoryTools method of the same handler name.
    handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        m.tool: getattr(tools, m.handler) for m in METHODS if m.tool is not None
    }
    schemas = {t.name: t.input_schema for t in TOOLS}

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None):
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams):
        handler = handlers.get(params.name)
        if handler is None:
            return _error(f"unknown tool {params.name!r}; use one of {', '.join(handlers)}")
        args = params.arguments or {}
        try:
            return _result(await anyio.to_thread.run_sync(handler, args))
        except ParamError as exc:  # the agent should fix its arguments: say which and how
            return _error(str(exc))
        except Exception as exc:  # the agent gets a readable error, the log the traceback
            log.exception("%s failed", params.name)
            return _error(f"{params.name} failed: {type(exc).__name__}")

    async def list_files(ctx: Any, params: types.PaginatedRequestParams | None):
        found = await anyio.to_thread.run_sync(list_resources, tools.engine)
        return types.ListResourcesResult(resources=found)

    async def read_file(ctx: Any, params: types.ReadResourceRequestParams):
        try:
            contents = await anyio.to_thread.run_sync(read_resource, tools.engine, params.uri)
        except ValueError as exc:  # PathError too: outside, a symlink, not memory, missing
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        return types.ReadResourceResult(contents=[contents])

    return Server(
        "memory-ls",
        version=__version__,
        title="memory-ls",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_files,
        on_read_resource=read_file,
    )


# A surrogate code point spelled in JSON (\ud800-\udfff): a lone one makes the SDK drop the line.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return no_surrogates(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {no_surrogates(k): _clean(v) for k, v in value.items()}
    return value


def read_line(line: str) -> str | types.JSONRPCError | None:
    """What to do with one line from the client: the line to hand the SDK, the error to
    answer in its place, or None (a blank line).

    A lone surrogate (``"\\ud800"``: a JavaScript client cutting a string inside an emoji
    sends one) becomes U+FFFD: the SDK's parser refused such a line whole, and the request got
    no answer at all, so the agent waited for its timeout. A line that is not JSON, or not a
    JSON-RPC message, got no answer either (the SDK logs and drops it): JSON-RPC asks for a
    parse error or an invalid-request error, with a null id when the id cannot be read."""
    if not line.strip():
        return None
    try:
        message = json.loads(line)  # keeps lone surrogates; a pair is one character already
        if _SURROGATE_ESCAPE.search(line):
            # The id an error echoes too: the SDK's writer cannot encode a lone surrogate, and
            # its failure ended the server.
            message = _clean(message)
            line = json.dumps(message, ensure_ascii=False) + "\n"
    except (ValueError, RecursionError):  # nested too deeply: it ended the server
        return _wire_error(None, types.PARSE_ERROR, "Parse error: not JSON, or nested too deeply")
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        if isinstance(message, dict) and "method" not in message and message.keys() & RESPONSE:
            # JSON-RPC never answers a response: the client would take it for its request's.
            log.warning("a malformed response from the client, dropped: %.200s", line)
            return None
        rid = message.get("id") if isinstance(message, dict) else None
        if isinstance(rid, bool) or not isinstance(rid, int | str):
            rid = None
        return _wire_error(rid, types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC message")
    return line


RESPONSE = {"result", "error"}


def _wire_error(rid: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message)
    )


async def _read_lines(
    lines: AsyncIterable[str], answer: Callable[[types.JSONRPCError], Awaitable[None]]
) -> AsyncIterator[str]:
    async for line in lines:
        got = read_line(line)
        if isinstance(got, str):
            yield got
        elif got is not None:
            await answer(got)


async def serve_stdio(tools: MemoryTools) -> None:
    server = build_server(tools)
    # Our own reader of stdin (the SDK's stdout side stays its own): bytes that are not UTF-8
    # become U+FFFD as in the SDK, and lines are cleaned before the SDK parses them. The wire
    # is read from a copy of fd 0, and fd 0 points at the null device meanwhile, as the SDK
    # does for its own reader: a child process must not read the client's messages.
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    text = io.TextIOWrapper(os.fdopen(wire, "rb"), encoding="utf-8", errors="replace")
    ready = anyio.Event()  # the reader starts before the SDK hands us its outgoing stream
    outgoing: list[Any] = []

    async def answer(error: types.JSONRPCError) -> None:
        await ready.wait()
        await outgoing[0].send(SessionMessage(error))

    stdin = cast("anyio.AsyncFile[str]", _read_lines(anyio.wrap_file(text), answer))
    try:
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            outgoing.append(write_stream)
            ready.set()
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        os.dup2(wire, 0)
        text.close()
