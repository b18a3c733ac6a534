"""The names of the server's commands (``workspace/executeCommand``; docs/protocol.md). The
custom requests are declared in ``memory_ls/methods.py``."""

from __future__ import annotations

CMD_REINDEX = "memory.reindex"
CMD_SYNC = "memory.sync"
CMD_STATUS = "memory.status"
CMD_SAVE_SESSION = "memory.saveSession"
CMD_OPEN = "memory.open"  # [uri, startLine, endLine] (1-based): window/showDocument
