"""End-to-end tests of the language server: pytest-lsp over stdio against the real
``python -m memory_ls serve`` and real workspaces on disk (keyword-only: no model)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from lsp_harness import (  # the harness, shared with the other server tests
    Start,
    capabilities,
    change_folders,
    eventually,
    make_workspace,
    open_doc,
    paths,
    raw_request,
    replace_all,
    request,
    search,
    status,
    uri,
    wait_idle,
    write,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pytest_lsp import LanguageClient


# -- tests ----------------------------------------------------------------------------------
async def test_search_get_status(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    res = await search(client, "PostgreSQL ledger")
    assert res["mode"] == "keyword"
    assert res["results"], res
    top = res["results"][0]
    assert top["path"] == "memory/2026-01-05.md"
    assert top["uri"] == uri(ws / "memory/2026-01-05.md")
    assert top["citation"].startswith("memory/2026-01-05.md#L")
    assert top["range"]["start"] == {"line": top["startLine"] - 1, "character": 0}
    assert "tookMs" in res

    got = await request(client, "memory/get", {"citation": "memory/2026-01-05.md#L5-L6"})
    assert got["from"] == 5 and got["to"] == 6
    assert "PostgreSQL" in got["text"] and got["totalLines"] >= 6
    got = await request(client, "memory/get", {"path": "MEMORY.md", "from": 3, "lines": 1})
    assert got["text"] == "The deploy key lives in the vault."

    st = await status(client)
    assert st["files"] == 3 and st["chunks"] >= 3
    assert st["lastSync"]["files"] == 3
    assert st["watch"] == "client"


async def test_search_explains_each_hit_over_lsp(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    plain = await search(client, "PostgreSQL ledger")
    assert "explain" not in plain and all("explain" not in h for h in plain["results"])
    res = await search(client, "PostgreSQL ledger file:memory/", explain=True)
    assert [h["path"] for h in res["results"]] == [h["path"] for h in plain["results"]]
    (folder,) = res["explain"]
    assert folder["folder"] == str(ws.resolve()) and folder["stages"][0] == "plan"
    assert folder["query"]["words"] == "PostgreSQL ledger"
    assert folder["query"]["filters"] == {"pathPrefix": "memory/"}
    top = res["results"][0]["explain"]
    assert top["keyword"]["rank"] == 1 and top["keyword"]["relative"] == 1.0
    assert top["score"] == res["results"][0]["score"] and top["rank"]["final"] == 1
    await expect_invalid(client, "memory/search", {"query": "x", "explain": "yes"}, "explain")


async def expect_invalid(client: LanguageClient, method: str, params: Any, field: str) -> str:
    with pytest.raises(JsonRpcException) as exc_info:
        await request(client, method, params)
    err = exc_info.value
    assert err.code == JsonRpcInvalidParams.CODE, err
    assert field in err.message, err.message
    return err.message


async def test_invalid_params_name_the_field(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    write(tmp_path, "secret.md", "outside\n")
    client = await start(ws)
    await expect_invalid(client, "memory/search", {}, "query")
    await expect_invalid(client, "memory/search", {"query": 3}, "query")
    await expect_invalid(client, "memory/search", {"query": "x", "maxResults": "5"}, "maxResults")
    await expect_invalid(client, "memory/search", {"query": "x", "maxResults": 0}, "maxResults")
    await expect_invalid(client, "memory/search", {"query": "x", "minScore": 2}, "minScore")
    await expect_invalid(client, "memory/search", {"query": "x", "sources": ["web"]}, "sources")
    await expect_invalid(client, "memory/search", {"query": "x", "folder": "/nope"}, "folder")
    await expect_invalid(client, "memory/search", [1, 2], "params")
    await expect_invalid(client, "memory/get", {}, "path")
    await expect_invalid(client, "memory/get", {"path": "MEMORY.md", "from": 0}, "from")
    msg = await expect_invalid(client, "memory/get", {"path": "../secret.md"}, "path")
    assert "outside" in msg
    await expect_invalid(client, "memory/get", {"path": str(tmp_path / "secret.md")}, "path")
    await expect_invalid(client, "memory/get", {"path": "notes/README.md"}, "path")
    await expect_invalid(client, "memory/get", {"citation": "memory/gone.md#L1"}, "citation")
    msg = await expect_invalid(client, "memory/get", {"citation": "MEMORY.md#L5-L2"}, "citation")
    assert "bad line numbers" in msg
    # A malformed standard request is refused too, and the server carries on.
    with pytest.raises(JsonRpcException):
        await raw_request(client, "textDocument/hover", {"textDocument": {"uri": "file:///x"}})
    with pytest.raises(JsonRpcException) as exc_info:
        await raw_request(
            client,
            "workspace/executeCommand",
            {"command": "memory.reindex", "arguments": [{"force": "yes"}]},
        )
    assert "force" in exc_info.value.message
    assert (await search(client, "PostgreSQL"))["results"]


async def test_edit_then_search_without_save_and_close_reverts(
    start: Start, tmp_path: Path
) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    path = ws / "memory/projects/rate-limits.md"
    old = path.read_text()
    u = open_doc(client, path, old)
    new = "# Rate limits\n\nThe gateway now uses a zeppelin scheduler.\n"
    replace_all(client, u, old, new, version=2)
    res = await search(client, "zeppelin scheduler")
    assert paths(res) == ["memory/projects/rate-limits.md"], res
    res = await search(client, "token bucket burst")
    assert "memory/projects/rate-limits.md" not in paths(res)
    # memory/get reads the buffer, not the disk.
    got = await request(client, "memory/get", {"path": "memory/projects/rate-limits.md"})
    assert got["text"] == new.removesuffix("\n")  # lines, without the final newline
    assert path.read_text() == old  # the indexer never writes memory files

    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    assert not (await search(client, "zeppelin scheduler"))["results"]
    assert "memory/projects/rate-limits.md" in paths(await search(client, "token bucket burst"))


async def test_save_indexes_saved_text(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    path = ws / "memory/fresh.md"
    u = open_doc(client, path, "")
    text = "# Fresh\n\nThe quokka migration is scheduled.\n"
    path.write_text(text)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=u), text=text
        )
    )
    assert paths(await search(client, "quokka migration")) == ["memory/fresh.md"]
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    assert paths(await search(client, "quokka migration")) == ["memory/fresh.md"]


async def test_external_write_via_client_watcher(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    regs = [r for r in client.registrations if r.method == "workspace/didChangeWatchedFiles"]
    assert regs, client.registrations
    watchers = regs[0].register_options["watchers"]
    globs = [w["globPattern"]["pattern"] for w in watchers if "kind" not in w]
    assert {"MEMORY.md", "memory/**/*.md"} <= set(globs)
    # Folders made and deleted too: a client may report one event for the folder, none for
    # its files (Create 1 | Delete 4).
    folders = [w["globPattern"]["pattern"] for w in watchers if w.get("kind") == 5]
    assert folders == ["memory", "memory/**"]

    new = write(ws, "memory/agent-note.md", "# Agent\n\nThe narwhal cache was flushed.\n")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri(new), type=types.FileChangeType.Created)]
        )
    )
    assert paths(await search(client, "narwhal cache")) == ["memory/agent-note.md"]
    new.unlink()
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri(new), type=types.FileChangeType.Deleted)]
        )
    )
    assert not (await search(client, "narwhal cache"))["results"]


async def test_external_write_via_server_watcher(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws, caps=capabilities(watch=False))
    assert (await status(client))["watch"] == "server"
    write(ws, "memory/agent-note.md", "# Agent\n\nThe narwhal cache was flushed.\n")
    t0 = time.monotonic()

    async def indexed() -> bool:  # status does not sync: this waits for the background sync
        return (await status(client))["files"] == 4

    await eventually(indexed, timeout=5)
    assert time.monotonic() - t0 < 3.5
    assert paths(await search(client, "narwhal cache")) == ["memory/agent-note.md"]


async def test_progress_notifications_in_order(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    for i in range(30):
        write(ws, f"memory/bulk/{i:03}.md", f"# Note {i}\n\nbulk text number {i}\n")
    client = await start(ws)
    assert client.progress_reports, "no progress"
    token, reports = next(iter(client.progress_reports.items()))
    kinds = [r.kind for r in reports]
    assert kinds[0] == "begin" and kinds[-1] == "end" and kinds.count("begin") == 1
    assert set(kinds[1:-1]) <= {"report"} and "report" in kinds
    assert "indexing" in reports[0].title
    pcts = [r.percentage for r in reports if r.kind == "report" and r.percentage is not None]
    assert pcts == sorted(pcts) and pcts[-1] == 100
    assert any(r.message == "indexing 33/33" for r in reports if r.kind == "report")
    assert "33 files" in reports[-1].message


async def folders_synced(client: LanguageClient, expected: list[str]) -> bool:
    """Whether the server has exactly these folders, in this order, each synced once."""
    st = await status(client)
    return [f["folder"] for f in st["folders"]] == expected and all(
        f.get("lastSync") for f in st["folders"]
    )


async def test_multi_root_keeps_results_apart(start: Start, tmp_path: Path) -> None:
    a = make_workspace(tmp_path / "a")
    b = tmp_path / "b"
    write(b, "MEMORY.md", "# B\n\nThe PostgreSQL replica for project B is read-only.\n")
    client = await start(a, b)
    st = await status(client)
    assert len(st["folders"]) == 2 and st["files"] == 4
    res = await search(client, "PostgreSQL")
    by_uri = {r["uri"] for r in res["results"]}
    assert uri(b / "MEMORY.md") in by_uri and uri(a / "memory/2026-01-05.md") in by_uri
    only_b = await search(client, "PostgreSQL", folder=uri(b))
    assert [r["uri"] for r in only_b["results"]] == [uri(b / "MEMORY.md")]
    assert not (await search(client, "ledger", folder=uri(b)))["results"]
    # A relative path is found in the folder that has it.
    got = await request(client, "memory/get", {"path": "MEMORY.md", "folder": uri(b)})
    assert "replica" in got["text"]
    got = await request(client, "memory/get", {"path": str(b / "MEMORY.md")})
    assert "replica" in got["text"]

    # Folders come and go.
    c = tmp_path / "c"
    write(c, "memory/c.md", "# C\n\nThe axolotl sprint starts Monday.\n")
    change_folders(client, {uri(c): "c"}, {uri(b): "b"})

    await eventually(lambda: folders_synced(client, [uri(a), uri(c)]))
    assert paths(await search(client, "axolotl sprint")) == ["memory/c.md"]
    assert uri(b / "MEMORY.md") not in {
        r["uri"] for r in (await search(client, "replica"))["results"]
    }


async def test_a_folder_uri_with_a_nul_byte_is_skipped(start: Start, tmp_path: Path) -> None:
    """A folder the file system cannot name (``%00``) is skipped with a warning; the folders
    that come with it in the same event open (found by fuzzing: the whole event failed)."""
    a = make_workspace(tmp_path / "a")
    c = tmp_path / "c"
    write(c, "memory/c.md", "# C\n\nThe axolotl sprint starts Monday.\n")
    client = await start(a)
    change_folders(client, {uri(tmp_path) + "/bad%00name": "bad", uri(c): "c"})

    await eventually(lambda: folders_synced(client, [uri(a), uri(c)]))
    assert paths(await search(client, "axolotl sprint")) == ["memory/c.md"]


async def test_workspace_symbol(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    syms = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="PostgreSQL"))
    assert syms
    sym = syms[0]
    assert sym.name == "Standup"
    assert sym.container_name.startswith("memory/2026-01-05.md#L")
    assert sym.location.uri == uri(ws / "memory/2026-01-05.md")
    assert sym.location.range.start.character == 0
    assert await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="")) == []


CITING = (
    "# Links\n"
    "See memory/2026-01-05.md#L5-L6 for the decision.\n"
    "Also [the rate limits](memory/projects/rate-limits.md#L3) and MEMORY.md#L3.\n"
    "Broken: memory/missing.md#L1 and MEMORY.md#L99, half: MEMORY.md#L4-L40\n"
    "Source: memory/2026-01-05.md#L10\n"
)


async def test_citations_definition_hover_links_diagnostics(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    doc = write(ws, "notes/citing.md", CITING)
    u = open_doc(client, doc)
    td = types.TextDocumentIdentifier(uri=u)

    def pos(line: int, needle: str) -> types.Position:
        return types.Position(line=line, character=CITING.split("\n")[line].index(needle) + 3)

    locs = await client.text_document_definition_async(
        types.DefinitionParams(text_document=td, position=pos(1, "memory/2026"))
    )
    assert locs and locs[0].uri == uri(ws / "memory/2026-01-05.md")
    assert (locs[0].range.start.line, locs[0].range.end.line) == (4, 6)
    # Inside a Markdown link, and a one-line citation.
    locs = await client.text_document_definition_async(
        types.DefinitionParams(text_document=td, position=pos(2, "memory/projects"))
    )
    assert locs[0].uri == uri(ws / "memory/projects/rate-limits.md")
    assert (locs[0].range.start.line, locs[0].range.end.line) == (2, 3)
    locs = await client.text_document_definition_async(
        types.DefinitionParams(text_document=td, position=pos(4, "memory/2026"))
    )
    assert (locs[0].range.start.line, locs[0].range.end.line) == (9, 10)
    # Not on a citation.
    assert not await client.text_document_definition_async(
        types.DefinitionParams(text_document=td, position=types.Position(line=0, character=2))
    )

    hov = await client.text_document_hover_async(
        types.HoverParams(text_document=td, position=pos(1, "memory/2026"))
    )
    assert hov and "PostgreSQL" in hov.contents.value and "#L5-L6" in hov.contents.value
    assert hov.range.start.line == 1
    hov = await client.text_document_hover_async(
        types.HoverParams(text_document=td, position=pos(2, "MEMORY.md"))
    )
    assert "deploy key" in hov.contents.value

    links = await client.text_document_document_link_async(
        types.DocumentLinkParams(text_document=td)
    )
    targets = sorted(link.target for link in links)
    assert uri(ws / "memory/2026-01-05.md") + "#L5-L6" in targets
    assert uri(ws / "memory/projects/rate-limits.md") + "#L3" in targets
    assert not any("missing" in t for t in targets)

    async def diagnosed() -> bool:
        return len(client.diagnostics.get(u, [])) == 3

    await eventually(diagnosed)
    msgs = sorted(d.message for d in client.diagnostics[u])
    assert any("memory/missing.md" in m and "no such" in m for m in msgs)
    assert any("MEMORY.md#L99" in m and "past the end" in m for m in msgs)
    assert any("MEMORY.md#L4-L40" in m for m in msgs)
    assert all(d.range.start.line == 3 for d in client.diagnostics[u])

    # Fix the document: the diagnostics go away.
    replace_all(client, u, CITING, "# Links\nSee MEMORY.md#L3.\n", version=2)

    async def cleared() -> bool:
        return not client.diagnostics.get(u, [None])

    await eventually(cleared)


# Lines as LSP counts them: broken by "\n", "\r\n" and a lone "\r" (an old Mac file), never by
# U+2028 or a form feed, which Python's splitlines also breaks at.
LONE_CR = (
    "# Old Mac note\rSee MEMORY.md#L3 here.\u2028Still line 1: memory/2026-01-05.md#L5\r\n"
    "\rBroken: MEMORY.md#L99\n"
)


async def test_citations_in_a_document_of_lone_carriage_returns(
    start: Start, tmp_path: Path
) -> None:
    """The editor's line 1 is the one after the "\r": the citation under its cursor is found
    there, and the ranges sent back are on the lines the editor shows."""
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    u = open_doc(client, ws / "notes/mac.md", LONE_CR)
    td = types.TextDocumentIdentifier(uri=u)
    line1 = "See MEMORY.md#L3 here.\u2028Still line 1: memory/2026-01-05.md#L5"

    hov = await client.text_document_hover_async(
        types.HoverParams(text_document=td, position=types.Position(line=1, character=6))
    )
    assert hov and "deploy key" in hov.contents.value
    assert hov.range.start == types.Position(line=1, character=4)
    col = line1.index("memory/2026")
    locs = await client.text_document_definition_async(
        types.DefinitionParams(text_document=td, position=types.Position(line=1, character=col))
    )
    assert locs and locs[0].uri == uri(ws / "memory/2026-01-05.md")
    assert locs[0].range.start.line == 4

    links = await client.text_document_document_link_async(
        types.DocumentLinkParams(text_document=td)
    )
    assert sorted((lk.range.start.line, lk.range.start.character) for lk in links) == [
        (1, 4),
        (1, col),
        (3, 8),
    ]

    async def diagnosed() -> bool:
        return len(client.diagnostics.get(u, [])) == 1

    await eventually(diagnosed)
    (diag,) = client.diagnostics[u]
    assert diag.range.start == types.Position(line=3, character=8)


async def test_citations_into_a_file_of_lone_carriage_returns(start: Start, tmp_path: Path) -> None:
    """A cited file's lines are the editor's too: its lone "\r" break lines (line 4 is the
    editor's fourth), "\r\n" is one break, and U+2028 or a form feed breaks none."""
    ws = make_workspace(tmp_path / "ws")
    (ws / "memory/mac.md").write_bytes(
        "# Mac\r\rThe kiln runs at 1200 degrees.\rGlaze \u2028 the pots\x0c on Sunday.\r\n"
        "Done.\r".encode()
    )
    client = await start(ws)
    got = await request(client, "memory/get", {"citation": "memory/mac.md#L3-L4"})
    assert got["text"] == "The kiln runs at 1200 degrees.\nGlaze \u2028 the pots\x0c on Sunday."
    assert got["totalLines"] == 5
    hit = (await search(client, "kiln degrees"))["results"][0]
    assert (hit["startLine"], hit["endLine"]) == (1, 5)

    text = "See memory/mac.md#L5 and memory/mac.md#L3-L4, not MEMORY.md#L99\n"
    u = open_doc(client, ws / "notes/kiln.md", text)
    td = types.TextDocumentIdentifier(uri=u)
    hov = await client.text_document_hover_async(
        types.HoverParams(text_document=td, position=types.Position(line=0, character=6))
    )
    assert hov and "Done." in hov.contents.value and "of 5" in hov.contents.value
    locs = await client.text_document_definition_async(
        types.DefinitionParams(
            text_document=td, position=types.Position(line=0, character=text.rindex("memory/"))
        )
    )
    assert locs and (locs[0].range.start.line, locs[0].range.end.line) == (2, 4)

    async def diagnosed() -> bool:
        return bool(client.diagnostics.get(u))

    await eventually(diagnosed)  # the citations of mac.md have no line past the end
    assert [d.message.split(":")[0] for d in client.diagnostics[u]] == ["MEMORY.md#L99"]


async def test_document_symbols(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    text = (
        "# Standup\n\n## Decisions\n\n```\n# not a heading\n```\n"
        "### Deep ✨ one\n\n## Notes\n\ntext\n"
    )
    u = open_doc(client, ws / "memory/2026-01-05.md", text)
    syms = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    assert [s.name for s in syms] == ["Standup"]
    kids = syms[0].children
    assert [k.name for k in kids] == ["Decisions", "Notes"]
    assert [k.name for k in kids[0].children] == ["Deep ✨ one"]
    assert kids[0].range.start.line == 2 and kids[0].range.end.line == 8
    # UTF-16 columns: the sparkle is one code point, one UTF-16 unit, not two.
    assert kids[0].children[0].selection_range.end.character == len("### Deep ✨ one")


async def test_a_note_is_markdown_whatever_language_the_client_names(
    start: Start, tmp_path: Path
) -> None:
    """eglot names the language after the Emacs mode ("text", "gfm"): a .md file still gets
    its outline."""
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    for language, name in (("text", "a.md"), ("gfm", "b.md")):
        u = open_doc(client, write(ws, f"memory/{name}", "# Title\n\n## Part\n"), language=language)
        syms = await client.text_document_document_symbol_async(
            types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=u))
        )
        assert [s.name for s in syms] == ["Title"], language
        assert [k.name for k in syms[0].children] == ["Part"]


