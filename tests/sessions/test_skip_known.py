"""``session save --skip-known`` (CLI) and ``skipKnown`` (memory.saveSession over LSP): the
messages memory already holds are left out of the new note, with where they are written; no
note at all when it holds them all. Real parts: the CLI's main, a real index, the real server
over stdio."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import write
from lsp_harness import Start
from lsprotocol import types

from memory_ls.cli import main

KNOWN = "We deploy the billing service with Helm charts from the infra repository."
NEW = "The walrus telemetry table is sharded by device id since the October outage."


def transcript(folder: Path, *texts: str) -> Path:
    lines = [json.dumps({"role": "user", "content": t}) for t in texts]
    return write(folder, "chat.jsonl", "\n".join(lines) + "\n")


def workspace(root: Path) -> Path:
    write(root, ".memory-ls.toml", 'provider = "none"\n')
    write(root, "MEMORY.md", f"# Memory\n\n- {KNOWN}\n- Alice reviews every schema change.\n")
    return root


def notes(ws: Path) -> list[Path]:
    return sorted((ws / "memory").glob("*.md")) if (ws / "memory").is_dir() else []


def test_cli_leaves_known_messages_out(tmp_path: Path, capsys):
    ws = workspace(tmp_path / "ws")
    reworded = "we deploy the billing service with helm charts, from the infra repository"
    t = transcript(tmp_path, reworded, NEW)
    argv = ["session", "save", str(t), "-w", str(ws), "--index", str(tmp_path / "i.sqlite")]
    assert main([*argv, "--skip-known", "--json"]) == 0
    out = capsys.readouterr()
    saved = json.loads(out.out)
    assert saved["skipped"] == [
        {"line": 1, "related": [{"path": "MEMORY.md", "startLine": 3, "endLine": 3}]}
    ]
    assert "left out 1 known message" in out.err
    note = (ws / saved["path"]).read_text(encoding="utf-8")
    assert "walrus telemetry" in note and "helm" not in note.lower()
    # Without the option, the same session is written whole.
    assert main([*argv, "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert "skipped" not in whole
    assert "helm charts" in (ws / whole["path"]).read_text(encoding="utf-8")


def test_cli_writes_nothing_when_every_message_is_known(tmp_path: Path, capsys):
    ws = workspace(tmp_path / "ws")
    t = transcript(tmp_path, KNOWN)
    argv = ["session", "save", str(t), "-w", str(ws), "--index", str(tmp_path / "i.sqlite")]
    assert main([*argv, "--skip-known", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {
        "path": None,
        "uri": None,
        "skipped": [{"line": 1, "related": [{"path": "MEMORY.md", "startLine": 3, "endLine": 3}]}],
    }
    assert "nothing saved" in out.err
    assert notes(ws) == []


async def test_save_session_command_skips_known_messages(start: Start, tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    transcript(ws / "sessions", KNOWN, NEW)
    client = await start(ws)
    res = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="memory.saveSession",
            arguments=[{"transcript": "sessions/chat.jsonl", "skipKnown": True}],
        )
    )
    assert [s["related"][0]["path"] for s in res["skipped"]] == ["MEMORY.md"]
    note = (ws / res["path"]).read_text(encoding="utf-8")
    assert "walrus telemetry" in note and "Helm" not in note
