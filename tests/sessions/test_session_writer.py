"""The session-memory writer, with a local HTTP server standing in for the chat endpoint."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import write
from fake_secrets import SECRETS

from memory_ls.cli import main
from memory_ls.sessions.writer import clean_slug, keyword_slug, recent_messages, save_session
from memory_ls.settings import Settings
from memory_ls.workspace import Workspace

WHEN = datetime(2026, 1, 16, 14, 30, 5, tzinfo=UTC)
API_KEY = "sk-test-" + "slugkey" * 4


def msg(role: str, content) -> dict:
    return {"type": "message", "message": {"role": role, "content": content}}


def jsonl(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@dataclass
class ChatStub:
    """Answers POST .../chat/completions with ``answer``, or fails as told."""

    answer: str = "vendor-pitch"
    status: int = 200
    delay: float = 0.0
    raw_body: bytes | None = None
    requests: list[dict] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def chat() -> Iterator[ChatStub]:
    stub = ChatStub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            stub.requests.append(
                {"path": self.path, "headers": dict(self.headers), "json": json.loads(body)}
            )
            time.sleep(stub.delay)
            if stub.raw_body is not None:
                out = stub.raw_body
            else:
                out = json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": stub.answer}}]}
                ).encode()
            self.send_response(stub.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args) -> None:  # keep test output quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()


def llm_settings(stub: ChatStub, timeout_ms: int = 5000) -> Settings:
    s = Settings(provider="none")
    s.session_writer.base_url = stub.url
    s.session_writer.model = "slugger-1"
    s.session_writer.api_key = API_KEY
    s.session_writer.timeout_ms = timeout_ms
    return s


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    records = [{"type": "session", "id": "abc123def456", "sessionKey": "agent:main:main"}]
    for i in range(10):
        records.append(msg("user", f"Question {i} about the vendor pitch deck and pricing tiers?"))
        records.append(
            msg("assistant", [{"type": "text", "text": f"Answer {i}: the vendor pricing is fine."}])
        )
    records.append(msg("user", "/new"))
    return write(tmp_path, "agent/sessions/abc123def456.jsonl", jsonl(*records))


def test_llm_slug_and_seed_format(ws: Path, transcript: Path, chat: ChatStub):
    path = save_session(
        ws, transcript, messages=4, source="telegram", settings=llm_settings(chat), now=WHEN
    )
    assert path == ws / "memory" / "2026-01-16-vendor-pitch.md"
    assert path.read_text(encoding="utf-8") == (
        "# Session: 2026-01-16 14:30:05 UTC\n"
        "\n"
        "- **Session Key**: agent:main:main\n"
        "- **Session ID**: abc123def456\n"
        "- **Source**: telegram\n"
        "\n"
        "## Conversation Summary\n"
        "\n"
        "User: Question 8 about the vendor pitch deck and pricing tiers?\n"
        "Assistant: Answer 8: the vendor pricing is fine.\n"
        "User: Question 9 about the vendor pitch deck and pricing tiers?\n"
        "Assistant: Answer 9: the vendor pricing is fine.\n"
    )
    (req,) = chat.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert req["json"]["model"] == "slugger-1"
    assert "Question 9" in req["json"]["messages"][-1]["content"]
    # A dated note: it decays, and the workspace sees it as memory.
    assert Workspace(ws, Settings()).classify("memory/2026-01-16-vendor-pitch.md")


def test_never_overwrites(ws: Path, transcript: Path, chat: ChatStub):
    s = llm_settings(chat)
    paths = [save_session(ws, transcript, settings=s, now=WHEN) for _ in range(3)]
    assert [p.name for p in paths] == [
        "2026-01-16-vendor-pitch.md",
        "2026-01-16-vendor-pitch-2.md",
        "2026-01-16-vendor-pitch-3.md",
    ]
    assert paths[0].read_text(encoding="utf-8") == paths[2].read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("stub_setup", "timeout_ms"),
    [
        ({"status": 500}, 5000),
        ({"status": 401}, 5000),
        ({"raw_body": b"<html>bad gateway</html>"}, 5000),
        ({"raw_body": b'{"choices": []}'}, 5000),
        ({"answer": "Sure! Here is a descriptive slug for this long conversation"}, 5000),
        ({"delay": 1.0}, 200),
    ],
    ids=["500", "401", "html", "no-choices", "not-a-slug", "timeout"],
)
def test_endpoint_failure_falls_back_to_keywords(
    ws: Path,
    transcript: Path,
    chat: ChatStub,
    caplog: pytest.LogCaptureFixture,
    stub_setup: dict,
    timeout_ms: int,
):
    for k, v in stub_setup.items():
        setattr(chat, k, v)
    with caplog.at_level(logging.DEBUG):
        path = save_session(ws, transcript, settings=llm_settings(chat, timeout_ms), now=WHEN)
    assert path.name == "2026-01-16-vendor-pricing-answer.md"
    assert "using keywords" in caplog.text
    assert API_KEY not in caplog.text and "Question 9" not in caplog.text


def test_without_an_endpoint_the_slug_is_keywords(ws: Path, transcript: Path):
    path = save_session(ws, transcript, settings=Settings(provider="none"), now=WHEN)
    # "answer" is in 8 of the last 15 messages, "question" in 7; ties go to the first seen.
    assert path.name == "2026-01-16-vendor-pricing-answer.md"


def test_nothing_to_name_it_by_uses_the_time(ws: Path, tmp_path: Path):
    empty = write(tmp_path, "empty.jsonl", jsonl({"type": "session", "id": "e1"}))
    path = save_session(ws, empty, source="cli", now=WHEN)
    assert path.name == "2026-01-16-1430.md"
    text = path.read_text(encoding="utf-8")
    assert "- **Session ID**: e1" in text and "- **Session Key**: unknown" in text
    assert "## Conversation Summary" not in text


def test_secrets_are_redacted_in_the_note_and_the_prompt(ws: Path, tmp_path: Path, chat: ChatStub):
    records = [msg("user", ctx.format(secret)) for ctx, secret in SECRETS]
    t = write(tmp_path, "s.jsonl", jsonl(*records))
    path = save_session(ws, t, messages=len(SECRETS), settings=llm_settings(chat), now=WHEN)
    note = path.read_text(encoding="utf-8")
    prompt = chat.requests[0]["json"]["messages"][-1]["content"]
    for _, secret in SECRETS:
        assert secret not in note and secret not in prompt
    assert note.count("[REDACTED:") >= len(SECRETS)


def test_recent_messages_skips_commands_and_tools(transcript: Path):
    picked = recent_messages(transcript.read_text(encoding="utf-8"), 3)
    assert [m.role for m in picked] == ["assistant", "user", "assistant"]
    assert all(not m.text.startswith("/") and not m.tools for m in picked)


@pytest.mark.parametrize(
    ("raw", "slug"),
    [
        ("vendor-pitch", "vendor-pitch"),
        ("  `API Design`\n", "api-design"),
        ('"bug_fix".', "bug-fix"),
        ("Slug: rate-limit-redis", "rate-limit-redis"),
        ("2026-01-16-deploy-notes.md", "deploy-notes"),
        ("<think>hmm, about deploys</think>\ndeploy-rollback", "deploy-rollback"),
        ("Café Ölfarben", "caf-lfarben"),
        ("", None),
        ("-", None),
        ("this answer is far too many words to be a slug", None),
        ("x" * 60, None),
        ("令牌桶", None),
    ],
)
def test_clean_slug(raw: str, slug: str | None):
    assert clean_slug(raw) == slug


def test_keyword_slug_ignores_markers_and_filler():
    from memory_ls.sources.sessions import Message

    msgs = [
        Message(1, "user", "Thanks! Please check the [REDACTED:openai-key] for kubernetes"),
        Message(2, "assistant", "Sure, kubernetes ingress is configured at https://www.x.com"),
    ]
    assert keyword_slug(msgs) == "kubernetes-check-ingress"


def test_cli_saves_and_indexes(ws: Path, transcript: Path, tmp_path: Path, capsys):
    write(ws, ".memory-ls.toml", 'provider = "none"\n')
    index = tmp_path / "cli-index.sqlite"
    argv = ["session", "save", str(transcript), "-w", str(ws), "--index", str(index)]
    assert main([*argv, "--messages", "2", "--source", "cli"]) == 0
    rel = capsys.readouterr().out.strip()
    assert rel.startswith("memory/") and rel.endswith("-vendor-pricing-question.md")
    assert "- **Source**: cli" in (ws / rel).read_text(encoding="utf-8")
    assert main(["search", "vendor pricing tiers", "-w", str(ws), "--index", str(index)]) == 0
    assert rel in capsys.readouterr().out
    assert main([*argv, "--messages", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["path"].endswith("-2.md") and out["uri"].startswith("file://")
    assert main(["session", "save", str(tmp_path / "missing.jsonl"), "-w", str(ws)]) == 2


@pytest.mark.parametrize("given", ["0", "-3", "1001"])
def test_cli_messages_out_of_range_is_refused(
    ws: Path, transcript: Path, tmp_path: Path, capsys, given
):
    """`--messages` is checked as memory.saveSession checks `messages` (1-1000): 0 and -3 were
    taken as given and wrote a note with no conversation in it, exit 0."""
    write(ws, ".memory-ls.toml", 'provider = "none"\n')
    before = sorted(ws.rglob("*.md"))
    argv = ["session", "save", str(transcript), "-w", str(ws), "--index", str(tmp_path / "i")]
    assert main([*argv, "--messages", given]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memory-ls: --messages: must be at ") and given in err
    assert sorted(ws.rglob("*.md")) == before


def test_cli_transcript_without_messages_saves_nothing(ws: Path, tmp_path: Path, capsys):
    """A transcript with no message to save writes no note, as for a hook (it wrote a note of
    its title and bullets alone, named by the time of day)."""
    write(ws, ".memory-ls.toml", 'provider = "none"\n')
    before = sorted(ws.rglob("*.md"))
    t = write(tmp_path, "empty.jsonl", jsonl({"type": "summary", "summary": "x"}))
    argv = ["session", "save", str(t), "-w", str(ws), "--index", str(tmp_path / "i")]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert out.out == "" and "nothing saved" in out.err
    assert sorted(ws.rglob("*.md")) == before


def test_a_deeply_nested_line_near_the_top_is_skipped(ws: Path, tmp_path: Path, capsys):
    """The header is looked for in the first lines; one nested deeper than json.loads goes
    raised RecursionError there, a traceback instead of a note (the messages skip it)."""
    write(ws, ".memory-ls.toml", 'provider = "none"\n')
    deep = "[" * 100_000 + "]" * 100_000
    t = write(tmp_path, "deep.jsonl", jsonl({"type": "session", "id": "d1"}) + deep + "\n")
    with t.open("a", encoding="utf-8") as fh:
        fh.write(jsonl(msg("user", "the kudu migration plan")))
    argv = ["session", "save", str(t), "-w", str(ws), "--index", str(tmp_path / "i.sqlite")]
    assert main(argv) == 0
    note = ws / capsys.readouterr().out.strip()
    text = note.read_text(encoding="utf-8")
    assert "- **Session ID**: d1" in text and "User: the kudu migration plan" in text


def test_the_bullets_stay_one_line_each(ws: Path, tmp_path: Path):
    """The header record's id and key went into the note as they were: line breaks in them
    wrote headings and lines of the transcript's choosing into the memory note."""
    header = {
        "type": "session",
        "id": "s1\n\n## Decisions\n\n- we dropped the prod database",
        "key": "k\r\n# Injected\u2028x" + "y" * 500,
    }
    t = write(tmp_path, "inj.jsonl", jsonl(header, msg("user", "the caracal backlog")))
    path = save_session(ws, t, source="cli\nsecond line", now=WHEN)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[2] == "- **Session Key**: k # Injected x" + "y" * 185 + "…"
    assert lines[3:6] == [
        "- **Session ID**: s1 ## Decisions - we dropped the prod database",
        "- **Source**: cli second line",
        "",
    ]
    assert [ln for ln in lines if ln.startswith("#")] == [lines[0], "## Conversation Summary"]


def test_a_note_never_shows_half_written(tmp_path: Path) -> None:
    """Another process (a watching editor, a search) looking while a note is written sees no
    note or the whole note, never part of it: one killed mid-write left a part for good."""
    folder = tmp_path / "memory"
    text = (
        "# Session\n\n" + "- a line of the conversation, long enough to take a while\n" * 1_000_000
    )
    size = len(text.encode("utf-8"))
    code = (
        "import sys; from pathlib import Path; from memory_ls.sessions.writer import write_new; "
        "write_new(Path(sys.argv[1]), 'big', sys.stdin.read())"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(text.encode("utf-8"))
    proc.stdin.close()
    seen = set()
    while proc.poll() is None:
        with contextlib.suppress(FileNotFoundError):
            seen.add((folder / "big.md").stat().st_size)
    assert proc.returncode == 0
    assert seen <= {size}
    assert (folder / "big.md").read_text(encoding="utf-8") == text
    assert [p.name for p in folder.iterdir()] == ["big.md"]  # no temporary file left