async def test_citations_in_a_code_file(start: Start, tmp_path: Path) -> None:
    """Citations work in any document (DESIGN.md), a code comment too; its "# ..." comment
    lines are no headings of an outline."""
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    files = (await status(client))["files"]
    code = "# Ledger client\n# see memory/2026-01-05.md#L5-L6 for why\nDB = 'postgres'\n"
    u = open_doc(client, write(ws, "src/ledger.py", code), language="python")
    td = types.TextDocumentIdentifier(uri=u)
    at = types.Position(line=1, character=code.split("\n")[1].index("memory/") + 3)
    locs = await client.text_document_definition_async(
        types.DefinitionParams(text_document=td, position=at)
    )
    assert locs and locs[0].uri == uri(ws / "memory/2026-01-05.md")
    hov = await client.text_document_hover_async(types.HoverParams(text_document=td, position=at))
    assert hov and "PostgreSQL" in hov.contents.value
    syms = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=td)
    )
    assert syms == []
    assert (await status(client))["files"] == files  # read, never indexed: no memory file


async def test_document_symbols_of_lone_carriage_returns(start: Start, tmp_path: Path) -> None:
    """Headings are on the lines the editor counts: a lone "\r" breaks a line, U+2028 does not."""
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    text = "# Mac\r\rtext\u2028# not a heading\r## Glaze\rmore\r\n## Kiln\r"
    u = open_doc(client, ws / "memory/mac.md", text)
    syms = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=u))
    )
    assert [s.name for s in syms] == ["Mac"]
    kids = syms[0].children
    assert [(k.name, k.range.start.line, k.range.end.line) for k in kids] == [
        ("Glaze", 3, 4),
        ("Kiln", 5, 6),  # to the empty line after the final break, as after a "\n"
    ]
    assert kids[0].selection_range.end == types.Position(line=3, character=len("## Glaze"))


