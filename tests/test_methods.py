"""The custom requests are declared once (memory_ls/methods.py): the MCP tools, the language
server's handlers and the TypeScript types all come from the declaration, and drift fails."""

from __future__ import annotations

import os
import subprocess
import sys

from repo_root import REPO

from memory_ls.mcp.schemas import TOOLS
from memory_ls.mcp.tools import MemoryTools
from memory_ls.methods import METHODS
from memory_ls.params import MCP, wire_names
from memory_ls.server.requests import Requests


def test_each_tool_is_a_declared_method_and_offers_only_its_params():
    tools = {t.name: t for t in TOOLS}
    declared = {m.tool: m for m in METHODS if m.tool}
    assert tools.keys() == declared.keys()
    for name, tool in tools.items():
        m = declared[name]
        assert (tool.title, tool.description) == (m.title, m.description)
        offered = set(tool.input_schema["properties"])
        assert offered <= set(wire_names(m.params, MCP).values()), name


def test_each_method_has_its_handler_on_both_sides():
    for m in METHODS:
        assert callable(getattr(Requests, m.handler)), m.lsp
        assert callable(getattr(MemoryTools, m.handler)), m.tool


def test_the_typescript_protocol_matches_the_declarations():
    script = REPO / "editors" / "vscode" / "scripts" / "gen_protocol.py"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    generated = (REPO / "editors" / "vscode" / "src" / "protocol.generated.ts").read_text()
    for m in METHODS:
        assert f"= '{m.lsp}';" in generated
    assert "  explain?: boolean;" in generated  # a SearchRequest field, under its wire name
