"""`memory-ls session save` as the agents' hooks run it: the real CLI in a subprocess, fed a
transcript on stdin, a Claude Code SessionEnd payload on stdin, a Codex notify payload in argv,
and broken payloads. Every payload and transcript here is written for the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write
from fake_secrets import SECRETS

import memory_ls

REPO = Path(memory_ls.__file__).parent.parent
SESSION_ID = "5f0c2a9e-7d41-4b8a-9c3e-2b6f1d8e4a70"
THREAD_ID = "0197c3aa-41d2-7e10-b5c8-6a2f9e3d1b44"


def cli(
    *args: str, stdin: str = "", cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "memory_ls", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def jsonl(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.fixture
def workspace(ws: Path) -> Path:
    write(ws, ".memory-ls.toml", 'provider = "none"\n')
    return ws


def notes(ws: Path) -> dict[str, str]:
    return {
        p.relative_to(ws).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted((ws / "memory").rglob("*.md"))
    }


def found_by_search(ws: Path, index: Path, query: str, rel: str) -> bool:
    out = cli("search", query, "-w", str(ws), "--index", str(index), "--json")
    assert out.returncode == 0, out.stderr
    return any(hit["path"] == rel for hit in json.loads(out.stdout)["results"])


def claude_code_transcript() -> str:
    """A Claude Code session file: summary, user and assistant records with thinking, a tool
    call and its result, sidechain metadata."""
    base = {"sessionId": SESSION_ID, "cwd": "/home/dev/shop", "version": "2.0.31"}
    return jsonl(
        {"type": "summary", "summary": "Checkout latency", "leafUuid": "u-0"},
        {
            **base,
            "type": "user",
            "uuid": "u-1",
            "message": {"role": "user", "content": "Why is checkout slow on the staging cluster?"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a-1",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "inspect the payment gateway timeouts"},
                    {"type": "text", "text": "Let me read the gateway client settings."},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "gw.py"}},
                ],
            },
        },
        {
            **base,
            "type": "user",
            "uuid": "u-2",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "TIMEOUT = 30"}
                ],
            },
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a-2",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "The payment gateway retries three times with a 30 second "
                        "timeout; lowering it to 5 seconds fixes checkout latency.",
                    }
                ],
            },
        },
        {
            **base,
            "type": "user",
            "uuid": "u-3",
            "message": {"role": "user", "content": "Great, use 5 seconds for the gateway."},
        },
    )


def test_transcript_on_stdin(workspace: Path, tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite"
    transcript = jsonl(
        {"type": "session", "id": "tg-8812", "sessionKey": "agent:main:telegram"},
        {"type": "message", "message": {"role": "user", "content": "Book the ferry to Hydra."}},
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Ferry to Hydra booked for Friday 9:00."}],
            },
        },
    )
    out = cli(
        "session", "save", "-", "-w", str(workspace), "--index", str(index), "--source", "tg",
        stdin=transcript,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rel = out.stdout.strip()
    text = (workspace / rel).read_text(encoding="utf-8")
    assert "- **Session Key**: agent:main:telegram\n- **Session ID**: tg-8812\n" in text
    assert "- **Source**: tg\n" in text
    assert text.endswith(
        "User: Book the ferry to Hydra.\nAssistant: Ferry to Hydra booked for Friday 9:00.\n"
    )
    assert found_by_search(workspace, index, "ferry Hydra", rel)


def test_claude_code_session_end(workspace: Path, tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite"
    transcript = write(
        tmp_path, f"claude/projects/-home-dev-shop/{SESSION_ID}.jsonl", claude_code_transcript()
    )
    payload = {
        "session_id": SESSION_ID,
        "transcript_path": str(transcript),
        "cwd": str(workspace),
        "permission_mode": "default",
        "hook_event_name": "SessionEnd",
        "reason": "prompt_input_exit",
    }
    # No -w: the note goes to the payload's cwd, whatever folder the hook runs in.
    out = cli(
        "session", "save", "--hook", "--index", str(index), stdin=json.dumps(payload), cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    rel = out.stdout.strip()
    assert rel.startswith("memory/") and rel.endswith(".md")
    text = (workspace / rel).read_text(encoding="utf-8")
    assert f"- **Session Key**: {SESSION_ID}\n- **Session ID**: {SESSION_ID}\n" in text
    assert "- **Source**: claude-code\n" in text
    body = text.split("## Conversation Summary\n\n", 1)[1]
    assert body == (
        "User: Why is checkout slow on the staging cluster?\n"
        "Assistant: Let me read the gateway client settings.\n"
        "Assistant: The payment gateway retries three times with a 30 second timeout; "
        "lowering it to 5 seconds fixes checkout latency.\n"
        "User: Great, use 5 seconds for the gateway.\n"
    )
    assert "TIMEOUT = 30" not in text and "inspect the payment" not in text
    assert found_by_search(workspace, index, "payment gateway timeout checkout", rel)


def test_stdin_left_open_does_not_hold_the_hook(workspace: Path, tmp_path: Path) -> None:
    """An agent may keep its end of the pipe open: a complete payload is enough."""
    transcript = write(tmp_path, "t.jsonl", claude_code_transcript())
    payload = {
        "session_id": SESSION_ID,
        "transcript_path": str(transcript),
        "cwd": str(workspace),
        "hook_event_name": "SessionEnd",
        "reason": "other",
    }
    before = notes(workspace)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "memory_ls", "session", "save", "--hook"]
    argv += ["--index", str(tmp_path / "i.sqlite")]
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as proc:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(payload).encode())
        proc.stdin.flush()
        try:
            rc = proc.wait(timeout=60)
        finally:
            proc.stdin.close()
        assert rc == 0, proc.stderr.read() if proc.stderr else ""
    # stdin was never closed, and a payload not seen whole within the wait is an error: the
    # hook went on as soon as the JSON object was complete.
    assert len(notes(workspace)) == len(before) + 1


def codex_payload(turn: str, inputs: list[str], answer: str | None, cwd: Path) -> str:
    return json.dumps(
        {
            "type": "agent-turn-complete",
            "thread-id": THREAD_ID,
            "turn-id": turn,
            "cwd": str(cwd),
            "client": "codex-tui",
            "input-messages": inputs,
            "last-assistant-message": answer,
        }
    )


def test_codex_notify_writes_one_new_note_per_turn(workspace: Path, tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite"
    secret = SECRETS[0][1]
    first = codex_payload(
        "1",
        [f"Rotate the webhook signing key, the old one was {secret}"],
        "Rotated the webhook signing key and updated the Stripe dashboard.",
        workspace,
    )
    out = cli("session", "save", "--hook", "--index", str(index), first, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rel1 = out.stdout.strip()
    text1 = (workspace / rel1).read_text(encoding="utf-8")
    assert f"- **Session Key**: {THREAD_ID}\n" in text1 and "- **Source**: codex\n" in text1
    assert "User: Rotate the webhook signing key, the old one was [REDACTED:" in text1
    assert secret not in text1
    assert text1.endswith(
        "Assistant: Rotated the webhook signing key and updated the Stripe dashboard.\n"
    )
    assert found_by_search(workspace, index, "webhook signing key", rel1)

    second = codex_payload(
        "2",
        ["Now document the webhook key rotation in the runbook."],
        "Added a webhook key rotation section to the runbook.",
        workspace,
    )
    out = cli("session", "save", "--hook", "--index", str(index), second, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rel2 = out.stdout.strip()
    assert rel2 != rel1
    assert (workspace / rel1).read_text(encoding="utf-8") == text1  # never modified
    assert "runbook" in (workspace / rel2).read_text(encoding="utf-8")
    assert found_by_search(workspace, index, "runbook rotation section", rel2)


def test_hook_without_messages_saves_nothing(workspace: Path, tmp_path: Path) -> None:
    before = notes(workspace)
    empty = write(tmp_path, "empty.jsonl", jsonl({"type": "summary", "summary": "x"}))
    payload = {
        "session_id": SESSION_ID,
        "transcript_path": str(empty),
        "cwd": str(workspace),
        "hook_event_name": "SessionEnd",
        "reason": "clear",
    }
    out = cli("session", "save", "--hook", stdin=json.dumps(payload))
    assert out.returncode == 0 and out.stdout == ""
    assert "nothing saved" in out.stderr
    out = cli("session", "save", "--hook", codex_payload("3", [], None, workspace))
    assert out.returncode == 0 and out.stdout == ""
    assert notes(workspace) == before


def claude(ws: Path, **fields: object) -> str:
    payload: dict[str, object] = {
        "session_id": SESSION_ID,
        "transcript_path": str(ws / "missing.jsonl"),
        "cwd": str(ws),
        "hook_event_name": "SessionEnd",
        "reason": "other",
    }
    payload.update(fields)
    return json.dumps({k: v for k, v in payload.items() if v is not None})


BAD_STDIN = {
    "not json": (lambda ws: "SessionEnd please", "not JSON"),
    "not an object": (lambda ws: "[1, 2]", "not a JSON object"),
    "unknown shape": (lambda ws: '{"session": 1}', "nor a Codex"),
    "no transcript_path": (lambda ws: claude(ws, transcript_path=None), "'transcript_path'"),
    "transcript missing": (lambda ws: claude(ws), "cannot read the transcript"),
    "transcript a folder": (
        lambda ws: claude(ws, transcript_path=str(ws / "memory")),
        "cannot read the transcript",
    ),
    "id with newline": (lambda ws: claude(ws, session_id="a\n- **Source**: x"), "one-line id"),
    "huge": (lambda ws: '{"pad": "' + "x" * (2 * 1024 * 1024) + '"}', "larger than"),
    "nothing": (lambda ws: "", "not JSON"),
}
BAD_ARGV = {
    "codex no thread": ({"type": "agent-turn-complete", "input-messages": []}, "'thread-id'"),
    "codex inputs not a list": (
        {"type": "agent-turn-complete", "thread-id": "t", "input-messages": "hi"},
        "'input-messages'",
    ),
    "codex answer not text": (
        {
            "type": "agent-turn-complete",
            "thread-id": "t",
            "input-messages": ["hi"],
            "last-assistant-message": 3,
        },
        "'last-assistant-message'",
    ),
    "codex other type": ({"type": "approval-requested", "thread-id": "t"}, "unsupported"),
}


def assert_one_line_error(out: subprocess.CompletedProcess[str], words: str) -> None:
    assert out.returncode != 0
    assert out.stdout == ""
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memory-ls: "), out.stderr
    assert words in lines[0]


@pytest.mark.parametrize("case", list(BAD_STDIN))
def test_malformed_stdin_payloads(workspace: Path, case: str) -> None:
    before = notes(workspace)
    make, words = BAD_STDIN[case]
    out = cli("session", "save", "--hook", stdin=make(workspace), cwd=workspace)
    assert_one_line_error(out, words)
    assert notes(workspace) == before


@pytest.mark.parametrize("case", list(BAD_ARGV))
def test_malformed_codex_payloads(workspace: Path, case: str) -> None:
    before = notes(workspace)
    payload, words = BAD_ARGV[case]
    out = cli("session", "save", "--hook", json.dumps({**payload, "cwd": str(workspace)}))
    assert_one_line_error(out, words)
    assert notes(workspace) == before


def test_no_transcript_and_no_hook(workspace: Path) -> None:
    out = cli("session", "save", "-w", str(workspace))
    assert_one_line_error(out, "--hook")


def test_hook_payload_that_never_arrives_times_out() -> None:
    """stdin open and silent: the hook gives up after a few seconds instead of hanging."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "memory_ls", "session", "save", "--hook"]
    started = time.monotonic()
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as proc:
        rc = proc.wait(timeout=60)  # stdin stays open all along
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
    assert rc != 0
    assert "no hook payload on stdin within 5 s" in err and "Traceback" not in err
    assert time.monotonic() - started < 30


