"""``memory-ls check`` as a user (or a pre-commit hook) runs it: its own process, a real
index, the text and the JSON it prints and how it exits."""

from __future__ import annotations

import json
from pathlib import Path

from cli_util import run_cli
from conftest import write


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(
        root,
        "MEMORY.md",
        "# Memory\n"
        "\n"
        "- The billing service is deployed with Helm charts from the infra repo.\n"
        "- See [deploy](memory/deploy.md).\n",
    )
    write(
        root, "memory/deploy.md", "# Deploy\n\nRollouts go through the release checklist first.\n"
    )
    write(
        root, "memory/runbook.md", "# Runbook\n\nRestart the worker pool when the queue backs up.\n"
    )
    write(
        root,
        "memory/2026-03-02.md",
        "# Notes\n\n- The billing service is deployed with Helm charts from the infra repo.\n",
    )
    return root  # fmt: skip


def test_check_prints_findings_and_exits_by_severity(tmp_path: Path):
    root = workspace(tmp_path)
    index = str(tmp_path / "index.sqlite")
    home = tmp_path / "home"
    done = run_cli("check", "-w", str(root), "--index", index, home=home)
    assert done.returncode == 1, done.stderr  # a duplicate is a warning
    lines = done.stdout.splitlines()
    assert "memory/2026-03-02.md:3-3  duplicate  says what MEMORY.md#L3 already says" in lines
    assert "    see MEMORY.md#L3" in lines
    assert any(line.startswith("memory/runbook.md:1-1  orphan  ") for line in lines)
    assert "2 findings: 1 duplicate, 1 orphan" in done.stderr

    done = run_cli("check", "-w", str(root), "--index", index, "--json", home=home)
    assert done.returncode == 1
    findings = json.loads(done.stdout)["findings"]
    dup = next(f for f in findings if f["code"] == "duplicate")
    assert dup == {
        "code": "duplicate",
        "severity": "warning",
        "path": "memory/2026-03-02.md",
        "startLine": 3,
        "endLine": 3,
        "message": "says what MEMORY.md#L3 already says",
        "related": [{"path": "MEMORY.md", "startLine": 3, "endLine": 3}],
    }
    # The orphan is information only: failing on errors only, the check passes.
    done = run_cli("check", "-w", str(root), "--index", index, "--fail-on", "error", home=home)
    assert done.returncode == 0, done.stderr
    # Turned off in the workspace's settings, a check reports nothing.
    write(root, ".memory-ls.toml", "[hygiene.duplicate]\nenabled = false\n")
    done = run_cli("check", "-w", str(root), "--index", index, home=home)
    assert done.returncode == 0 and "duplicate" not in done.stdout


def test_check_of_a_folder_that_is_not_there(tmp_path: Path):
    done = run_cli("check", "-w", str(tmp_path / "nope"), home=tmp_path / "home")
    assert done.returncode == 2 and "not a folder" in done.stderr


def test_a_cap_of_the_users_own_is_checked_beside_the_documented_ones(tmp_path: Path):
    root = tmp_path / "ws"
    write(root, "MEMORY.md", "".join(f"- Fact number {i} about the build.\n" for i in range(30)))
    write(
        root,
        ".memory-ls.toml",
        "[[hygiene.loadCap.caps]]\n"
        'agent = "our bot"\nfiles = ["MEMORY.md"]\nmaxLines = 20\n'
        'source = "https://example.invalid/our-bot"\n'
        "[[hygiene.loadCap.caps]]\n"
        'agent = "no cap given"\nfiles = ["MEMORY.md"]\n',
    )
    index = str(tmp_path / "index.sqlite")
    done = run_cli("check", "-w", str(root), "--index", index, "--json", home=tmp_path / "home")
    caps = [f for f in json.loads(done.stdout)["findings"] if f["code"] == "load-cap"]
    assert [(f["startLine"], f["message"]) for f in caps] == [
        (
            21,
            "our bot loads only the first 20 lines of MEMORY.md: this line and the ones below "
            "it are never in its context (https://example.invalid/our-bot)",
        )
    ]
