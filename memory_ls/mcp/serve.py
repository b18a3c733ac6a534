"""``memory-ls mcp``: one engine for the workspace, served over stdio or streamable HTTP."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import anyio

from ..engine import MemoryEngine
from .http_transport import HttpOptions, listen, refusal, serve_http
from .server import serve_stdio
from .tools import MemoryTools

log = logging.getLogger(__name__)


def run(root: Path, index_path: str | None = None, http: HttpOptions | None = None) -> int:
    """Serve until the stdio client hangs up or the HTTP server is interrupted; 2 when the
    HTTP options are refused or the address cannot be bound (before anything is loaded)."""
    if http is not None:
        if why := refusal(http):
            print(f"memory-ls: {why}", file=sys.stderr)
            return 2
        try:
            sock = listen(http)
        except OSError as exc:
            print(f"memory-ls: cannot listen on {http.host}:{http.port}: {exc}", file=sys.stderr)
            return 2
    engine = MemoryEngine(root, index_path=index_path)
    for problem in engine.problems:
        log.warning("settings: %s", problem)
    tools = MemoryTools(engine)
    tools.start()
    try:
        if http is None:
            anyio.run(serve_stdio, tools)
        else:
            anyio.run(serve_http, tools, http, sock)
    finally:
        tools.close()
        engine.close()
    return 0
