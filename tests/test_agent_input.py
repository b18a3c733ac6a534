"""What agents, users and editors send memory-ls, found by probing the real CLI, MCP server and
language server: a memory file whose name is not UTF-8, settings that hold a secret or are of
the wrong shape, CLI search options out of bounds, NaN where an integer belongs. Each is a clear
error or a problem named and skipped; none takes a sync down or shows a secret."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import write
from lsp_harness import Start, make_workspace, paths, search, start, status  # noqa: F401

from memory_ls.cli import main
from memory_ls.engine import MemoryEngine
from memory_ls.mcp.resources import list_resources
from memory_ls.params import MCP, ParamError, parse_get, parse_search
from memory_ls.settings import Settings, apply
from memory_ls.workspace import PathError

# A name in bytes that are not UTF-8 (an archive from another system): Python spells it with a
# lone surrogate, which SQLite, JSON and URIs cannot carry.
NOT_UTF8 = os.fsdecode(b"memory/caf\xe9.md")


def test_a_memory_file_whose_name_is_not_utf8_is_skipped_not_fatal(ws: Path, tmp_path: Path):
    write(ws, NOT_UTF8, "# Latin-1\n\nzebra crossing\n")
    engine = MemoryEngine(ws, Settings(provider="none"), index_path=tmp_path / "idx.sqlite")
    try:
        engine.sync("test")  # raised UnicodeEncodeError: nothing of the workspace was indexed
        assert paths(engine.search("dark mode").to_json(ws)) == ["MEMORY.md"]
        # memory:// resources listed nothing (resources/list failed as a whole)
        assert "MEMORY.md" in [r.name for r in list_resources(engine)]
        assert engine.workspace.classify(NOT_UTF8) is None  # a watcher's event for it too
    finally:
        engine.close()


def test_index_cli_skips_a_name_that_is_not_utf8(ws: Path, tmp_path: Path, caplog):
    write(ws, NOT_UTF8, "# Latin-1\n")
    code = main(["index", "-w", str(ws), "--index", str(tmp_path / "i.sqlite"), "--json"])
    assert code == 0  # was a traceback
    assert "caf\\xe9.md: its name is not UTF-8" in caplog.text


SECRET = "sk-proj-hunter2hunter2hunter2hunter2"


@pytest.mark.parametrize(
    "data",
    [
        {"remote": {"apiKey": [SECRET]}},
        {"remote": {"apiKey": {"key": SECRET}}},
        {"remote": {"headers": {"Authorization": f"Bearer {SECRET}", "X-Retries": 3}}},
        {"rerank": {"apiKey": [SECRET]}},
        {"sessionWriter": {"apiKey": [SECRET]}},
        {"store": {"postgres": {"url": [f"postgresql://memory:{SECRET}@db/memory"]}}},
    ],
)
def test_a_bad_secret_setting_is_named_without_its_value(data: dict):
    """The problem goes to the status (memory_status shows it to the agent), the log and a
    message window: it used to quote the value, key and all."""
    problems = apply(Settings(), data)
    assert len(problems) == 1 and "expected" in problems[0]
    assert SECRET not in problems[0] and "hunter2" not in problems[0]


def test_a_huge_bad_value_is_cut_in_its_problem():
    (problem,) = apply(Settings(), {"provider": "x" * 1_000_000})
    assert problem.startswith("provider: expected one of") and len(problem) < 1000


@pytest.mark.parametrize(
    ("init", "config", "expect"),
    [
        (["provider", "none"], None, "initializationOptions: expected an object"),
        ("none", None, "initializationOptions: expected an object"),
        ({"memory": [1]}, None, "initializationOptions: memory: expected an object"),
        (None, {"memory": ["not", "a", "table"]}, "workspace/configuration: expected an object"),
    ],
)
async def test_client_settings_of_the_wrong_shape_are_a_settings_problem(
    start: Start,  # noqa: F811
    tmp_path: Path,
    init: object,
    config: dict | None,
    expect: str,
):
    """They were dropped without a word (or called an unknown setting ``memory``)."""
    ws = make_workspace(tmp_path / "ws")
    client = await start(ws, init_options=init, config=config)
    st = await status(client)
    assert any(expect in p for p in st["settingsProblems"]), st["settingsProblems"]
    assert [m for m in client.messages if expect in m.message]
    assert paths(await search(client, "PostgreSQL")) == ["memory/2026-01-05.md"]


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["-n", "0"], "-n: must be at least 1"),
        (["-n", "5000"], "-n: must be at most 1000"),
        (["--min-score", "nan"], "--min-score: expected a number"),
        (["--min-score", "5"], "--min-score: must be between 0 and 1"),
        (["--json", "--min-score", "inf"], "--min-score: expected a number"),
    ],
)
def test_search_cli_options_out_of_bounds_are_an_error(
    ws: Path, tmp_path: Path, capsys, args: list[str], expect: str
):
    """They were taken as given: `-n 0` answered one result, `--min-score 5` or `nan` none,
    with a hint to lower the score."""
    index = str(tmp_path / "i.sqlite")
    code = main(["search", "dark mode", "-w", str(ws), "--index", index, *args])
    out = capsys.readouterr()
    assert code == 2 and expect in out.err and out.out == ""


def test_search_cli_still_takes_good_options(ws: Path, tmp_path: Path, capsys):
    index = str(tmp_path / "i.sqlite")
    args = ["-n", "1", "--min-score", "0", "--source", "memory", "--path", "MEM", "--json"]
    assert main(["search", "dark mode", "-w", str(ws), "--index", index, *args]) == 0
    assert '"path": "MEMORY.md"' in capsys.readouterr().out


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_not_integers(value: float):
    """JSON decoders that allow NaN and Infinity (Python's does) gave Python's own words:
    ``from: cannot convert float NaN to integer``."""
    with pytest.raises(ParamError, match="^from: expected an integer, got"):
        parse_get({"path": "MEMORY.md", "from": value}, MCP)
    with pytest.raises(ParamError, match="^maxResults: expected an integer, got"):
        parse_search({"query": "x", "maxResults": value}, MCP)


class Wire:
    """The real `memory-ls mcp` over stdio: lines sent as given, answers read as they come."""

    def __init__(self, ws: Path, tmp_path: Path):
        args = [sys.executable, "-m", "memory_ls", "mcp", "-w", str(ws)]
        args += ["--index", str(tmp_path / "i.sqlite")]
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.answers: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.answers.put(json.loads(raw))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self, id_: int | str) -> dict:
        while True:
            got = self.answers.get(timeout=30)
            if got.get("id") == id_:
                return got

    def initialize(self) -> None:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}}
        init["clientInfo"] = {"name": "t", "version": "1"}
        self.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        assert "result" in self.answer(1)
        self.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def test_a_lone_surrogate_or_a_malformed_mcp_line_gets_an_answer(ws: Path, tmp_path: Path):
    """A JavaScript client that cuts a string inside an emoji sends "\\ud83d" alone: valid JSON,
    not UTF-8. The SDK refused the whole line and the agent waited for its timeout."""
    wire = Wire(ws, tmp_path)
    send, answers, answer = wire.send, wire.answers, wire.answer
    try:
        wire.initialize()
        call = '{"name": "memory_search", "arguments": {"query": "dark mode \\ud83d"}}'
        send(f'{{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {call}}}')
        got = answer(2)["result"]
        assert not got.get("isError"), got
        found = [r["path"] for r in got["structuredContent"]["results"]]
        assert found == ["MEMORY.md"]
        pair = '{"name": "memory_search", "arguments": {"query": "dark \\ud83d\\ude00 mode"}}'
        send(f'{{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {pair}}}')
        assert not answer(3)["result"].get("isError")  # a pair is an emoji, left as it is
        # Lines that are not JSON-RPC messages got no answer at all (the SDK dropped them).
        send("this is not json {")
        got = answers.get(timeout=30)
        assert got["id"] is None and got["error"]["code"] == -32700, got
        send('{"jsonrpc": "2.0", "id": 4, "method": 5}')
        assert answer(4)["error"]["code"] == -32600
        send('[{"jsonrpc": "2.0", "id": 5, "method": "ping"}]')  # batches left MCP in 2025
        got = answers.get(timeout=30)
        assert got["id"] is None and got["error"]["code"] == -32600, got
        send("")  # a blank line is nothing to answer
        send('{"jsonrpc": "2.0", "id": 7, "result": []}')  # nor a response, even a malformed one
        send('{"jsonrpc": "2.0", "id": 6, "method": "ping"}')
        assert answers.get(timeout=30) == {"jsonrpc": "2.0", "id": 6, "result": {}}
    finally:
        wire.close()


def test_a_malformed_mcp_line_with_a_lone_surrogate_in_its_id_gets_an_answer(
    ws: Path, tmp_path: Path
):
    """The invalid-request error echoed the id as sent, lone surrogate and all: the SDK could
    not write it out, and its writer's failure took the whole server down."""
    wire = Wire(ws, tmp_path)
    try:
        wire.initialize()
        wire.send('{"jsonrpc": "2.0", "id": "a\\ud83d", "method": 5}')
        got = wire.answers.get(timeout=30)
        assert got["id"] == "a\ufffd" and got["error"]["code"] == -32600, got
        wire.send('{"jsonrpc": "2.0", "id": 7, "method": "ping"}')
        assert wire.answer(7) == {"jsonrpc": "2.0", "id": 7, "result": {}}
    finally:
        wire.close()


def test_an_out_of_range_number_is_quoted_as_sent():
    """maxResults 1e308 was quoted back in 309 digits."""
    with pytest.raises(ParamError, match=r"must be at most 1000, got 1e\+308$"):
        parse_search({"query": "x", "maxResults": 1e308})


def test_a_path_with_dot_segments_is_answered_under_its_key(ws: Path, tmp_path: Path):
    """An agent's "memory/../MEMORY.md" was read, and answered under that name: not the key its
    hits and citations carry, so the client could not match them."""
    with MemoryEngine(ws, Settings(provider="none"), index_path=tmp_path / "i.sqlite") as e:
        for path in ("memory/../MEMORY.md", "./MEMORY.md", f"../{ws.name}/MEMORY.md"):
            assert e.get(path).path == "MEMORY.md", path
        assert (
            e.get("memory/notes/../2026-02-01-deploy.md#L1").path == "memory/2026-02-01-deploy.md"
        )
        with pytest.raises(PathError, match="outside the workspace"):
            e.get("memory/../../outside.md")


@pytest.mark.parametrize("depth, text", [(100_000, "x"), (600, "\\ud83d")])
def test_an_mcp_line_nested_too_deeply_gets_an_answer(
    ws: Path, tmp_path: Path, depth: int, text: str
):
    """Python's JSON parser (and the surrogate cleaning after it) raised RecursionError on a
    deeply nested line, which ended the server; the SDK's own parser refuses such a line."""
    wire = Wire(ws, tmp_path)
    try:
        wire.initialize()
        deep = "[" * depth + f'"{text}"' + "]" * depth
        wire.send(f'{{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {{"a": {deep}}}}}')
        got = wire.answers.get(timeout=30)
        assert got["error"]["code"] in (-32700, -32600), got
        wire.send('{"jsonrpc": "2.0", "id": 7, "method": "ping"}')
        assert wire.answer(7) == {"jsonrpc": "2.0", "id": 7, "result": {}}
    finally:
        wire.close()


def test_paths_through_a_symlinked_workspace_folder_are_its_files(ws: Path, tmp_path: Path):
    """A workspace opened through a symlink (/tmp on macOS, a synced folder): an absolute path
    through the link was "outside the workspace" for memory/get, and an editor buffer given
    that way was not indexed."""
    link = tmp_path / "linked-ws"
    link.symlink_to(ws, target_is_directory=True)
    with MemoryEngine(link, Settings(provider="none"), index_path=tmp_path / "i.sqlite") as e:
        e.sync()
        assert e.get(str(link / "MEMORY.md")).path == "MEMORY.md"
        assert e.set_document(str(link / "MEMORY.md"), "# Memory\n\nThe zebracorn rule.\n")
        assert [h.path for h in e.search("zebracorn").results] == ["MEMORY.md"]
        with pytest.raises(PathError, match="outside the workspace"):
            e.get(str(tmp_path / "elsewhere.md"))


def test_a_folder_opened_as_link_dotdot_does_not_take_in_its_lexical_namesake(
    ws: Path, tmp_path: Path
):
    """Opened as a/b/../ws where a/b is a symlink: the folder is the link target's sibling
    ws, while a/ws, what the spelling reads as, is another folder. Its files are outside the
    workspace: they were answered with, and their buffers indexed as, the workspace's own."""
    (tmp_path / "deep").mkdir()
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b").symlink_to(tmp_path / "deep", target_is_directory=True)
    other = tmp_path / "a" / "ws"
    write(other, "MEMORY.md", "# Other\n\nAnother folder's memory.\n")
    opened = tmp_path / "a" / "b" / ".." / "ws"
    assert opened.resolve() == ws.resolve()
    with MemoryEngine(opened, Settings(provider="none"), index_path=tmp_path / "i.sqlite") as e:
        e.sync()
        with pytest.raises(PathError, match="outside the workspace"):
            e.get(str(other / "MEMORY.md"))
        assert not e.set_document(str(other / "MEMORY.md"), "# Other\n\nThe zebracorn rule.\n")
        assert e.search("zebracorn").results == []