async def test_commands(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    st = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="memory.status")
    )
    assert st["files"] == 3
    res = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="memory.sync")
    )
    assert res["folders"][0]["report"]["full"] is False
    res = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="memory.reindex", arguments=[{"force": True}])
    )
    report = res["folders"][0]["report"]
    assert report["full"] is True and report["files"] == 3 and report["indexed"] == 3
    assert paths(await search(client, "PostgreSQL"))


async def test_a_sync_command_says_why_a_folder_has_no_report(start: Start, tmp_path: Path) -> None:
    """A folder whose index cannot be opened answered `report: null` and nothing else: the
    editors said "index updated"."""
    good = make_workspace(tmp_path / "good")
    bad = make_workspace(tmp_path / "bad")
    write(bad, ".memory-ls.toml", f'[store]\npath = "{bad / "memory"}"\n')  # a folder: refused
    client = await start(good, bad)
    for command in ("memory.sync", "memory.reindex"):
        res = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command)
        )
        by_folder = {Path(f["folder"]).name: f for f in res["folders"]}
        assert by_folder["good"]["report"]["files"] == 3 and "error" not in by_folder["good"]
        assert by_folder["bad"]["report"] is None
        assert "is a folder" in by_folder["bad"]["error"], by_folder["bad"]
    assert (bad / "memory/2026-01-05.md").is_file()


