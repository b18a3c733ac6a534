""":MemoryHealth (issue 37): the memory checks' findings in Neovim's quickfix list, by kind.

``editors/neovim/tests/findings.lua`` starts the real server through the plugin on a copy of
``examples/demo`` with two notes that repeat older lines (``duplicate``) and one past its
``expires:`` date (``expired``), opens only ``MEMORY.md`` (with an unsaved broken citation, a
memory-ls diagnostic that is not a finding) and runs ``:MemoryHealth``. Nvim and the server are
found as in ``test_neovim.py``: missing, the test fails, not skips.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from test_neovim import DEMO, PLUGIN, passed, play

SCRIPT = PLUGIN / "tests" / "findings.lua"

NOTES = {
    # Line 5 repeats memory/2026-02-20-deploys.md line 5.
    "memory/2026-03-02-deploy-notes.md": "# Deploy notes\n\nSome context first.\n\n"
    "Database migrations run in a release command before the new machines start.\n",
    # Line 3 repeats MEMORY.md line 7.
    "memory/2026-03-01-keys.md": '# Keys\n\nAPI keys are kept in 1Password, vault "Platform"; '
    "never paste them in notes.\n",
    # Past its date: expired, on the front matter (lines 1-3).
    "memory/2026-01-20-freeze.md": "---\nexpires: 2026-01-31\n---\n# Release freeze\n\n"
    "No deploys to production until the audit is signed off.\n",
}


def test_memory_health_lists_the_findings_of_unopened_files_by_kind(tmp_path: Path) -> None:
    ws = tmp_path / "demo"
    shutil.copytree(DEMO, ws)
    for rel, text in NOTES.items():
        (ws / rel).write_text(text, encoding="utf-8")
    data = play(
        SCRIPT,
        ws,
        tmp_path,
        MEMORY_LS_TEST_UNOPENED="memory/2026-03-02-deploy-notes.md",
        MEMORY_LS_TEST_FINDINGS="3",
    )
    for name in (
        "no server: :MemoryHealth says so",
        "attach",
        # Neovim keeps the diagnostics of a file it never opened, under an unloaded buffer.
        "findings of unopened files are kept",
        "a broken citation in the open buffer",
        ":MemoryHealth",
        "the first entry opens its file at its line",
    ):
        passed(data, name)
    qf = data["qf"]
    assert qf["title"] == "Memory: Health (2 duplicate, 1 expired)"
    assert qf["open"]
    # By kind (the checks' order: duplicate before expired, though its file sorts first), then
    # file and line; the broken citation of MEMORY.md is not among them.
    got = [(i["code"], i["file"], i["lnum"], i["type"]) for i in qf["items"]]
    assert got == [
        ("duplicate", "memory/2026-03-01-keys.md", 3, "W"),
        ("duplicate", "memory/2026-03-02-deploy-notes.md", 5, "W"),
        ("expired", "memory/2026-01-20-freeze.md", 1, "W"),
    ], got
    assert qf["items"][1]["text"] == (
        "duplicate: says what memory/2026-02-20-deploys.md#L5 already says"
    )
    assert data["first"] == {"file": "memory/2026-03-01-keys.md", "line": 3}
    bad = [f"{c['name']}: {c['detail']}" for c in data["checks"] if not c["ok"]]
    assert not bad, "\n".join(bad)
