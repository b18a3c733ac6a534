"""The memory checks in the editor, on the real language server over stdio: diagnostics for
closed memory files after a sync (gone when fixed), an edit's diagnostics, the citation
diagnostics of an open document kept beside them, and the code actions' edits applied."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsp_harness import (
    Start,
    eventually,
    open_doc,
    raw_request,
    replace_all,
    start,  # noqa: F401  (a fixture)
    uri,
    write,
)
from lsprotocol import types

FACT = "The ledger service stores every invoice in PostgreSQL 16 on the primary cluster."
MEMORY = f"# Memory\n\n- {FACT}\n- Prefer pnpm over npm in this repository for every package.\n"
NOTE = f"# Standup\n\nWe talked about the roadmap for the quarter ahead today.\n- {FACT}\n"


def workspace(root: Path) -> Path:
    write(root, "MEMORY.md", MEMORY)
    write(root, "memory/2026-01-05.md", NOTE)
    return root


def ours(client: Any, u: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(u, []) if d.code == "duplicate"]


def apply(text: str, edit: types.TextEdit) -> str:
    lines = text.split("\n")

    def offset(p: types.Position) -> int:
        return sum(len(line) + 1 for line in lines[: p.line]) + p.character

    a, b = offset(edit.range.start), offset(edit.range.end)
    return text[:a] + edit.new_text + text[b:]


def edits(conv: Any, action: dict[str, Any], u: str) -> list[types.TextEdit]:
    return [conv.structure(e, types.TextEdit) for e in action["edit"]["changes"][u]]


async def sync(client: Any) -> None:
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="memory.sync", arguments=[])
    )


async def test_a_closed_duplicate_gets_a_diagnostic_gone_when_fixed(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path / "ws")
    client = await start(ws, init_options={"provider": "none"})
    note = uri(ws / "memory/2026-01-05.md")

    async def flagged() -> bool:
        return len(ours(client, note)) == 1

    await eventually(flagged)
    (d,) = ours(client, note)
    assert d.source == "memory-ls" and d.severity == types.DiagnosticSeverity.Warning
    assert (d.range.start.line, d.range.end.line) == (3, 3)
    assert d.range.end.character == len(f"- {FACT}")
    assert "MEMORY.md#L3" in d.message
    (rel,) = d.related_information or []
    assert rel.location.uri == uri(ws / "MEMORY.md") and rel.location.range.start.line == 2
    assert uri(ws / "MEMORY.md") not in client.diagnostics or not ours(
        client, uri(ws / "MEMORY.md")
    )

    # Fixed on disk (the file is not open): after a sync its diagnostics go.
    write(
        ws, "memory/2026-01-05.md", NOTE.replace(f"- {FACT}\n", "- Something else entirely new.\n")
    )
    await sync(client)

    async def cleared() -> bool:
        return note in client.diagnostics and not ours(client, note)

    await eventually(cleared)


async def test_edits_update_the_diagnostics_and_citations_keep_theirs(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path / "ws")
    write(ws, "memory/2026-01-05.md", NOTE.replace("# Standup", "# Standup\nSee MEMORY.md#L99."))
    client = await start(ws, init_options={"provider": "none"})
    path = ws / "memory/2026-01-05.md"
    text = path.read_text()
    note = open_doc(client, path)

    def codes() -> list[str]:
        return sorted(str(d.code or d.source) for d in client.diagnostics.get(note, []))

    async def both() -> bool:
        return len(ours(client, note)) == 1 and len(client.diagnostics.get(note, [])) == 2

    await eventually(both)
    # The edit removes the copy: the duplicate goes, the broken citation stays.
    fixed = text.replace(f"- {FACT}\n", "")
    replace_all(client, note, text, fixed, version=2)

    async def only_citation() -> bool:
        diags = client.diagnostics.get(note, [])
        return not ours(client, note) and len(diags) == 1 and "MEMORY.md#L99" in diags[0].message

    await eventually(only_citation)
    # Another edit brings a copy back: both again.
    again = fixed + f"\n{FACT}\n"
    replace_all(client, note, fixed, again, version=3)
    await eventually(both)
    assert any("past the end" in d.message for d in client.diagnostics[note]), codes()


async def test_code_actions_edit_the_copy_and_open_the_original(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path / "ws")
    client = await start(ws, init_options={"provider": "none"})
    path = ws / "memory/2026-01-05.md"
    text = path.read_text()
    note = open_doc(client, path)

    async def flagged() -> bool:
        return len(ours(client, note)) == 1

    await eventually(flagged)
    (d,) = ours(client, note)
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=note),
        range=d.range,
        context=types.CodeActionContext(diagnostics=[d]),
    )
    # Raw JSON: the client's types read a code action holding only a command as a Command.
    conv = client.protocol._converter
    actions = await raw_request(client, "textDocument/codeAction", conv.unstructure(params))
    by = {a["title"].split(" (")[0].split(":")[0]: a for a in actions}
    assert set(by) == {
        "Open the earlier copy",
        "Remove this copy",
        "Replace this copy with a citation",
    }
    assert all(a["kind"] == "quickfix" for a in actions)

    (edit,) = edits(conv, by["Remove this copy"], note)
    assert apply(text, edit) == text.replace(f"- {FACT}\n", "")

    (edit,) = edits(conv, by["Replace this copy with a citation"], note)
    assert apply(text, edit) == text.replace(f"- {FACT}", "- See MEMORY.md#L3.")

    cmd = by["Open the earlier copy"]["command"]
    assert cmd["command"] == "memory.open"
    ok = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=cmd["command"], arguments=cmd["arguments"])
    )
    assert ok is True
    (params,) = client.shown_documents  # pytest-lsp's client answers success
    assert params.uri == uri(ws / "MEMORY.md") and params.selection is not None
    assert params.selection.start.line == 2

    # Not ours: no actions.
    other = types.Diagnostic(range=d.range, message="x", source="other")
    assert not await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=note),
            range=d.range,
            context=types.CodeActionContext(diagnostics=[other]),
        )
    )


async def test_past_editor_max_files_the_editor_shows_no_findings(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A folder over hygiene.editorMaxFiles gets none (the check would hold the server's
    interpreter for tens of seconds at 10,000 notes); under it, the same folder gets them."""
    ws = workspace(tmp_path / "ws")
    config = {"memory": {"provider": "none", "hygiene": {"editorMaxFiles": 1}}}
    client = await start(ws, config=config)
    note = uri(ws / "memory/2026-01-05.md")
    await sync(client)
    await asyncio.sleep(2)  # the check's debounce is 250 ms: it has run (and found it) by now
    assert not ours(client, note)
    client.set_configuration({"memory": {"provider": "none", "hygiene": {"editorMaxFiles": 2}}})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    await sync(client)

    async def flagged() -> bool:
        return len(ours(client, note)) == 1

    await eventually(flagged)