async def test_save_session_command_writes_and_indexes_a_note(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    write(
        ws,
        "sessions/chat.jsonl",
        '{"role": "user", "content": "How should we shard the walrus telemetry table?"}\n'
        '{"role": "assistant", "content": "Shard walrus telemetry by device id."}\n',
    )
    client = await start(ws)
    res = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="memory.saveSession",
            arguments=[{"transcript": "sessions/chat.jsonl", "source": "test"}],
        )
    )
    assert res["path"].startswith("memory/") and res["path"].endswith(".md")
    note = (ws / res["path"]).read_text()
    assert note.startswith("# Session: ") and "walrus telemetry" in note
    assert res["path"] in paths(await search(client, "walrus telemetry"))
    with pytest.raises(JsonRpcException):
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="memory.saveSession", arguments=[{"transcript": "nope.jsonl"}]
            )
        )


async def test_rapid_changes_and_concurrent_searches(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    path = ws / "memory/typing.md"
    u = open_doc(client, path, "")
    text = ""
    for i in range(1000):  # one keystroke at a time, appended at the end
        piece = f"w{i} " if i % 10 else "\n"
        lines = text.split("\n")
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=u, version=i + 2),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(
                            start=types.Position(line=len(lines) - 1, character=len(lines[-1])),
                            end=types.Position(line=len(lines) - 1, character=len(lines[-1])),
                        ),
                        text=piece,
                    )
                ],
            )
        )
        text += piece
    res = await search(client, "w999")
    assert paths(res) == ["memory/typing.md"]
    got = await request(client, "memory/get", {"path": "memory/typing.md"})
    assert got["text"] == text

    t0 = time.monotonic()
    answers = await asyncio.gather(
        *(search(client, q) for q in ["PostgreSQL", "vault", "token bucket", "w501"] * 25),
        return_exceptions=True,
    )
    # A client's searches take turns; a newer one supersedes those still waiting (answered
    # RequestCancelled). Every search that ran found its note; the last one always runs.
    cancelled = [a for a in answers if isinstance(a, JsonRpcException)]
    assert all(a.code == -32800 for a in cancelled), cancelled
    ran = [a for a in answers if not isinstance(a, BaseException)]
    assert len(ran) + len(cancelled) == 100 and all(a["results"] for a in ran)
    assert not isinstance(answers[-1], BaseException)
    assert time.monotonic() - t0 < 20
    assert (await status(client))["openDocuments"] == ["memory/typing.md"]