def test_a_hook_started_with_stdin_closed(workspace: Path, tmp_path: Path) -> None:
    """A program started with file descriptor 0 closed (a daemon, a notifier that closes what
    it does not pass on) has no sys.stdin: reading sys.stdin.buffer for the arguments raised
    AttributeError, a traceback and no note, even for a payload given as an argument."""
    index = tmp_path / "index.sqlite"
    payload = codex_payload("1", ["Pin the okapi dependency to 2.3"], "Pinned it.", workspace)
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def closed_stdin(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "memory_ls", "session", "save", *args]
        return subprocess.run(
            ["sh", "-c", 'exec "$@" <&-', "sh", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    out = closed_stdin("--hook", "--index", str(index), payload)
    assert out.returncode == 0, out.stderr
    assert "okapi dependency" in (workspace / out.stdout.strip()).read_text(encoding="utf-8")
    out = closed_stdin("--hook", "-w", str(workspace), "--index", str(index))
    assert (out.returncode, out.stderr.count("\n")) == (2, 1), out.stderr
    assert "stdin is closed" in out.stderr


def test_a_payload_with_a_byte_order_mark_is_read() -> None:
    """A payload written with a UTF-8 BOM (PowerShell's Out-File, say) was "not JSON"."""
    from memory_ls.sessions.hooks import InputError, from_payload

    with pytest.raises(InputError, match="nor a Codex notify payload"):
        from_payload(b"\xef\xbb\xbf" + json.dumps({"other": 1}).encode(), 15)
