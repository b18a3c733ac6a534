"""Session transcripts: rendering, line maps, redaction end to end, growth and retention."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import fts_leaks, write
from fake_secrets import PRIVATE_KEY, SECRETS

from memory_ls.engine import MemoryEngine
from memory_ls.settings import Settings
from memory_ls.sources.sessions import (
    IDLE_FLUSH_SECONDS,
    count_messages,
    render_transcript,
    sync_action,
)


def msg(role: str, content, **extra) -> dict:
    return {"type": "message", "message": {"role": role, "content": content, **extra}}


def jsonl(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def lines_of(text: str) -> list[str]:
    return render_transcript(text).text.split("\n")


# -- rendering ------------------------------------------------------------------------------------


def test_openclaw_records_render_with_line_map():
    text = jsonl(
        {"type": "session", "id": "abc", "timestamp": "2026-01-16T14:30:00Z"},
        msg("user", "How do we rate limit?"),
        msg(
            "assistant",
            [
                {"type": "thinking", "thinking": "let me think about buckets"},
                {"type": "text", "text": "Token bucket in Redis.\n\nLimit: 100/min."},
                {"type": "toolCall", "id": "t1", "name": "exec", "arguments": {"cmd": "ls -la"}},
            ],
        ),
        msg("toolResult", [{"type": "text", "text": "total 0\ndrwxr-xr-x"}], toolName="exec"),
        {"type": "model_change", "model": "x"},
        msg("user", [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]),
    )
    src = render_transcript(text, "s.jsonl")
    assert src.text.split("\n") == [
        "User: How do we rate limit?",
        "Assistant: Token bucket in Redis.",
        "Limit: 100/min.",
        'Tool: exec cmd="ls -la"',
        "Tool result: exec: total 0 drwxr-xr-x",
        "User: part one",
        "part two",
    ]
    assert src.line_map == (2, 3, 3, 3, 4, 6, 6)
    assert "buckets" not in src.text  # reasoning is left out


def test_plain_chat_records_and_openai_tool_calls():
    text = jsonl(
        {"role": "system", "content": "You are a helpful assistant with a long prompt."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "get_weather"}}],
        },
        {"role": "tool", "tool_call_id": "1", "content": '{"temp": 21}'},
        {"role": "assistant", "content": "It is 21 degrees."},
    )
    src = render_transcript(text)
    assert src.text.split("\n") == [
        "User: Weather in Paris?",
        "Tool: get_weather",
        'Tool result: {"temp": 21}',
        "Assistant: It is 21 degrees.",
    ]
    assert src.line_map == (2, 3, 4, 5)


def test_claude_code_and_codex_records():
    claude = jsonl(
        {"type": "user", "message": {"role": "user", "content": "fix the bug"}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "name": "Read", "input": {"file_path": "/x"}},
                ],
            },
        },
        {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "tool_result", "content": "raw"}]},
        },
    )
    assert lines_of(claude) == [
        "User: fix the bug",
        "Assistant: Looking.",
        'Tool: Read file_path="/x"',
        "Tool result: raw",
    ]
    codex = jsonl(
        {"type": "session_meta", "payload": {"id": "x"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "run tests"}],
            },
        },
        {"type": "response_item", "payload": {"type": "reasoning", "summary": []}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell"}},
        {"type": "response_item", "payload": {"type": "function_call_output", "output": "ok"}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "run tests"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "All green."}],
            },
        },
    )
    src = render_transcript(codex)
    assert src.text.split("\n") == [
        "User: run tests",
        "Tool: shell",
        "Tool result: ok",
        "Assistant: All green.",
    ]
    assert src.line_map == (2, 4, 5, 7)


def test_noise_is_dropped():
    text = jsonl(
        msg("assistant", "NO_REPLY"),
        msg("user", ""),
        msg("user", [{"type": "image", "data": "iVBORw0KGgo"}]),
        msg("developer", "internal"),
        msg("user", "ok\x07 with a bell\r\nand CRLF"),
    )
    src = render_transcript(text)
    # an image is a placeholder, never its bytes
    assert src.text == "User: [image]\nUser: ok with a bell\nand CRLF"
    assert src.line_map == (3, 5, 5)


def test_bad_lines_are_skipped_and_logged_by_number(caplog: pytest.LogCaptureFixture):
    secret = "hunter2-Prod!"
    text = (
        jsonl(msg("user", "first"))
        + '{"type": "message", "message": {"role": "user", "content": "password='
        + secret
        + "\n"  # a line cut short by a crash, with a secret in it
        + "\x00\x00\x00\ufffd\ufffd binary junk\n"
        + "[1, 2\n"
        + "\n"
        + jsonl(msg("assistant", "second"))
        + '{"type": "message", "message": {"role": "user", "content": "still being wri'
    )
    with caplog.at_level(logging.DEBUG, logger="memory_ls"):
        src = render_transcript(text, "sessions/x.jsonl")
    assert src.text == "User: first\nAssistant: second"
    assert src.line_map == (1, 6)
    assert "skipped 3 line(s)" in caplog.text and "first: line 2" in caplog.text
    assert "line 7 is incomplete" in caplog.text
    assert secret not in caplog.text and "junk" not in caplog.text


def test_empty_and_non_message_transcripts():
    assert render_transcript("").text == ""
    assert render_transcript(jsonl({"type": "session", "id": "x"})).line_map == ()


def test_count_messages_counts_complete_lines_only():
    data = jsonl(msg("user", "a"), {"type": "session"}, msg("assistant", "b")).encode()
    assert count_messages(data) == 2
    assert count_messages(data + b'{"role": "user", "content": "c"}') == 2
    assert count_messages(data + b'{"role": "user", "content": "c"}\n') == 3


# -- the engine with sessions on ---------------------------------------------------------------


def session_settings(**sync) -> Settings:
    s = Settings(provider="none", sources=["memory", "sessions"])
    s.sessions.globs = ["sessions/*.jsonl"]
    for k, v in sync.items():
        if k == "retention_days":
            s.sessions.retention_days = v
        else:
            setattr(s.sync.sessions, k, v)
    return s


def make_engine(root: Path, tmp_path: Path, **sync) -> MemoryEngine:
    return MemoryEngine(root, session_settings(**sync), index_path=tmp_path / "idx.sqlite")


@pytest.fixture
def transcript(ws: Path) -> Path:
    return write(
        ws,
        "sessions/2026-02-03-chat.jsonl",
        jsonl(
            {"type": "session", "id": "s1"},
            msg("user", "Where do the nightly backups go?"),
            msg("assistant", [{"type": "text", "text": "To the Hetzner storage box, via restic."}]),
            msg("user", "And how long are they kept?"),
            msg("assistant", "Thirty days of dailies, twelve monthlies."),
        ),
    )


def test_one_source_never_takes_more_than_two_thirds_of_the_results(ws: Path, tmp_path: Path):
    """Chatty transcripts must not crowd out notes: with -n 5, four of five were transcripts,
    with -n 2 both (the share was rounded up)."""
    for n in range(8):
        write(ws, f"sessions/s{n}.jsonl", jsonl(msg("user", f"redis redis, question {n}")))
    for n in range(3):
        write(ws, f"memory/redis-{n}.md", f"# R\n\nredis note {n}, with other words around.\n")
    engine = make_engine(ws, tmp_path)
    try:
        engine.sync("test")
        assert engine.search("redis", max_results=1, min_score=0).results[0].source == "sessions"
        for k in range(2, 10):
            hits = engine.search("redis", max_results=k, min_score=0).results
            notes = sum(h.source == "memory" for h in hits)
            assert len(hits) == k and k - notes <= k * 2 / 3, k
            assert notes == min(3, k - k * 2 // 3), k  # the notes fill what is left, no more
    finally:
        engine.close()


def test_hits_cite_jsonl_lines_and_get_returns_rendered_lines(
    ws: Path, tmp_path: Path, transcript: Path
):
    engine = make_engine(ws, tmp_path)
    try:
        engine.sync("test")
        resp = engine.search("restic storage box", sources=["sessions"])
        hit = resp.results[0]
        assert hit.path == "sessions/2026-02-03-chat.jsonl" and hit.source == "sessions"
        assert (hit.start_line, hit.end_line) == (2, 5)
        assert hit.snippet.startswith("User: Where do the nightly backups go?")
        ex = engine.get("sessions/2026-02-03-chat.jsonl#L3")
        assert ex.text == "Assistant: To the Hetzner storage box, via restic."
        assert (ex.from_line, ex.to_line) == (3, 3)
        whole = engine.get("sessions/2026-02-03-chat.jsonl")
        assert whole.text.count("\n") == 3 and whole.total_lines == 5
        # Notes still come first for a notes query; sessions can be filtered out.
        assert all(
            h.source == "memory" for h in engine.search("token bucket", sources=["memory"]).results
        )
    finally:
        engine.close()


def test_binary_junk_does_not_lose_the_transcript(ws: Path, tmp_path: Path):
    write(
        ws,
        "sessions/junk.jsonl",
        b"\x00\x00\xff\xfe garbage\n" + jsonl(msg("user", "kestrel migration plan")).encode(),
    )
    engine = make_engine(ws, tmp_path)
    try:
        report = engine.sync("test")
        assert not report.skipped
        assert [h.path for h in engine.search("kestrel migration").results] == [
            "sessions/junk.jsonl"
        ]
    finally:
        engine.close()


def test_a_truncated_last_line_is_indexed_once_complete(ws: Path, tmp_path: Path):
    path = write(ws, "sessions/live.jsonl", jsonl(msg("user", "hello there")))
    with path.open("a") as fh:
        fh.write('{"type": "message", "message": {"role": "assistant", "content": "ocelot')
    engine = make_engine(ws, tmp_path, delta_bytes=0)  # index every change
    try:
        engine.sync("test")
        assert not engine.search("ocelot").results
        with path.open("a") as fh:
            fh.write(' sightings"}}\n')
        engine.sync("test")
        hit = engine.search("ocelot sightings").results[0]
        assert (hit.path, hit.end_line) == ("sessions/live.jsonl", 2)
    finally:
        engine.close()


def test_no_secret_reaches_index_snippets_get_or_logs(
    ws: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    records: list[object] = [{"type": "session", "id": "sec"}]
    for i, (ctx, secret) in enumerate(SECRETS):
        text = f"zebra note {i}: " + ctx.format(secret)
        records.append(
            msg("user", text) if i % 2 else msg("assistant", [{"type": "text", "text": text}])
        )
    records.append(msg("user", f"zebra key block\n{PRIVATE_KEY}\nend of key"))
    # Secrets in tool arguments and tool results: rendered short, and redacted.
    records.append(
        msg(
            "assistant", [{"type": "toolCall", "name": "exec", "arguments": {"env": SECRETS[0][1]}}]
        )
    )
    records.append(msg("toolResult", [{"type": "text", "text": SECRETS[1][1]}]))
    records.append('{"type": "message", "message": {"content": "' + SECRETS[2][1])  # broken line
    records.append(msg("user", "zebra last, marker quokkaquokka77"))
    write(ws, "sessions/secrets.jsonl", jsonl(*records))
    secrets = [s for _, s in SECRETS] + [
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
    ]

    engine = make_engine(ws, tmp_path)
    try:
        with caplog.at_level(logging.DEBUG):
            engine.sync("test")
            resp = engine.search("zebra note", max_results=50, min_score=0, sources=["sessions"])
            got = engine.get("sessions/secrets.jsonl").text
            cited = [engine.get(h.citation).text for h in resp.results]
            for s in secrets:  # searching for the secret itself finds nothing that shows it
                for h in engine.search(s, max_results=10, min_score=0).results:
                    assert s not in h.snippet
        assert resp.results and "[REDACTED:" in got and "zebra last" in got
        with sqlite3.connect(engine.index_path) as db:
            stored = "\n".join(r[0] for r in db.execute("SELECT text FROM chunks"))
        assert "zebra note 3" in stored
        snippets = "\n".join(h.snippet for h in resp.results)
        for s in secrets:
            for where, text in [
                ("chunks", stored),
                ("snippets", snippets),
                ("get", got),
                ("citations", "\n".join(cited)),
                ("logs", caplog.text),
            ]:
                assert s not in text, f"a secret survived into {where}"
        # The FTS5 index keeps no text, only tokens: none of a secret's (the control word's are).
        assert fts_leaks(engine.index_path, secrets) == []
        assert fts_leaks(engine.index_path, ["quokkaquokka77"]) == ["quokkaquokka77"]
    finally:
        engine.close()


# -- growing transcripts ------------------------------------------------------------------------


def append(path: Path, *records) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(jsonl(*records))


def found(engine: MemoryEngine, query: str) -> bool:
    return bool(engine.search(query, sources=["sessions"]).results)


def test_growth_below_both_thresholds_waits(ws: Path, tmp_path: Path, transcript: Path):
    engine = make_engine(ws, tmp_path, delta_bytes=10_000, delta_messages=3)
    try:
        engine.sync("test")
        append(transcript, msg("user", "what about the narwhal bucket?"))
        report = engine.sync("watch")
        assert report.indexed == 0 and not found(engine, "narwhal")
        append(transcript, msg("assistant", "ok"))
        engine.sync("watch")
        assert not found(engine, "narwhal")
        append(transcript, msg("user", "and?"))  # three messages since the last index
        report = engine.sync("watch")
        assert report.indexed == 1 and found(engine, "narwhal")
    finally:
        engine.close()


def test_growth_past_delta_bytes_indexes(ws: Path, tmp_path: Path, transcript: Path):
    engine = make_engine(ws, tmp_path, delta_bytes=500, delta_messages=1000)
    try:
        engine.sync("test")
        append(transcript, msg("user", "pangolin " + "filler words " * 10))
        engine.sync("watch")
        assert not found(engine, "pangolin")
        append(transcript, msg("assistant", "x" * 500))
        engine.sync("watch")
        assert found(engine, "pangolin")
    finally:
        engine.close()


def test_a_quiet_transcript_is_indexed_whatever_its_growth(
    ws: Path, tmp_path: Path, transcript: Path
):
    engine = make_engine(ws, tmp_path)  # defaults: 100 kB / 50 messages
    try:
        engine.sync("test")
        append(transcript, msg("user", "the axolotl question"))
        engine.sync("watch")
        assert not found(engine, "axolotl")
        old = time.time() - IDLE_FLUSH_SECONDS - 5
        os.utime(transcript, (old, old))
        engine.sync("later")
        assert found(engine, "axolotl")
    finally:
        engine.close()


def test_a_rewritten_transcript_is_reindexed(ws: Path, tmp_path: Path, transcript: Path):
    engine = make_engine(ws, tmp_path)
    try:
        engine.sync("test")
        transcript.write_text(jsonl(msg("user", "capybara only")), encoding="utf-8")  # shorter
        engine.sync("watch")
        assert found(engine, "capybara") and not found(engine, "restic")
    finally:
        engine.close()


def test_retention_drops_old_transcripts_from_the_index_only(
    ws: Path, tmp_path: Path, transcript: Path
):
    old = write(ws, "sessions/old.jsonl", jsonl(msg("user", "the wombat incident")))
    forty_days = time.time() - 40 * 86400
    os.utime(old, (forty_days, forty_days))
    engine = make_engine(ws, tmp_path, retention_days=30)
    try:
        engine.sync("test")
        assert not found(engine, "wombat") and found(engine, "restic")
        os.utime(transcript, (forty_days, forty_days))
        report = engine.sync("test")
        assert report.removed == 1 and not found(engine, "restic")
        assert old.exists() and transcript.exists()
        assert "wombat" in engine.get("sessions/old.jsonl").text  # still readable from disk
    finally:
        engine.close()


def test_sync_action_rules(tmp_path: Path):
    p = tmp_path / "t.jsonl"
    p.write_text(jsonl(msg("user", "a"), msg("user", "b")), encoding="utf-8")
    size = p.stat().st_size
    now = time.time()
    first = len(jsonl(msg("user", "a")))

    def act(indexed, mtime=now, db=10_000, dm=2, keep=0):
        return sync_action(p, size, mtime, indexed, db, dm, keep, now=now)

    assert act(None) == "index"  # never indexed
    assert act(size + 10) == "index"  # shrunk: rewritten
    assert act(size) == "index"  # same size: the usual hash check decides
    assert act(first) == "wait"  # one message appended, threshold two
    assert act(first, dm=1) == "index"
    assert act(first, db=10) == "index"
    assert act(first, db=0) == "index"  # 0 means every append
    assert act(first, mtime=now - IDLE_FLUSH_SECONDS) == "index"
    assert act(first, mtime=now - 2 * 86400, keep=1) == "drop"
    assert act(first, mtime=now - 2 * 86400, keep=0) == "index"


def test_an_absolute_glob_is_skipped_not_fatal(
    ws: Path, tmp_path: Path, transcript: Path, caplog: pytest.LogCaptureFixture
):
    s = session_settings()
    s.sessions.globs = [str(tmp_path / "elsewhere" / "*.jsonl"), "sessions/*.jsonl"]
    engine = MemoryEngine(ws, s, index_path=tmp_path / "idx.sqlite")
    try:
        with caplog.at_level(logging.WARNING):
            engine.sync("test")
        assert "not relative to the workspace" in caplog.text
        assert found(engine, "restic")
    finally:
        engine.close()


def test_a_workspace_inside_a_hidden_folder_indexes_its_transcripts(tmp_path: Path):
    """OpenClaw's workspace is ~/.openclaw/workspace: the hidden folder above the workspace
    skipped every transcript the globs matched (the check looked at the absolute path's last
    folders, not the ones below the workspace). Hidden folders below it are still skipped."""
    root = tmp_path / ".openclaw" / "workspace"
    write(root, "sessions/a.jsonl", jsonl(msg("user", "the wombat inventory")))
    write(root, "sessions/.trash/b.jsonl", jsonl(msg("user", "the wombat leftovers")))
    s = session_settings()
    s.sessions.globs = ["sessions/**/*.jsonl"]
    engine = MemoryEngine(root, s, index_path=tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        hits = engine.search("wombat", sources=["sessions"]).results
        assert [h.citation for h in hits] == ["sessions/a.jsonl#L1"]
    finally:
        engine.close()
