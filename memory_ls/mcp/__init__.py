"""MCP server: ``memory_search``, ``memory_get`` and ``memory_status``, and the memory files
as resources, over one workspace's engine.

Same parameters and result shapes as the language server's ``memory/search`` and
``memory/get`` (and ``memory-ls status --json``), so an agent gets the citations an editor
gets. Modules: schemas (what the agent sees), tools (the engine calls, index freshness),
resources (memory files as ``memory://<path>``), server (the SDK's low-level Server,
stdio), http_transport (streamable HTTP, the bearer token), serve (``memory-ls mcp``).
"""

from .http_transport import TOKEN_ENV, HttpOptions
from .serve import run
from .tools import REFRESH_SECONDS

__all__ = ["REFRESH_SECONDS", "TOKEN_ENV", "HttpOptions", "run"]
