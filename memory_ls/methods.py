"""The custom requests, declared once.

Each ``Method`` names the LSP method, its params type (parsed by ``params.py`` for both wires),
the TypeScript type of its result, the MCP tool that offers the same request to agents, and the
name of the handler on both sides (``server/requests.py``'s ``Requests`` and
``mcp/tools.py``'s ``MemoryTools``). The language server registers every method here, the MCP
server lists and dispatches every tool here, and ``editors/vscode/scripts/gen_protocol.py``
writes the TypeScript side (``src/protocol.generated.ts``: method names, params types, tool
names) from the same entries, with a drift test.

A new request is its entry here and its handlers.
"""

from __future__ import annotations

from dataclasses import dataclass

from .params import CheckParams, FolderParams, GetParams
from .search.request import SearchRequest


@dataclass(frozen=True)
class Method:
    lsp: str  # the LSP method
    handler: str  # the handler's name on Requests (LSP) and MemoryTools (MCP)
    params: type  # the dataclass params.py parses the params into
    result: str  # the TypeScript type of the result (editors/vscode/src/protocol.ts)
    tool: str | None = None  # the MCP tool offering the same request (None: LSP only)
    title: str = ""  # the MCP tool's title
    description: str = ""  # what the agent reads: when and how to call the tool
    # a newer call from the same client supersedes its queued ones (search as you type)
    latest_wins: bool = False


SEARCH = Method(
    "memory/search",
    "search",
    SearchRequest,
    "SearchResult",
    tool="memory_search",
    title="Search memory",
    description="Search the workspace's memory (notes and, if enabled, session transcripts) "
    "with hybrid keyword + semantic search. Use this FIRST, before answering questions about "
    "prior work, decisions, preferences, people, dates or todos. Returns ranked results "
    "with path, 1-based startLine/endLine, score, a snippet and a citation "
    "(path#Lstart-Lend). Snippets are partial: read a result in full with memory_get "
    "(pass its citation) before quoting or relying on it. Query filters also work inside "
    "the query text: file:<prefix>, after:YYYY-MM-DD, before:YYYY-MM-DD, +required, -excluded.",
    latest_wins=True,
)
GET = Method(
    "memory/get",
    "get",
    GetParams,
    "GetResult",
    tool="memory_get",
    title="Read memory lines",
    description="Read lines of a memory file. Use it SECOND, after memory_search: pass a "
    "result's citation (e.g. memory/2026-01-10-api.md#L3-L9) to read exactly the cited lines, "
    "or a path with from/lines for more context around them. Returns {uri, path, from, to, "
    "totalLines, text}; line numbers are 1-based (for transcripts, the original JSONL "
    "lines). Only memory files of this workspace can be read.",
)
STATUS = Method(
    "memory/status",
    "status",
    FolderParams,
    "StatusResult",
    tool="memory_status",
    title="Memory index status",
    description="The state of the memory index, as `memory-ls status --json` reports it: mode "
    "(hybrid, or keyword with providerReason saying why), provider {id, model, dims}, "
    "files, chunks, pendingEmbeddings (chunks still without a vector), pendingLineVectors "
    "(chunks whose lines still wait for theirs), indexPath, "
    "lastSync, and problems (settingsProblems, rootProblems, fallbackReason). Call it when "
    "search results look thin or to explain why search is keyword-only; it is not needed "
    "before memory_search.",
)

CHECK = Method(
    "memory/check",
    "check",
    CheckParams,
    "CheckResult",
    tool="memory_check",
    title="Check a note before writing it",
    description="Check a draft note BEFORE writing it to memory: pass its text (and the "
    "workspace-relative path it would be written to, e.g. MEMORY.md or "
    "memory/2026-03-02.md). Returns {path, findings: [{code, severity, path, startLine, "
    "endLine, message, related: [{path, startLine, endLine}]}]}, lines 1-based in the draft: "
    "duplicate (what memory already says: related points at it, e.g. 'already known at "
    "memory/x.md#L3-L5'; leave it out of the note), conflict (it changes what memory says, "
    "or memory says it has changed since: related points at the other passage), load-cap "
    "(MEMORY.md would pass the lines "
    "its agent loads), expired and front-matter (its front matter), orphan (a topic file "
    "MEMORY.md does not link). No findings: nothing in memory says it yet.",
)

METHODS = (SEARCH, GET, STATUS, CHECK)