async def test_search_during_full_rebuild_is_answered(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    filler = "\n".join(f"line {j} of padding text about topic {j % 17}" for j in range(200))
    for i in range(600):
        write(ws, f"memory/bulk/{i:04}.md", f"# Bulk {i}\n\n{filler}\n")
    client = await start(ws)
    rebuild = asyncio.ensure_future(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="memory.reindex", arguments=[{"force": True}])
        )
    )
    answered_during = 0
    while not rebuild.done():
        t0 = time.monotonic()
        res = await search(client, "PostgreSQL ledger")
        assert paths(res)[:1] == ["memory/2026-01-05.md"]
        assert time.monotonic() - t0 < 2
        if not rebuild.done():
            answered_during += 1
        await asyncio.sleep(0.05)
    assert answered_during >= 1, "the rebuild finished before any search ran"
    assert (await rebuild)["folders"][0]["report"]["full"] is True


async def test_cancel_slow_search(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    filler = "\n".join(f"line {j} of padding text about topic {j % 17}" for j in range(300))
    for i in range(300):
        write(ws, f"memory/bulk/{i:04}.md", f"# Bulk {i}\n\n{filler}\n")
    client = await start(ws)
    for i in range(300):  # every file changed: the next sync holds the writer for a while
        write(ws, f"memory/bulk/{i:04}.md", f"# Bulk {i} v2\n\n{filler}\n")
    sync = asyncio.ensure_future(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command="memory.sync"))
    )

    async def syncing() -> bool:
        return bool((await status(client))["syncing"])

    await eventually(syncing)
    # An edit is pending, so this search waits for the writer: a slow search.
    path = ws / "memory/projects/rate-limits.md"
    u = open_doc(client, path)
    replace_all(client, u, path.read_text(), "# Rate limits\n\nquasar\n", version=2)
    slow = asyncio.ensure_future(
        client.protocol.send_request_async(
            "memory/search", {"query": "quasar"}, msg_id="slow-search"
        )
    )
    await asyncio.sleep(0.1)
    client.protocol.notify("$/cancelRequest", types.CancelParams(id="slow-search"))
    with pytest.raises(JsonRpcException) as exc_info:
        await asyncio.wait_for(slow, 10)
    assert exc_info.value.code == -32800
    assert not sync.done(), "the sync ended first: the search was not slow"
    await sync
    # The edit the cancelled search waited for was not lost.
    assert paths(await search(client, "quasar")) == ["memory/projects/rate-limits.md"]


