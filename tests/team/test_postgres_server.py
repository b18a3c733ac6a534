"""Two language servers (real ``memory-ls serve`` over stdio) on one PostgreSQL team index:
a note saved through one is found by the other; an unsaved edit is found by its own editor
only."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_harness import (  # the same harness as the single-server tests
    Start,
    eventually,
    make_workspace,
    open_doc,
    paths,
    request,
    search,
    start,  # noqa: F401  (a fixture)
    status,
    wait_idle,
    write,
)
from lsprotocol import types
from pg_util import shared_url, unique

from memory_ls.index.postgres import URL_ENV


@pytest.fixture
def team_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    url = shared_url()
    monkeypatch.setenv(URL_ENV, url)  # the servers inherit it: no password in any file
    toml = f'[store]\nbackend = "postgres"\n\n[store.postgres]\nnamespace = "{unique("lsp")}"\n'
    a = make_workspace(tmp_path / "a")
    b = tmp_path / "b"
    write(b, "MEMORY.md", "# Memory of b\n\nNothing shared yet.\n")
    for root in (a, b):
        (root / ".memory-ls.toml").write_text(toml)
    return a, b, url


async def test_two_servers_share_saved_notes_not_buffers(
    start: Start,  # noqa: F811
    team_folders: tuple[Path, Path, str],
) -> None:
    a, b, url = team_folders
    ca = await start(a)
    cb = await start(b)
    # a's notes, synced by a at start, are found from b
    assert "memory/projects/rate-limits.md" in paths(await search(cb, "token bucket burst"))

    open_doc(ca, a / "memory/draft.md", "# Draft\n\nThe axolotl budget is confidential.\n")
    await wait_idle(ca)
    assert paths(await search(ca, "MEMORY deploy key"))  # a answers as usual
    # a's editor finds its own unsaved text (searched beside the team index), as a file of
    # its own (not a read-only teammate's); b never sees it
    mine = (await search(ca, "axolotl budget"))["results"]
    assert [h["path"] for h in mine] == ["memory/draft.md"] and "remote" not in mine[0]
    assert mine[0]["uri"] == (a / "memory/draft.md").as_uri()
    assert not (await search(cb, "axolotl budget"))["results"]

    note = a / "memory/fresh.md"
    u = open_doc(ca, note, "")
    text = "# Fresh\n\nThe quokka migration is scheduled.\n"
    note.write_text(text)
    ca.text_document_did_save(
        types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=u), text=text
        )
    )

    async def found() -> bool:
        return "memory/fresh.md" in paths(await search(cb, "quokka migration"))

    await eventually(found)
    assert not (await search(cb, "axolotl budget"))["results"]
    st = await status(cb)
    assert st["store"]["answering"] == "postgres" and st["store"]["problem"] is None
    password = url.split("@")[0].rsplit(":", 1)[1]
    assert password not in str(st)

    # The note is not on b's disk: b shows it from the team index, read-only, through a
    # memory-ls: URI that memory/get, definition and hover all understand.
    hit = next(h for h in (await search(cb, "quokka migration"))["results"])
    assert hit["remote"] is True and hit["uri"] == "memory-ls://" + str(b / "memory/fresh.md")
    got = await request(cb, "memory/get", {"path": hit["uri"], "from": 3, "lines": 1})
    assert got["text"] == "The quokka migration is scheduled." and got["remote"] is True
    assert got["uri"] == hit["uri"]
    citing = "See memory/fresh.md#L3 for the date.\n"
    td = types.TextDocumentIdentifier(uri=open_doc(cb, write(b, "notes/plan.md", citing)))
    where = types.Position(line=0, character=8)
    locs = await cb.text_document_definition_async(
        types.DefinitionParams(text_document=td, position=where)
    )
    assert locs and locs[0].uri == hit["uri"] and locs[0].range.start.line == 2
    hov = await cb.text_document_hover_async(types.HoverParams(text_document=td, position=where))
    assert hov and "quokka migration is scheduled" in hov.contents.value
    syms = await cb.workspace_symbol_async(types.WorkspaceSymbolParams(query="quokka migration"))
    assert syms and syms[0].location.uri == hit["uri"]
