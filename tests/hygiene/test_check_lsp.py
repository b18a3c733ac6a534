"""``memory/check`` on the real language server over stdio: the same draft check as the MCP
tool, in the first workspace folder (or the one named), bad params answered as such."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_harness import (
    Start,
    make_workspace,
    request,
    start,  # noqa: F401  (a fixture)
)
from pygls.exceptions import JsonRpcException


async def test_memory_check_over_lsp(start: Start, tmp_path: Path):  # noqa: F811
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws, init_options={"provider": "none"})
    draft = (
        "# Today\n\nWe chose PostgreSQL for the ledger service.\nThe migration runs on Fridays.\n"
    )
    got = await request(client, "memory/check", {"text": draft})
    assert got["path"].startswith("memory/") and got["path"].endswith("-draft.md")
    # Its second line is too short (five words) to call a copy.
    assert [(f["code"], f["startLine"], f["endLine"]) for f in got["findings"]] == [
        ("duplicate", 3, 3)
    ]
    assert got["findings"][0]["related"] == [
        {"path": "memory/2026-01-05.md", "startLine": 5, "endLine": 5}
    ]
    got = await request(
        client, "memory/check", {"text": "A new fact nobody wrote down yet, at all."}
    )
    assert got["findings"] == []
    with pytest.raises(JsonRpcException, match="path"):
        await request(client, "memory/check", {"text": "x", "path": "../elsewhere.md"})
    with pytest.raises(JsonRpcException, match="text"):
        await request(client, "memory/check", {"path": "memory/x.md"})
