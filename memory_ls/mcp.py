"""MCP server (stdio): ``memory_search`` and ``memory_get`` over one workspace's engine.

Same parameters and result shapes as the language server's ``memory/search`` and
``memory/get``, so an agent gets the citations an editor gets. Built on the official SDK's
low-level ``Server`` because ``memory_get`` takes a parameter named ``from``, which no Python
function signature (what the SDK's decorator API derives schemas from) can spell.

The engine's calls block (SQLite, the embedding model), so each runs in a worker thread. The
index is kept fresh without a file watcher: a keyword sync before a search (throttled), and
embeddings filled in the background so a search never waits for the model.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from . import __version__
from .engine import MemoryEngine
from .params import MCP, ParamError, parse_get, parse_search
from .search.citations import parse_citation
from .search.request import SOURCES
from .workspace import PathError

log = logging.getLogger(__name__)

REFRESH_SECONDS = 2.0  # at most one disk walk per this many seconds of searching
READY_TIMEOUT_SECONDS = 30.0  # a search waits this long for the first keyword sync
MAX_LINES = MCP.max_lines

INSTRUCTIONS = (
    "This server searches the memory of the workspace: Markdown notes (MEMORY.md, memory/*.md) "
    "and, when enabled, past agent session transcripts. Call memory_search first with a short "
    "natural-language query; every result carries a citation (path#Lstart-Lend) and a snippet. "
    "Then call memory_get with a citation to read the cited lines in full before relying on "
    "them. Prefer citing memory as path#Lstart-Lend in answers."
)

SEARCH_TOOL = types.Tool(
    name="memory_search",
    title="Search memory",
    description=(
        "Search the workspace's memory (notes and, if enabled, session transcripts) with "
        "hybrid keyword + semantic search. Use this FIRST, before answering questions about "
        "prior work, decisions, preferences, people, dates or todos. Returns ranked results "
        "with path, 1-based startLine/endLine, score, a snippet and a citation "
        "(path#Lstart-Lend). Snippets are partial: read a result in full with memory_get "
        "(pass its citation) before quoting or relying on it. Query filters also work inside "
        "the query text: file:<prefix>, after:YYYY-MM-DD, before:YYYY-MM-DD, +required, -excluded."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for, in plain words."},
            "maxResults": {
                "type": "integer",
                "minimum": 1,
                "maximum": MCP.max_results,
                "description": "How many results at most (default 6).",
            },
            "minScore": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "Drop results scoring below this (default 0.35).",
            },
            "sources": {
                "type": "array",
                "items": {"type": "string", "enum": list(SOURCES)},
                "description": "Only these sources: memory (notes), sessions (transcripts).",
            },
            "pathPrefix": {
                "type": "string",
                "description": "Only files whose workspace-relative path starts with this.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
)

GET_TOOL = types.Tool(
    name="memory_get",
    title="Read memory lines",
    description=(
        "Read lines of a memory file. Use it SECOND, after memory_search: pass a result's "
        "citation (e.g. memory/2026-01-10-api.md#L3-L9) to read exactly the cited lines, or a "
        "path with from/lines for more context around them. Returns {path, from, to, "
        "totalLines, text}; line numbers are 1-based (for transcripts, the original JSONL "
        "lines). Only memory files of this workspace can be read."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "citation": {"type": "string", "description": "A citation: path#L3-L9 or path#L3."},
            "path": {"type": "string", "description": "A workspace-relative memory file path."},
            "from": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
            "lines": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LINES,
                "description": "How many lines from `from` (default: to the end of the file).",
            },
        },
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
)


class MemoryTools:
    """The two tools over one engine; every method here blocks (run it in a thread)."""

    def __init__(self, engine: MemoryEngine, refresh_seconds: float = REFRESH_SECONDS):
        self.engine = engine
        self.refresh_seconds = refresh_seconds
        self.ready = threading.Event()
        self._refreshed = 0.0
        self._refresh_lock = threading.Lock()
        self._embedding = threading.Lock()
        self._closed = False

    # -- keeping the index fresh ----------------------------------------------------------------
    def start(self) -> None:
        """First sync in the background: keyword index now, vectors after."""
        threading.Thread(target=self._first_sync, name="memory-ls-mcp-sync", daemon=True).start()

    def _first_sync(self) -> None:
        try:
            report = self.engine.sync("mcp-start", embed=False)
            log.info("indexed %d of %d files", report.indexed, report.files)
        except Exception:  # a broken index must not take the tools down: search degrades
            log.exception("first sync failed")
        finally:
            self._refreshed = time.monotonic()
            self.ready.set()
        self._embed()

    def _embed(self) -> None:
        if self.engine.provider is None or not self._embedding.acquire(blocking=False):
            return
        try:
            self.engine.embed_pending(should_stop=lambda: self._closed)
        except Exception:
            log.exception("embedding failed; keyword search still works")
        finally:
            self._embedding.release()

    def refresh(self) -> None:
        """Pick up files changed since the last look (agents write memory mid-session)."""
        self.ready.wait(READY_TIMEOUT_SECONDS)
        if not self.ready.is_set():
            return
        with self._refresh_lock:
            if time.monotonic() - self._refreshed < self.refresh_seconds:
                return
            report = self.engine.sync("mcp", embed=False)
            self._refreshed = time.monotonic()
        if report.indexed and self.engine.provider is not None:
            threading.Thread(target=self._embed, name="memory-ls-mcp-embed", daemon=True).start()

    # -- tools --------------------------------------------------------------------------------
    def search(self, args: dict[str, Any]) -> dict[str, Any]:
        req = parse_search(args, MCP)
        if not req.query.strip():
            raise ParamError("query", "must not be empty")
        self.refresh()
        return self.engine.search(req).to_json(self.engine.root)

    def get(self, args: dict[str, Any]) -> dict[str, Any]:
        p = parse_get(args, MCP)
        start, lines = p.start, p.lines
        if lines is None and start is None and "#" not in p.target:
            lines = MAX_LINES  # a whole huge file is not what an agent's context needs
            start = 1
        try:
            excerpt = self.engine.get(p.target, start=start, lines=lines)
        except (PathError, ValueError) as exc:
            field = "citation" if parse_citation(p.target) else "path"
            raise ParamError(field, str(exc)) from None
        return excerpt.to_json(self.engine.root)

    def close(self) -> None:
        self._closed = True


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
    handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        SEARCH_TOOL.name: tools.search,
        GET_TOOL.name: tools.get,
    }

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None):
        return types.ListToolsResult(tools=[SEARCH_TOOL, GET_TOOL])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams):
        handler = handlers.get(params.name)
        if handler is None:
            return _error(f"unknown tool {params.name!r}; use memory_search or memory_get")
        args = params.arguments or {}
        try:
            return _result(await anyio.to_thread.run_sync(handler, args))
        except ParamError as exc:  # the agent should fix its arguments: say which and how
            return _error(str(exc))
        except Exception as exc:  # the agent gets a readable error, the log the traceback
            log.exception("%s failed", params.name)
            return _error(f"{params.name} failed: {type(exc).__name__}")

    return Server(
        "memory-ls",
        version=__version__,
        title="memory-ls",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=lambda name: {
            t.name: t.input_schema for t in (SEARCH_TOOL, GET_TOOL)
        }.get(name),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(engine: MemoryEngine) -> None:
    tools = MemoryTools(engine)
    server = build_server(tools)
    tools.start()
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        tools.close()


def run(root: Path, index_path: str | None = None) -> int:
    """``memory-ls mcp``: serve one workspace over stdio until the client hangs up."""
    engine = MemoryEngine(root, index_path=index_path)
    for problem in engine.problems:
        log.warning("settings: %s", problem)
    try:
        anyio.run(serve_stdio, engine)
    finally:
        engine.close()
    return 0
