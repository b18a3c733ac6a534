"""Memory files as MCP resources: ``memory://<workspace-relative path>``, percent-encoded
(``memory://MEMORY.md``, ``memory://memory/2026-01-10-api.md``).

The list is the files the index would hold (the workspace's own discovery); a read goes
through the engine call ``memory_get`` uses, so the path rules are the same: only memory
files of the workspace, nothing outside it, no symlinks. Transcripts read as their rendered
text (``User:`` / ``Assistant:`` lines), not raw JSONL.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

import mcp.types as types

from ..engine import MemoryEngine
from ..workspace import MemoryFile

SCHEME = "memory://"


def resource_uri(path: str) -> str:
    return SCHEME + quote(path, safe="/")


def resource_path(uri: str) -> str | None:
    """The workspace-relative path a ``memory://`` URI names, or None for another scheme."""
    if not uri.startswith(SCHEME):
        return None
    return unquote(uri.removeprefix(SCHEME))


def _mime(mf: MemoryFile) -> str:
    return "text/markdown" if mf.source == "memory" else "text/plain"


def list_resources(engine: MemoryEngine) -> list[types.Resource]:
    return [
        types.Resource(
            uri=resource_uri(mf.path),
            name=mf.path,
            description="session transcript" if mf.source == "sessions" else "memory note",
            mime_type=_mime(mf),
        )
        for mf in engine.workspace.discover()
    ]


def read_resource(engine: MemoryEngine, uri: str) -> types.TextResourceContents:
    """The whole file; raises PathError (like memory_get) for anything that is not memory."""
    path = resource_path(uri)
    if path is None:
        raise ValueError(f"{uri}: not a {SCHEME} URI")
    text = engine.get(path).text
    mf = engine.workspace.resolve(path)
    return types.TextResourceContents(uri=uri, mime_type=_mime(mf), text=text)