async def test_settings_from_init_options_and_configuration(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    # As VS Code and the Neovim plugin do: the same settings both ways.
    settings = {"memory": {"query": {"maxResults": 1, "minScore": 0}, "bogus": 1}}
    client = await start(ws, init_options=settings, config=settings)
    res = await search(client, "the")
    assert len(res["results"]) == 1
    # A bad setting is reported by name, once, not fatal.
    assert [m for m in client.messages if "bogus" in m.message]
    st = await status(client)
    assert any("bogus" in p for p in st["settingsProblems"])

    # An open buffer with unsaved text survives the engine reload.
    path = ws / "memory/projects/rate-limits.md"
    u = open_doc(client, path)
    replace_all(client, u, path.read_text(), "# Rate limits\n\nUnsaved pulsar note.\n", 2)
    assert paths(await search(client, "pulsar")) == ["memory/projects/rate-limits.md"]

    # The client's configuration changes: a chunking change rebuilds the index safely.
    client.set_configuration(
        {"memory": {"query": {"minScore": 0}, "chunking": {"tokens": 64, "overlap": 8}}}
    )
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    async def rebuilt() -> bool:
        ls = (await status(client)).get("lastSync") or {}
        return ls.get("full") is True and ls.get("reason") == "settings"

    await eventually(rebuilt)
    assert paths(await search(client, "PostgreSQL"))
    assert paths(await search(client, "pulsar")) == ["memory/projects/rate-limits.md"]
    assert any("reopening the index" in m.message for m in client.log_messages)
    # maxResults was removed in the editor: the client's answer replaces what it sent at start,
    # so the default is back (stacked on initializationOptions, 1 stayed until a restart).
    assert len((await search(client, "the"))["results"]) > 1
    assert not any("bogus" in p for p in (await status(client))["settingsProblems"])


async def test_settings_file_change_reloads(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws, init_options={"query": {"minScore": 0}})
    assert len((await search(client, "the"))["results"]) > 1
    toml = write(ws, ".memory-ls.toml", "[query]\nmaxResults = 1\n")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri(toml), type=types.FileChangeType.Created)]
        )
    )

    async def one_result() -> bool:
        return len((await search(client, "the"))["results"]) == 1

    await eventually(one_result)


