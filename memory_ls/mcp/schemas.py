"""What the agent sees: the server's instructions and each tool's name, description and schema."""

from __future__ import annotations

from typing import Any

import mcp.types as types

from ..params import MCP
from ..settings.docs import declared

MAX_LINES = MCP.max_lines
# What the search tool's arguments say of their defaults, bounds and choices is what the
# settings declare (settings/query.py, settings/schema.py), never a copy of it.
MAX_RESULTS = declared("query.maxResults")
MIN_SCORE = declared("query.minScore")
SOURCES = declared("sources").spec.choices

INSTRUCTIONS = (
    "This server searches the memory of the workspace: Markdown notes (MEMORY.md, memory/*.md) "
    "and, when enabled, past agent session transcripts. Call memory_search first with a short "
    "natural-language query; every result carries a citation (path#Lstart-Lend) and a snippet. "
    "Then call memory_get with a citation to read the cited lines in full before relying on "
    "them. Prefer citing memory as path#Lstart-Lend in answers. memory_status tells whether "
    "search is hybrid or keyword-only and why; memory files are also resources (memory://<path>)."
)


def _tool(
    name: str, title: str, description: str, properties: dict[str, Any], required: list[str]
) -> types.Tool:
    """A read-only tool over this workspace only, with a closed object schema."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return types.Tool(
        name=name,
        title=title,
        description=description,
        input_schema=schema,
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )


SEARCH_TOOL = _tool(
    "memory_search",
    "Search memory",
    "Search the workspace's memory (notes and, if enabled, session transcripts) with "
    "hybrid keyword + semantic search. Use this FIRST, before answering questions about "
    "prior work, decisions, preferences, people, dates or todos. Returns ranked results "
    "with path, 1-based startLine/endLine, score, a snippet and a citation "
    "(path#Lstart-Lend). Snippets are partial: read a result in full with memory_get "
    "(pass its citation) before quoting or relying on it. Query filters also work inside "
    "the query text: file:<prefix>, after:YYYY-MM-DD, before:YYYY-MM-DD, +required, -excluded.",
    {
        "query": {"type": "string", "description": "What to look for, in plain words."},
        "maxResults": {
            "type": "integer",
            "minimum": MAX_RESULTS.spec.minimum,
            "maximum": MCP.max_results,
            "description": f"How many results at most (default {MAX_RESULTS.default}, or the "
            f"workspace's {MAX_RESULTS.key} setting).",
        },
        "minScore": {
            "type": "number",
            "minimum": MIN_SCORE.spec.minimum,
            "maximum": MIN_SCORE.spec.maximum,
            "description": f"Drop results scoring below this (default {MIN_SCORE.default}, or "
            f"the workspace's {MIN_SCORE.key} setting).",
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
        "explain": {
            "type": "boolean",
            "description": "Also say why each result ranks where it does (keyword and vector "
            "scores, fusion, decay, reranking) and how the query was parsed. For debugging "
            "search quality; leave it out otherwise.",
        },
    },
    ["query"],
)

GET_TOOL = _tool(
    "memory_get",
    "Read memory lines",
    "Read lines of a memory file. Use it SECOND, after memory_search: pass a result's "
    "citation (e.g. memory/2026-01-10-api.md#L3-L9) to read exactly the cited lines, or a "
    "path with from/lines for more context around them. Returns {uri, path, from, to, "
    "totalLines, text}; line numbers are 1-based (for transcripts, the original JSONL "
    "lines). Only memory files of this workspace can be read.",
    {
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
    [],
)

STATUS_TOOL = _tool(
    "memory_status",
    "Memory index status",
    "The state of the memory index, as `memory-ls status --json` reports it: mode "
    "(hybrid, or keyword with providerReason saying why), provider {id, model, dims}, "
    "files, chunks, pendingEmbeddings (chunks still without a vector), pendingLineVectors "
    "(chunks whose lines still wait for theirs), indexPath, "
    "lastSync, and problems (settingsProblems, rootProblems, fallbackReason). Call it when search "
    "results look thin or to explain why search is keyword-only; it is not needed "
    "before memory_search.",
    {},
    [],
)

TOOLS = [SEARCH_TOOL, GET_TOOL, STATUS_TOOL]
