"""Pull diagnostics on the real language server over stdio: a client that pulls (as
vscode-languageclient 9 does: ``textDocument.diagnostic`` and ``workspace.diagnostics.
refreshSupport``) gets every memory file's findings from ``workspace/diagnostic`` and an open
document's from ``textDocument/diagnostic``, ``unchanged`` for the result id it holds, a refresh
when they change, and nothing published; a client that says it pulls but takes no refresh
(Neovim 0.11) is published to, as a client that does not pull."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from lsp_harness import (
    Start,
    capabilities,
    eventually,
    make_client,
    open_doc,
    raw_request,
    replace_all,
    start,  # noqa: F401  (a fixture)
    uri,
    write,
)
from lsprotocol import types
from pytest_lsp import ClientServerConfig

FACT = "The ledger service stores every invoice in PostgreSQL 16 on the primary cluster."
MEMORY = f"# Memory\n\n- {FACT}\n- Prefer pnpm over npm in this repository for every package.\n"
NOTE = f"# Standup\n\nWe talked about the roadmap for the quarter ahead today.\n- {FACT}\n"


def workspace(root: Path) -> Path:
    write(root, "MEMORY.md", MEMORY)
    write(root, "memory/2026-01-05.md", NOTE.replace("# Standup", "# Standup\nSee MEMORY.md#L99."))
    return root


def pulling(refresh: bool = True) -> types.ClientCapabilities:
    caps = capabilities()
    assert caps.text_document is not None and caps.workspace is not None
    caps.text_document.diagnostic = types.DiagnosticClientCapabilities(dynamic_registration=True)
    caps.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(
        refresh_support=refresh
    )
    return caps


async def pull_workspace(client: Any, known: dict[str, str] | None = None) -> dict[str, Any]:
    """``workspace/diagnostic`` with the result ids ``known`` (URI -> id): its items by URI."""
    prev = [{"uri": u, "value": v} for u, v in (known or {}).items()]
    res = await raw_request(client, "workspace/diagnostic", {"previousResultIds": prev})
    return {item["uri"]: item for item in res["items"]}


async def pull_document(client: Any, u: str, previous: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"textDocument": {"uri": u}}
    if previous is not None:
        params["previousResultId"] = previous
    return await raw_request(client, "textDocument/diagnostic", params)


def codes(report: dict[str, Any]) -> list[str]:
    return sorted(str(d.get("code")) for d in report.get("items", []))


async def test_a_client_that_pulls_gets_every_file_by_pull_and_nothing_published(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path / "ws")
    client = await start(ws, init_options={"provider": "none"}, caps=pulling())
    note = uri(ws / "memory/2026-01-05.md")
    items: dict[str, Any] = {}

    async def found() -> bool:
        nonlocal items
        items = await pull_workspace(client)
        return codes(items.get(note, {})) == ["duplicate"]

    await eventually(found)
    full = items[note]
    assert full["kind"] == "full" and full["resultId"]
    (d,) = full["items"]
    assert d["source"] == "memory-ls" and d["range"]["start"]["line"] == 4
    assert d["relatedInformation"][0]["location"]["uri"] == uri(ws / "MEMORY.md")

    # The ids the client holds: unchanged, every one of them.
    known = {u: item["resultId"] for u, item in items.items()}
    again = await pull_workspace(client, known)
    assert {u: i["kind"] for u, i in again.items()} == {u: "unchanged" for u in known}
    assert again[note]["resultId"] == full["resultId"]

    # The file is not open: the document pull answers its findings too, then unchanged.
    doc = await pull_document(client, note)
    assert doc["kind"] == "full" and codes(doc) == ["duplicate"]
    same = await pull_document(client, note, doc["resultId"])
    assert same == {"kind": "unchanged", "resultId": doc["resultId"]}

    # Fixed on disk (not open): after a sync, the pull with the ids held gets it in full, empty.
    path = ws / "memory/2026-01-05.md"
    path.write_text(path.read_text().replace(f"- {FACT}\n", "- Something else entirely.\n"))
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="memory.sync", arguments=[])
    )

    async def gone() -> bool:
        nonlocal again
        again = await pull_workspace(client, known)
        return again[note]["kind"] == "full"

    await eventually(gone)
    assert again[note]["items"] == [] and again[note]["resultId"] != known[note]

    # Opened: its citations come in the document pull (not published).
    open_doc(client, path)

    async def with_citation() -> bool:
        nonlocal doc
        doc = await pull_document(client, note, doc["resultId"])
        return doc["kind"] == "full" and codes(doc) == ["citation"]

    await eventually(with_citation)
    assert client.diagnostics == {}  # nothing published: each finding shows once


async def test_an_edit_that_changes_the_findings_asks_for_a_refresh(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path / "ws")
    client = await start(ws, init_options={"provider": "none"}, caps=pulling())
    path = ws / "memory/2026-01-05.md"
    text = path.read_text()
    note = open_doc(client, path)
    doc: dict[str, Any] = {}

    async def both() -> bool:
        nonlocal doc
        doc = await pull_document(client, note)
        return codes(doc) == ["citation", "duplicate"]

    await eventually(both)
    refreshes = client.diagnostic_refresh_count
    replace_all(client, note, text, text.replace(f"- {FACT}\n", ""), version=2)

    async def refreshed() -> bool:
        return client.diagnostic_refresh_count > refreshes

    await eventually(refreshed)

    async def only_citation() -> bool:
        nonlocal doc
        doc = await pull_document(client, note, doc["resultId"])
        return doc["kind"] == "full" and codes(doc) == ["citation"]

    await eventually(only_citation)
    # The workspace pull with the old id gets the file in full, without the duplicate.
    items = await pull_workspace(client, {note: "stale"})
    assert items[note]["kind"] == "full" and codes(items[note]) == ["citation"]
    assert client.diagnostics == {}


@pytest.mark.parametrize("caps", ["no refresh", "no pull"])
async def test_a_client_without_refresh_or_pull_is_published_to(
    start: Start,  # noqa: F811
    tmp_path: Path,
    caps: str,
) -> None:
    ws = workspace(tmp_path / "ws")
    given = pulling(refresh=False) if caps == "no refresh" else capabilities()
    client = await start(ws, init_options={"provider": "none"}, caps=given)
    note = uri(ws / "memory/2026-01-05.md")

    async def published() -> bool:
        return [d.code for d in client.diagnostics.get(note, [])] == ["duplicate"]

    await eventually(published)
    with pytest.raises(Exception, match="Method Not Found: textDocument/diagnostic"):
        await pull_document(client, note)
    assert client.diagnostic_refresh_count == 0


@pytest.mark.parametrize(
    ("caps", "declared"), [("pull", True), ("no refresh", False), ("no pull", False)]
)
async def test_the_capability_is_declared_to_a_client_that_pulls_only(
    tmp_path: Path, caps: str, declared: bool
) -> None:
    ws = workspace(tmp_path / "ws")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    given = {"pull": pulling(), "no refresh": pulling(refresh=False), "no pull": capabilities()}
    cfg = ClientServerConfig(
        server_command=[sys.executable, "-m", "memory_ls", "serve"],
        client_factory=make_client,
        server_env=env,
    )
    client = await cfg.start()
    try:
        result = await client.initialize_session(
            types.InitializeParams(
                capabilities=given[caps],
                workspace_folders=[types.WorkspaceFolder(uri=uri(ws), name="ws")],
                initialization_options={"provider": "none"},
            )
        )
        provider = result.capabilities.diagnostic_provider
        if declared:
            assert isinstance(provider, types.DiagnosticOptions)
            assert provider.workspace_diagnostics and not provider.inter_file_dependencies
            assert provider.identifier == "memory-ls"
        else:
            assert provider is None
        await client.shutdown_session()
    finally:
        await client.stop()