async def test_degradation_shown_once(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws, init_options={"provider": "openai"})
    for _ in range(3):
        res = await search(client, "PostgreSQL")
        assert res["mode"] == "keyword" and res["fallbackReason"]
    shown = [m for m in client.messages if "keyword-only" in m.message]
    assert len(shown) == 1, client.messages
    assert "OPENAI_API_KEY" in shown[0].message


async def test_exit_without_shutdown_loses_nothing(start: Start, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws)
    client.exit(None)
    assert client._server is not None
    rc = await asyncio.wait_for(client._server.wait(), 10)
    assert rc == 1  # exit without shutdown, as the spec says
    client.capabilities = None  # nothing more to shut down

    again = await start(ws)
    st = await status(again)
    assert st["files"] == 3 and st["lastSync"]["indexed"] == 0  # all unchanged on disk
    assert paths(await search(again, "PostgreSQL"))


@pytest.mark.model
async def test_vectors_follow_edits_in_background(start: Start, tmp_path: Path) -> None:
    from model_util import ensure_test_model

    model = ensure_test_model()
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws, init_options={"provider": "local", "local": {"modelPath": str(model)}})

    async def embedded() -> bool:
        st = await status(client)
        return st["chunks"] > 0 and st["pendingEmbeddings"] == 0

    await eventually(embedded, timeout=60)
    path = ws / "memory/projects/rate-limits.md"
    old = path.read_text()
    u = open_doc(client, path, old)
    replace_all(client, u, old, old + "\n## Quotas\n\nEach tenant gets 5 GB of storage.\n", 2)
    res = await search(client, "tenant storage quota")
    assert paths(res)[:1] == ["memory/projects/rate-limits.md"]
    await eventually(embedded, timeout=60)
    res = await search(client, "how much disk space does a customer get")
    assert res["mode"] == "hybrid" and "memory/projects/rate-limits.md" in paths(res)


async def test_the_configuration_sent_on_registration_opens_the_index_once(
    start: Start, tmp_path: Path
) -> None:
    """VS Code sends ``didChangeConfiguration`` the moment the server registers for it, while
    the folders are still being opened: the reload found no engine yet, took the settings for
    changed, and every start opened the index (and the embedding model) a second time and
    synced again ("settings")."""
    ws = make_workspace(tmp_path / "ws")
    caps = capabilities()
    assert caps.workspace is not None
    caps.workspace.did_change_configuration = types.DidChangeConfigurationClientCapabilities(
        dynamic_registration=True
    )
    client = await start(
        ws, config={"memory": {"provider": "none"}}, caps=caps, config_on_register=True
    )
    methods = [r.method for r in client.registrations]  # type: ignore[attr-defined]
    assert types.WORKSPACE_DID_CHANGE_CONFIGURATION in methods
    await wait_idle(client)
    assert (await status(client))["lastSync"]["reason"] == "startup"


async def test_a_bad_setting_sent_at_runtime_is_reported(start: Start, tmp_path: Path) -> None:
    """A bad value sent with ``didChangeConfiguration`` is ignored, so the effective settings
    do not change: it was reported nowhere (the reload stopped at "nothing changed"), and a
    problem fixed at runtime stayed in the status."""
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws, config={"memory": {"query": {"minScore": 0}}})
    assert (await status(client))["settingsProblems"] == []
    client.set_configuration({"memory": {"query": {"minScore": 0, "maxResults": "lots"}}})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    async def reported() -> bool:
        problems = (await status(client))["settingsProblems"]
        return any("query.maxResults" in p for p in problems)

    await eventually(reported)
    assert [m for m in client.messages if "query.maxResults" in m.message]

    client.set_configuration({"memory": {"query": {"minScore": 0}}})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    async def cleared() -> bool:
        return (await status(client))["settingsProblems"] == []

    await eventually(cleared)


async def test_the_same_folder_twice_answers_once(start: Start, tmp_path: Path) -> None:
    """A folder added again under another URI (a trailing slash, a symlink to it) opened a
    second engine on the same index: every hit came back twice."""
    a = make_workspace(tmp_path / "a")
    (tmp_path / "link").symlink_to(a)
    client = await start(a)
    change_folders(client, {uri(a) + "/": "a2", (tmp_path / "link").as_uri(): "link"})
    await eventually(lambda: folders_synced(client, [uri(a)]))
    st = await wait_idle(client)
    assert [f["folder"] for f in st["folders"]] == [uri(a)]
    assert paths(await search(client, "PostgreSQL")) == ["memory/2026-01-05.md"]


