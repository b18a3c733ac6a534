"""The code actions that edit a memory file to fix a finding, on the real language server over
stdio: mark the older of two conflicting passages superseded (struck through, or a front matter
key), move what is past a load cap into a new topic file (only for a client that creates files),
set a bad or past ``expires:``, and add one as a source action. Each returned ``WorkspaceEdit``
is applied here to the text, and the result is checked to the character."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

from lsp_harness import (
    Start,
    capabilities,
    eventually,
    open_doc,
    raw_request,
    replace_all,
    start,  # noqa: F401  (a fixture)
    uri,
    write,
)
from lsprotocol import types

OLD = "The billing service is deployed with Helm charts from the infra repo."
MEMORY = f"# Memory\n\n- {OLD}\n- Prefer pnpm over npm for every package in this repo.\n"
NEWER = "# Notes\n\n- In March we moved the billing service off Helm to Kustomize overlays.\n"
IN_90 = (date.today() + timedelta(days=90)).isoformat()


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """The edits applied to ``text`` (LSP: every range against the original text)."""
    lines = text.split("\n")

    def offset(p: types.Position) -> int:
        return sum(len(line) + 1 for line in lines[: p.line]) + p.character

    for e in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        a, b = offset(e.range.start), offset(e.range.end)
        text = text[:a] + e.new_text + text[b:]
    return text


def text_edits(conv: Any, action: dict[str, Any], u: str) -> list[types.TextEdit]:
    return [conv.structure(e, types.TextEdit) for e in action["edit"]["changes"][u]]


def ours(client: Any, u: str, code: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(u, []) if d.code == code]


async def flagged(client: Any, u: str, code: str) -> types.Diagnostic:
    async def one() -> bool:
        return len(ours(client, u, code)) == 1

    await eventually(one, timeout=20)  # a busy machine: the check runs after the sync
    return ours(client, u, code)[0]


async def actions(
    client: Any,
    u: str,
    diags: list[types.Diagnostic],
    at: types.Range | None = None,
    only: list[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """The code actions by their title's words before a ":" or a "(" (raw JSON)."""
    where = at or diags[0].range
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=u),
        range=where,
        context=types.CodeActionContext(diagnostics=diags, only=only),
    )
    conv = client.protocol._converter
    got = await raw_request(client, "textDocument/codeAction", conv.unstructure(params))
    return {a["title"].split(" (")[0].split(":")[0]: a for a in got or []}


def top(line: int = 0) -> types.Range:
    at = types.Position(line=line, character=0)
    return types.Range(start=at, end=at)


