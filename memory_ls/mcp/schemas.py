"""What the agent sees: the server's instructions and each tool's name, description and schema."""

from __future__ import annotations

from typing import Any

import mcp.types as types

from ..methods import CHECK, GET, SEARCH, STATUS, Method
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
    "them. Prefer citing memory as path#Lstart-Lend in answers. Before writing a note to "
    "memory, call memory_check with its text: it says what memory already knows. "
    "memory_status tells whether "
    "search is hybrid or keyword-only and why; memory files are also resources (memory://<path>)."
)


def _tool(method: Method, properties: dict[str, Any], required: list[str]) -> types.Tool:
    """The read-only tool of a declared method (methods.py), over this workspace only, with a
    closed object schema: what it offers of the method's params, in the MCP dialect."""
    assert method.tool is not None
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return types.Tool(
        name=method.tool,
        title=method.title,
        description=method.description,
        input_schema=schema,
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )


SEARCH_TOOL = _tool(
    SEARCH,
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
    GET,
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
    STATUS,
    {},
    [],
)

CHECK_TOOL = _tool(
    CHECK,
    {
        "text": {"type": "string", "description": "The note as it would be written (Markdown)."},
        "path": {
            "type": "string",
            "description": "Where it would be written, workspace-relative (MEMORY.md, "
            "memory/<topic>.md, memory/YYYY-MM-DD.md); it stands in for that file's text. "
            "Default: a dated note of today.",
        },
    },
    ["text"],
)

TOOLS = [SEARCH_TOOL, GET_TOOL, STATUS_TOOL, CHECK_TOOL]