async def test_watching_follows_sync_watch_and_new_folders(start: Start, tmp_path: Path) -> None:
    """With no folder watching (``sync.watch`` off), turning it on at runtime or adding a
    folder that wants it watched nothing until a restart (a note an agent wrote stayed out of
    the index); turning it off kept watching."""
    a = make_workspace(tmp_path / "a")
    write(a, ".memory-ls.toml", "[sync]\nwatch = false\n")
    client = await start(a, caps=capabilities(watch=False))
    assert (await status(client))["watch"] == "off"

    b = make_workspace(tmp_path / "b")
    change_folders(client, {uri(b): "b"})
    await eventually(lambda: folders_synced(client, [uri(a), uri(b)]))
    assert (await status(client))["watch"] == "server"
    write(b, "memory/agent.md", "# Agent\n\nThe narwhal migration is done.\n")

    async def found(query: str, path: str) -> bool:
        return path in {r["uri"] for r in (await search(client, query))["results"]}

    await eventually(lambda: found("narwhal", uri(b / "memory/agent.md")))

    async def watch_is(mode: str) -> bool:
        return (await status(client))["watch"] == mode

    client.set_configuration({"memory": {"sync": {"watch": False}}})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await eventually(lambda: watch_is("off"))
    client.set_configuration({"memory": {"sync": {"watch": True}}})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await eventually(lambda: watch_is("server"))
    await wait_idle(client)
    write(a, "memory/agent.md", "# Agent\n\nThe okapi survey starts in May.\n")
    await eventually(lambda: found("okapi", uri(a / "memory/agent.md")))


async def test_folders_never_share_an_index_file(start: Start, tmp_path: Path) -> None:
    """A ``store.path`` given for every folder (initializationOptions, the user's config)
    made two folders share one index: each folder's sync dropped the other's files, and a
    search named a file of one folder under the other (``b/memory/2026-01-05.md``, which
    does not exist). The first folder keeps the file, the next one its own, and says so."""
    a = make_workspace(tmp_path / "a")
    b = tmp_path / "b"
    write(b, "MEMORY.md", "# B\n\nThe PostgreSQL replica for project B is read-only.\n")
    shared = tmp_path / "one.sqlite"
    client = await start(a, b, init_options={"store": {"path": str(shared)}})
    st = await status(client)
    assert [f["files"] for f in st["folders"]] == [3, 1]
    assert st["folders"][0]["settingsProblems"] == []
    assert any("store.path" in p for p in st["folders"][1]["settingsProblems"])
    hits = {r["uri"] for r in (await search(client, "PostgreSQL"))["results"]}
    assert hits == {uri(a / "memory/2026-01-05.md"), uri(b / "MEMORY.md")}

    # A settings change reopens a folder: the first one still keeps the file.
    client.set_configuration({"memory": {"query": {"maxResults": 5}}})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await asyncio.sleep(0.5)
    st = await wait_idle(client)
    assert [f["files"] for f in st["folders"]] == [3, 1]
    hits = {r["uri"] for r in (await search(client, "PostgreSQL"))["results"]}
    assert hits == {uri(a / "memory/2026-01-05.md"), uri(b / "MEMORY.md")}


async def test_a_settings_file_saved_half_edited_keeps_the_index(
    start: Start, tmp_path: Path
) -> None:
    """A ``.memory-ls.toml`` that does not parse (saved mid-edit) was read as empty: its
    settings went back to the defaults (other chunks, another provider) and the index was
    rebuilt, and rebuilt again once the file was fixed. The folder keeps its settings and
    says why, until the file reads again."""
    ws = make_workspace(tmp_path / "ws")
    good = "[chunking]\ntokens = 64\noverlap = 8\n[query]\nminScore = 0\n"
    toml = write(ws, ".memory-ls.toml", good)
    client = await start(ws)

    def saved(text: str) -> None:
        write(ws, ".memory-ls.toml", text)
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=uri(toml), type=types.FileChangeType.Changed)]
            )
        )

    async def problems_say(word: str | None) -> bool:
        problems = (await status(client))["settingsProblems"]
        return any(word in p for p in problems) if word else problems == []

    saved(good.replace("[query]", "[query"))
    await eventually(lambda: problems_say("cannot read settings"))
    saved(good)
    await eventually(lambda: problems_say(None))
    st = await wait_idle(client)
    assert st["lastSync"]["reason"] == "startup", st["lastSync"]  # never rebuilt
    assert not [m for m in client.log_messages if "reopening the index" in m.message]


async def test_a_search_during_the_first_sync_waits_for_it(start: Start, tmp_path: Path) -> None:
    """A workspace never indexed: a search sent while the first sync runs waited for nothing
    and answered "no results" (Neovim's first :MemorySearch started the server and said so)."""
    ws = tmp_path / "ws"
    for i in range(3000):
        write(ws, f"memory/2026-01-{i:04d}.md", f"# Note {i}\n\nRoutine entry number {i}.\n")
    write(ws, "memory/2026-01-9999.md", "# Ocelot\n\nThe ocelot sighting was on the ridge.\n")
    client = await start(ws, init_options={"provider": "none"}, wait=False)
    res = await search(client, "ocelot sighting")
    assert paths(res) == ["memory/2026-01-9999.md"]
    assert "first sync" not in (res.get("fallbackReason") or "")
