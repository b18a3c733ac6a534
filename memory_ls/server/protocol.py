"""The names of the custom requests and commands (docs/protocol.md describes them); their
params are parsed by ``memory_ls.params``, shared with the MCP tools."""

from __future__ import annotations

SEARCH = "memory/search"
GET = "memory/get"
STATUS = "memory/status"

CMD_REINDEX = "memory.reindex"
CMD_SYNC = "memory.sync"
CMD_STATUS = "memory.status"
CMD_SAVE_SESSION = "memory.saveSession"