async def test_a_conflict_is_marked_superseded_and_then_no_longer_flagged(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", MEMORY)
    write(ws, "memory/2026-03-02.md", NEWER)
    client = await start(ws, init_options={"provider": "none"})
    conv = client.protocol._converter
    memory = open_doc(client, ws / "MEMORY.md")
    d = await flagged(client, memory, "conflict")
    by = await actions(client, memory, [d])
    title = "Mark this passage superseded by memory/2026-03-02.md#L3 (struck through)"
    assert by["Mark this passage superseded by memory/2026-03-02.md#L3"]["title"] == title
    assert set(by) == {
        "Open memory/2026-03-02.md",
        "Mark this passage superseded by memory/2026-03-02.md#L3",
    }
    action = by["Mark this passage superseded by memory/2026-03-02.md#L3"]
    assert action["kind"] == "quickfix"
    struck = apply(MEMORY, text_edits(conv, action, memory))
    assert struck == MEMORY.replace(f"- {OLD}", f"- ~~{OLD}~~")

    # Applied: the check no longer flags it; taken off again, it does.
    replace_all(client, memory, MEMORY, struck, version=2)

    async def gone() -> bool:
        return not ours(client, memory, "conflict")

    await eventually(gone, timeout=20)
    replace_all(client, memory, struck, MEMORY, version=3)
    await flagged(client, memory, "conflict")


async def test_a_table_row_is_not_struck_through(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Tildes around a table's row would break the table: only *Open* is offered there."""
    ws = tmp_path / "ws"
    table = f"# Memory\n\n| service | how |\n|---|---|\n| billing | {OLD} |\n"
    write(ws, "MEMORY.md", table)
    write(ws, "memory/2026-03-02.md", NEWER)
    client = await start(ws, init_options={"provider": "none"})
    memory = open_doc(client, ws / "MEMORY.md")
    d = await flagged(client, memory, "conflict")
    assert d.range.start.line == 4
    assert set(await actions(client, memory, [d])) == {"Open memory/2026-03-02.md"}


async def test_the_front_matter_style_adds_superseded_by(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    with_front = "---\ntags: [deploy]  # kept as written\n---\n" + MEMORY
    write(ws, "MEMORY.md", with_front)
    write(ws, "memory/2026-03-02.md", NEWER)
    config = {"memory": {"provider": "none", "hygiene": {"supersede": "frontMatter"}}}
    client = await start(ws, config=config)
    conv = client.protocol._converter
    memory = open_doc(client, ws / "MEMORY.md")
    d = await flagged(client, memory, "conflict")
    by = await actions(client, memory, [d])
    action = by["Mark this passage superseded by memory/2026-03-02.md#L3"]
    assert action["title"].endswith("(superseded_by: memory/2026-03-02.md#L3 in the front matter)")
    marked = apply(with_front, text_edits(conv, action, memory))
    assert marked == (
        "---\ntags: [deploy]  # kept as written\nsuperseded_by: memory/2026-03-02.md#L3\n---\n"
        + MEMORY
    )
    replace_all(client, memory, with_front, marked, version=2)

    async def gone() -> bool:
        return not ours(client, memory, "conflict")

    await eventually(gone, timeout=20)


def long_memory() -> str:
    items = [f"- item {i}" for i in range(3, 200)]  # lines 3-199: too short to be copies
    past = ["## Deploy notes", "- deploy step one", "- deploy step two"]
    return "\n".join(["# Memory", "", *items, "", *past]) + "\n"


async def test_lines_past_the_load_cap_move_into_a_new_topic_file(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    text = long_memory()
    write(ws, "MEMORY.md", text)
    write(ws, "memory/deploy-notes.md", "# Deploy notes\n\nAn older topic file of that name.\n")
    caps = capabilities()
    assert caps.workspace is not None
    caps.workspace.workspace_edit = types.WorkspaceEditClientCapabilities(
        document_changes=True, resource_operations=[types.ResourceOperationKind.Create]
    )
    client = await start(ws, init_options={"provider": "none"}, caps=caps)
    conv = client.protocol._converter
    memory = open_doc(client, ws / "MEMORY.md")
    d = await flagged(client, memory, "load-cap")
    assert d.range.start.line == 200  # line 201: "## Deploy notes"
    by = await actions(client, memory, [d])
    (title,) = by
    assert title == "Move lines 200-203 into memory/deploy-notes-2.md, linked from MEMORY.md"
    create, new_file, index = by[title]["edit"]["documentChanges"]
    new_uri = uri(ws / "memory/deploy-notes-2.md")
    assert create == {
        "kind": "create",
        "uri": new_uri,
        "options": {"overwrite": False, "ignoreIfExists": False},
    }
    assert new_file["textDocument"]["uri"] == new_uri
    moved = apply("", [conv.structure(e, types.TextEdit) for e in new_file["edits"]])
    assert moved == "## Deploy notes\n- deploy step one\n- deploy step two\n"
    assert index["textDocument"]["uri"] == memory
    kept = apply(text, [conv.structure(e, types.TextEdit) for e in index["edits"]])
    lines = text.split("\n")
    assert kept == "\n".join(lines[:199]) + "\n- [Deploy notes](memory/deploy-notes-2.md)\n"
    assert len(kept.splitlines()) == 200  # the link is within the cap

    # A client that cannot create files is not offered it.
    plain = await start(ws, init_options={"provider": "none"})
    memory = open_doc(plain, ws / "MEMORY.md")
    d = await flagged(plain, memory, "load-cap")
    assert await actions(plain, memory, [d]) == {}


async def test_a_bad_or_past_expires_is_set_and_one_can_be_added(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    bad = "---\nowner: ops\nexpires: next week  # or so\n---\n# Freeze\n\nNo deploys.\n"
    past = "---\nvalid_until: 2020-01-31\n---\n# Rota\n\nAlice is on call.\n"
    bare = "# Runbook\n\nRestart the worker with make restart.\n"
    write(ws, "MEMORY.md", "# Memory\n\nSee memory/runbook.md for the runbook.\n")
    write(ws, "memory/freeze.md", bad)
    write(ws, "memory/rota.md", past)
    write(ws, "memory/runbook.md", bare)
    client = await start(ws, init_options={"provider": "none"})
    conv = client.protocol._converter

    freeze = open_doc(client, ws / "memory/freeze.md")
    d = await flagged(client, freeze, "front-matter")
    by = await actions(client, freeze, [d])
    action = by["Set expires"]
    assert action["title"] == f"Set expires: {IN_90} (90 days from today)"
    fixed = apply(bad, text_edits(conv, action, freeze))
    assert fixed == bad.replace("expires: next week  # or so", f"expires: {IN_90}")

    rota = open_doc(client, ws / "memory/rota.md")
    d = await flagged(client, rota, "expired")
    by = await actions(client, rota, [d])
    fixed = apply(past, text_edits(conv, by["Set valid_until"], rota))
    assert fixed == past.replace("2020-01-31", IN_90)
    assert "Add expires" not in by  # it has one

    # "Add expires:" as a source action, and on line 1 when every action is asked for.
    runbook = open_doc(client, ws / "memory/runbook.md")
    by = await actions(client, runbook, [], at=top(), only=["source"])
    action = by["Add expires"]
    assert action["kind"] == "source.addExpires" and "diagnostics" not in action
    added = apply(bare, text_edits(conv, action, runbook))
    assert added == f"---\nexpires: {IN_90}\n---\n" + bare
    assert set(await actions(client, runbook, [], at=top())) == {"Add expires"}
    line3 = types.Range(
        start=types.Position(line=2, character=0), end=types.Position(line=2, character=0)
    )
    assert await actions(client, runbook, [], at=line3) == {}
    assert await actions(client, runbook, [], at=top(), only=["quickfix"]) == {}
    # Into front matter that has none of it, after its keys.
    tagged = "---\ntags: [ops]\n---\n" + bare
    replace_all(client, runbook, bare, tagged, version=2)
    by = await actions(client, runbook, [], at=top(), only=["source.addExpires"])
    added = apply(tagged, text_edits(conv, by["Add expires"], runbook))
    assert added == f"---\ntags: [ops]\nexpires: {IN_90}\n---\n" + bare
    # Not for the always-loaded index.
    memory = open_doc(client, ws / "MEMORY.md")
    assert await actions(client, memory, [], at=top(), only=["source"]) == {}
