"""Each agent's transcript format, from its real shape: Claude Code, Codex and OpenClaw
transcripts of hundreds of lines (generated, see transcript_fixtures.py) render to the
expected lines, map every line back to its record, redact tool arguments and results, survive
junk and huge lines, and are searchable once indexed, a live last line included."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

import pytest
from conftest import write
from fake_secrets import SECRETS
from transcript_fixtures import FORMATS, claude_code, codex, jsonl, openclaw, question

from memory_ls.engine import MemoryEngine
from memory_ls.settings import Settings
from memory_ls.sources.sessions import render_segment, render_transcript

ARG_SECRET, RESULT_SECRET = SECRETS[0][1], SECRETS[1][1]
TURNS = 60  # 250 to 600 JSONL lines, depending on the agent
CUT_02 = "12: ERROR upstream timeout after 30s (job2) " * 6

SAMPLES = {
    "claude": [
        (1, "Summary: Nightly job failures in billing"),
        (3, "User: /model opus"),  # line 2, the isMeta caveat, is skipped
        (5, "User: Turn 0: why does the quokka0 job fail at night?"),
        (7, "Assistant: Checking the log of job0."),  # line 6: thinking, left out
        (8, 'Tool: Bash command="grep -n ERROR logs/job0.log", description="Find errors"'),
        (
            9,
            "Tool result: "
            + "12: ERROR upstream timeout after 30s (job0) " * 2
            + "12: ERROR upstream timeout after 30s (job0)",
        ),
        (10, "Assistant: Job0 times out upstream; raise it."),
        (12, "User: Turn 1: why does the quokka1 job fail at night? Screenshot attached."),
        (12, "[image: image/png]"),
        (19, "User: Turn 2: why does the quokka2 job fail at night?"),
        (
            23,
            "Tool result: " + CUT_02 + "12: ERROR upstream timeout after 30s … "
            "[truncated, 880 chars]",
        ),
        (24, "Assistant: Job2 times out upstream; raise it."),
        (26, "Summary: This session is being continued from a previous conversation. Jobs 0-2."),
    ],
    "codex": [
        (5, "User: Turn 0: why does the quokka0 job fail at night?"),  # 2-3: injected context
        (
            8,
            'Tool: shell command=["bash","-lc","grep -n ERROR logs/job0.log"], '
            'workdir="/home/dev/billing"',
        ),  # 7: reasoning, left out
        (10, "Assistant: Job0 times out upstream; raise it."),
        (14, "[image: image/png]"),
        (
            19,
            "Tool: apply_patch *** Begin Patch *** Update File: jobs/job1.py @@ "
            "- timeout = 30 + timeout = 90 *** End Patch",
        ),
        (20, "Tool result: Success. Updated the following files: M jobs/job1.py"),
        (30, 'Tool: web_search query="upstream timeout retries"'),
        (31, "Summary: Summary so far: jobs 0-2 time out upstream."),
        (32, "Assistant: Job2 times out upstream; raise it."),
    ],
    "openclaw": [
        (4, "User: Turn 0: why does the quokka0 job fail at night?"),
        (5, "Assistant: Checking the log of job0."),
        (5, 'Tool: exec command="grep -n ERROR logs/job0.log"'),
        (
            6,
            "Tool result: exec: "
            + "12: ERROR upstream timeout after 30s (job0) " * 2
            + "12: ERROR upstream timeout after 30s (job0)",
        ),
        (8, "[image: image/jpeg]"),
        (16, "Summary: Jobs 0-2 time out upstream."),
    ],
}
TOOLS = {"claude": "Bash", "codex": "apply_patch", "openclaw": "exec"}
MARKERS = re.compile(
    r"^(User|Assistant|Tool|Tool result|Summary): |\[REDACTED:[\w-]+\]|"
    r" … \[truncated, [\d,]+ chars\]$|\[image: [\w/]+\]"
)


def pairs(text: str) -> list[tuple[int, str]]:
    src = render_transcript(text)
    return list(zip(src.line_map, src.text.split("\n"), strict=True))


@pytest.mark.parametrize("agent", FORMATS)
def test_a_small_sample_renders_exactly(agent: str):
    got = pairs(jsonl(FORMATS[agent](3)))
    for expected in SAMPLES[agent]:
        assert expected in got
    # the Codex sample in full: one line a message, tool call or result, in order
    if agent == "codex":
        assert [n for n, _ in got] == [
            5,
            8,
            9,
            10,
            14,
            14,
            17,
            18,
            19,
            20,
            21,
            25,
            28,
            29,
            30,
            31,
            32,
        ]


@pytest.mark.parametrize("agent", FORMATS)
def test_every_rendered_line_maps_to_the_record_holding_it(agent: str):
    records = FORMATS[agent](TURNS, ARG_SECRET, RESULT_SECRET)
    text = jsonl(records)
    raw = text.split("\n")
    assert len(records) >= 250
    got = pairs(text)
    assert len(got) >= 4 * TURNS
    for n, line in got:
        record = json.dumps(json.loads(raw[n - 1]), ensure_ascii=False)
        words = re.findall(r"\w{3,}", MARKERS.sub(" ", line))
        assert all(w in record for w in words), (n, line)
    users = [n for n, line in got if line.startswith("User: Turn ")]
    assert len(users) == TURNS and all(question(i) in raw[n - 1] for i, n in enumerate(users))


@pytest.mark.parametrize("agent", FORMATS)
def test_secrets_in_tool_arguments_and_results_are_redacted(agent: str):
    text = jsonl(FORMATS[agent](5, ARG_SECRET, RESULT_SECRET))
    assert ARG_SECRET in text and RESULT_SECRET in text
    rendered = render_transcript(text).text
    assert ARG_SECRET not in rendered and RESULT_SECRET not in rendered
    assert "OPENAI_API_KEY=[REDACTED:openai-key] && ./run job3" in rendered
    assert "legacy key [REDACTED:openai-key] here" in rendered


def test_codex_context_messages_are_not_user_words():
    def user(text: str) -> dict:
        content = [{"type": "input_text", "text": text}]
        return {
            "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": content},
        }

    text = "".join(
        json.dumps(r) + "\n"
        for r in [
            user("<turn_aborted>\nThe user interrupted.\n</turn_aborted>"),
            user(
                "# Context from my IDE setup:\n## Open tabs:\n- a.py\n"
                "## My request for Codex:\nfix a.py"
            ),
        ]
    )
    assert render_transcript(text).text == "User: fix a.py"


def test_a_secret_across_the_cut_of_a_long_result_never_shows_in_part():
    for pad in range(280, 320, 3):  # the key starts before, at and after the 300-char cut
        content = "x" * pad + " " + ARG_SECRET + " tail" * 100
        rec = {"type": "message", "message": {"role": "toolResult", "content": content}}
        line = render_transcript(json.dumps(rec) + "\n").text
        assert "truncated" in line and "sk-" not in line and "Xa81" not in line, pad


def test_binary_junk_and_a_10_mb_line_are_handled(caplog: pytest.LogCaptureFixture):
    big = "A" * 10_000_000
    records = claude_code(4)
    huge_result = {
        **records[8],
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": big}],
        },
    }
    data = (
        jsonl(records[:8]).encode()
        + b"\x00\xff\xfe\x80 binary junk \x1b[0m\n"
        + json.dumps(huge_result).encode()
        + b"\n"
        + b'{"type": "user", "message": {"content": "'
        + big.encode()
        + b"\n"  # cut, not JSON
        + jsonl(records[9:]).encode()
    )
    start = time.monotonic()
    with caplog.at_level(logging.INFO, logger="memory_ls"):
        seg = render_segment(data, 1, "big.jsonl")
    assert time.monotonic() - start < 20
    lines = dict(zip(seg.numbers, seg.lines, strict=True))
    assert lines[10] == "Tool result: " + "A" * 300 + " … [truncated, 10,000,000 chars]"
    assert "User: " + question(3) in seg.lines  # the rest is still there
    assert "big.jsonl: skipped 2 line(s) that are not JSON (first: line 9)" in caplog.text
    assert "AAAA" not in caplog.text and "junk" not in caplog.text
    assert all(len(line) < 1000 for line in seg.lines)


def settings() -> Settings:
    s = Settings(provider="none", sources=["memory", "sessions"])
    s.sessions.globs = ["sessions/*.jsonl"]
    s.sync.sessions.delta_bytes = 0  # index every change
    return s


@pytest.mark.parametrize("agent", FORMATS)
def test_indexed_transcripts_find_tool_calls_and_user_words_and_a_live_last_line(
    agent: str, ws: Path, tmp_path: Path
):
    body = jsonl(FORMATS[agent](TURNS))
    rel = f"sessions/{agent}.jsonl"
    final = {
        "claude": {"type": "user", "message": {"role": "user", "content": "wombat fix?"}},
        "codex": {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "wombat fix?"}],
            },
        },
        "openclaw": {"type": "message", "message": {"role": "user", "content": "wombat fix?"}},
    }
    live = json.dumps(final[agent])
    path = write(ws, rel, body + live[: len(live) - 9])  # the writer is mid-line
    engine = MemoryEngine(ws, settings(), index_path=tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        tool = TOOLS[agent]
        hits = engine.search(tool, sources=["sessions"], max_results=5, min_score=0).results
        assert hits and all(h.path == rel for h in hits)
        assert any(f"Tool: {tool}" in engine.get(h.citation).text for h in hits)
        word = f"quokka{TURNS - 7}"
        hit = engine.search(word, sources=["sessions"], min_score=0).results[0]
        line = next(i for i, r in enumerate(body.split("\n"), 1) if question(TURNS - 7) in r)
        assert hit.start_line <= line <= hit.end_line
        assert f"User: {question(TURNS - 7)}" in engine.get(f"{rel}#L{line}").text
        assert not engine.search("wombat", sources=["sessions"], min_score=0).results
        with path.open("a", encoding="utf-8") as fh:
            fh.write(live[len(live) - 9 :] + "\n")  # the writer finishes its line
        engine.sync("test")
        hit = engine.search("wombat", sources=["sessions"], min_score=0).results[0]
        assert hit.end_line == body.count("\n") + 1
    finally:
        engine.close()


def test_a_transcript_rotated_or_truncated_while_indexed(ws: Path, tmp_path: Path):
    rel = "sessions/rot.jsonl"
    path = write(ws, rel, jsonl(codex(40)))
    engine = MemoryEngine(ws, settings(), index_path=tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        assert engine.search("quokka33", min_score=0).results
        path.write_text(jsonl(openclaw(5))[:-40], encoding="utf-8")  # rotated, cut mid-line
        engine.sync("test")
        assert not engine.search("quokka33", min_score=0).results
        hit = engine.search("quokka3", min_score=0).results[0]
        assert hit.path == rel and "quokka3" in engine.get(hit.citation).text
        path.write_bytes(b"")  # truncated to nothing
        engine.sync("test")
        assert not engine.search("quokka3", min_score=0).results
    finally:
        engine.close()


def test_records_nested_about_as_deep_as_json_allows_are_skipped_not_fatal(
    ws: Path, tmp_path: Path
):
    """A tool call whose arguments nest close to json.loads' depth limit parsed, and then
    raised RecursionError when rendered (its arguments are dumped again a few frames deeper):
    that failed the whole sync, every time. Every depth up to the limit must be survivable."""
    lines = [
        json.dumps({"type": "session", "id": "deep"}),
        *(
            '{"type": "assistant", "message": {"role": "assistant", "content": [{"type": '
            f'"tool_use", "name": "X", "input": {{"a": {"[" * n}{"]" * n}}}}}]}}}}'
            for n in range(700, 1000)
        ),
        json.dumps({"role": "user", "content": "the quokka census"}),
    ]
    write(ws, "sessions/deep.jsonl", "\n".join(lines) + "\n")
    engine = MemoryEngine(ws, settings(), index_path=tmp_path / "idx.sqlite")
    try:
        assert not engine.sync("test").skipped
        hit = engine.search("quokka census", sources=["sessions"]).results[0]
        assert hit.end_line == len(lines)
        assert engine.get(f"sessions/deep.jsonl#L{len(lines)}").text == "User: the quokka census"
    finally:
        engine.close()


def test_secrets_in_json_inside_tool_arguments_are_redacted():
    """An argument is shown as JSON, whose quoting escapes the quotes of JSON inside it
    (``curl -d '{"password": "..."}'``): every rule keyed on a quote missed the secret there.
    Strings are redacted before they are quoted, in every agent's tool calls."""
    secrets = [(ctx.format(secret), secret) for ctx, secret in SECRETS]
    body = json.dumps({"password": "hunter2-prod", "api_key": "k9-long-secret-value"})
    claude_call = {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": f"curl -d '{body}'"}},
                *(
                    {"type": "tool_use", "name": "Note", "input": {"text": text}}
                    for text, _ in secrets
                ),
            ],
        },
    }
    codex_call = {
        "type": "response_item",
        "payload": {
            "type": "function_call",
            "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", f"curl -d '{body}' x"]}),
        },
    }
    plain_result = {"role": "tool", "name": "http", "content": {"body": body, "status": 200}}
    rendered = render_transcript(jsonl([claude_call, codex_call, plain_result])).text
    assert rendered.count("[REDACTED:") >= 2 * 3 + 1
    for leaked in ["hunter2-prod", "k9-long-secret-value", *(s for _, s in secrets)]:
        assert leaked not in rendered
