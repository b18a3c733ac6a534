"""What an agent or a script does with the CLI and the MCP server, as separate processes on one
workspace and one index: search, then read what a result cites, with JSON on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from conftest import write
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from repo_root import REPO

from memory_ls.mcp import REFRESH_SECONDS


def cli(root: Path, index: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``memory-ls ARGS -w ROOT --index INDEX`` in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "memory_ls", *args, "-w", str(root), "--index", str(index)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )


def mcp_params(root: Path, index: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_ls", "mcp", "-w", str(root), "--index", str(index)],
        env={k: os.environ[k] for k in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
        | {"PYTHONPATH": str(REPO)},
        cwd=str(REPO),
    )


def paths(result: Any) -> list[str]:
    """The paths a memory_search result found; a tool error fails the test with its text."""
    assert not result.is_error, result.content[0].text
    return [hit["path"] for hit in json.loads(result.content[0].text)["results"]]


def keyword_ws(root: Path) -> Path:
    write(root, ".memory-ls.toml", 'provider = "none"\n')
    write(root, "MEMORY.md", "# Memory\n\nUser prefers dark mode.\n")
    return root


def test_every_citation_search_prints_can_be_read_with_get(tmp_path: Path):
    """A note in a folder with a space, or named with "#", was cited by search but its citation
    was refused by get as "bad line numbers" (exit 2): the path had to be one a citation inside
    running text can hold."""
    root = keyword_ws(tmp_path / "ws")
    names = ["memory/on call/handover notes.md", "memory/c#/sharp #1.md", "memory/café ünï.md"]
    for i, name in enumerate(names):
        write(root, name, f"# Note {i}\n\nThe walrus{i} deploy happens on Fridays.\n")
    index = tmp_path / "index.sqlite"
    for i, name in enumerate(names):
        found = cli(root, index, "search", f"walrus{i}", "--json")
        assert found.returncode == 0, found.stderr
        (hit,) = json.loads(found.stdout)["results"]
        assert hit["path"] == name and hit["citation"] == f"{name}#L1-L3"
        got = cli(root, index, "get", hit["citation"], "--json")
        assert got.returncode == 0, got.stderr
        excerpt = json.loads(got.stdout)
        assert excerpt["path"] == name and (excerpt["from"], excerpt["to"]) == (1, 3)
        assert excerpt["text"].endswith(f"The walrus{i} deploy happens on Fridays.")
        one = cli(root, index, "get", f"{name}#L3")
        assert one.returncode == 0 and one.stdout == f"The walrus{i} deploy happens on Fridays.\n"
    # Bad line numbers are still an error, whatever the path holds.
    bad = cli(root, index, "get", f"{names[0]}#L3-L1")
    assert bad.returncode == 2 and "bad line numbers" in bad.stderr


HOLD_WRITE_LOCK = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(90)
"""


async def test_an_mcp_search_answers_while_another_process_holds_the_write_lock(tmp_path: Path):
    """Another process (a CLI rebuild, another agent's server syncing a big checkout) holding the
    index's write lock past SQLite's busy timeout failed memory_search with a bare
    "memory_search failed: OperationalError"; the CLI and the editor answer from the index as
    it is, and so does the MCP server now."""
    root = keyword_ws(tmp_path / "ws")
    index = tmp_path / "index.sqlite"
    async with (
        stdio_client(mcp_params(root, index)) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        await session.initialize()
        assert paths(await session.call_tool("memory_search", {"query": "dark mode"})) == [
            "MEMORY.md"
        ]
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_WRITE_LOCK, str(index)], stdout=subprocess.PIPE
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
            write(root, "memory/beaver.md", "# Dams\n\nThe beaver builds dams.\n")
            time.sleep(REFRESH_SECONDS + 0.1)  # a search syncs first: the new note is a write
            held = await session.call_tool("memory_search", {"query": "dark mode"})
            assert holder.poll() is None  # answered while the lock was still held
            assert paths(held) == ["MEMORY.md"]
        finally:
            holder.kill()
            holder.wait()
        time.sleep(REFRESH_SECONDS + 0.1)
        found = await session.call_tool("memory_search", {"query": "beaver dams"})
        assert paths(found) == ["memory/beaver.md"]  # the next search indexes what was missed


def test_session_save_reports_the_note_it_saved_when_the_index_is_locked(tmp_path: Path):
    """The note is written before the index sync; a sync that failed (another process's write
    lock held past the busy timeout) made `session save` exit 2 with "index error" and no path,
    so a hook or a script saving again wrote the note twice."""
    root = keyword_ws(tmp_path / "ws")
    index = tmp_path / "index.sqlite"
    assert cli(root, index, "index").returncode == 0
    transcript = write(
        tmp_path,
        "chat.jsonl",
        json.dumps({"role": "user", "content": "Which queue do we use for billing?"})
        + "\n"
        + json.dumps({"role": "assistant", "content": "RabbitMQ with quorum queues."})
        + "\n",
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(index)], stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        saved = cli(root, index, "session", "save", str(transcript), "--json")
        assert holder.poll() is None  # the lock was held all along
    finally:
        holder.kill()
        holder.wait()
    assert saved.returncode == 0, saved.stderr
    assert "not indexed yet" in saved.stderr
    note = json.loads(saved.stdout)["path"]
    assert [p.relative_to(root).as_posix() for p in (root / "memory").iterdir()] == [note]
    found = cli(root, index, "search", "RabbitMQ quorum", "--json")  # the next sync indexes it
    assert [hit["path"] for hit in json.loads(found.stdout)["results"]] == [note]


def test_a_workspace_that_is_no_folder_is_an_error_not_no_results(tmp_path: Path):
    """`search` exits 1 for "nothing matched"; a -w that is missing or a file exited 1 too
    (SystemExit with a message), so a script read a typo in the path as an empty memory."""
    index = tmp_path / "index.sqlite"
    note = write(tmp_path, "MEMORY.md", "# Memory\n")
    for root in (tmp_path / "missing", note):
        for args in (("search", "walrus"), ("search", "walrus", "--json"), ("get", "MEMORY.md")):
            done = cli(root, index, *args)
            assert done.returncode == 2, (args, done.returncode)
            assert (
                done.stdout == ""
                and done.stderr == f"memory-ls: workspace {root} is not a folder\n"
            )
    mcp = subprocess.run(
        [sys.executable, "-m", "memory_ls", "mcp", "-w", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    assert mcp.returncode == 2 and "is not a folder" in mcp.stderr


async def test_an_index_deleted_under_a_running_mcp_server_is_opened_again(tmp_path: Path):
    """The index is a cache the user may delete. A running MCP server kept writing to the deleted
    file while the readers it opened later took the new one: concurrent searches failed ("no
    such table") or answered from either file, and with the old -wal and -shm left beside a new
    file (only the .sqlite deleted) every CLI command failed with "disk I/O error" until the
    server stopped. It opens the index at its path again at its next call."""
    root = keyword_ws(tmp_path / "ws")
    for i in range(20):
        write(root, f"memory/heron{i}.md", f"# Heron {i}\n\nThe heron{i} fishes at dawn.\n")
    index = tmp_path / "index.sqlite"
    async with (
        stdio_client(mcp_params(root, index)) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        await session.initialize()

        async def burst(query: str) -> list[list[str]]:
            """Eight searches at once: the server opens new reader connections for them."""
            found: list[list[str]] = []

            async def one() -> None:
                found.append(paths(await session.call_tool("memory_search", {"query": query})))

            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(one)
            return found

        assert await burst("heron5") == [["memory/heron5.md"]] * 8
        for deleted in ([index], [Path(f"{index}{end}") for end in ("", "-wal", "-shm")]):
            for f in deleted:
                f.unlink()
            (root / "memory/heron5.md").unlink()
            write(root, "memory/heron5.md", "# Heron 5\n\nThe egret fishes at dusk.\n")
            time.sleep(REFRESH_SECONDS + 0.1)
            assert await burst("heron5 egret") == [["memory/heron5.md"]] * 8
            old_text = await burst("+heron5 +dawn")  # its old text is gone from every answer
            assert old_text == [[]] * 8
            # The CLI opens the same file the server writes to now.
            status = cli(root, index, "status", "--json")
            assert status.returncode == 0, status.stderr
            assert json.loads(status.stdout)["files"] == 21
            write(root, "memory/heron5.md", "# Heron 5\n\nThe heron5 fishes at dawn.\n")
            assert cli(root, index, "index").returncode == 0


async def test_memory_get_names_the_citation_an_agent_got_wrong(tmp_path: Path):
    """A citation of bad line numbers was reported to the agent as a bad "path"."""
    root = keyword_ws(tmp_path / "ws")
    async with (
        stdio_client(mcp_params(root, tmp_path / "index.sqlite")) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        await session.initialize()
        for args in ({"citation": "MEMORY.md#L5-L2"}, {"path": "MEMORY.md#L0"}):
            got = await session.call_tool("memory_get", args)
            assert got.is_error and got.content[0].text.startswith("citation: "), args
        missing = await session.call_tool("memory_get", {"citation": "memory/gone.md#L2"})
        assert missing.is_error and missing.content[0].text.startswith("citation: ")
        outside = await session.call_tool("memory_get", {"path": "../x.md"})
        assert outside.is_error and outside.content[0].text.startswith("path: ")


def test_search_explain_in_text_and_json(ws: Path, tmp_path: Path):
    write(ws, ".memory-ls.toml", 'provider = "none"\n')
    index = tmp_path / "i.sqlite"
    text = cli(ws, index, "search", "token bucket Redis", "--explain")
    assert text.returncode == 0, text.stderr
    assert "plan -> retrieve -> score -> select -> present" in text.stdout
    assert "why: keyword #1 bm25" in text.stdout and "rank 1 (by score 1)" in text.stdout
    got = cli(ws, index, "search", "token bucket Redis", "--explain", "--json")
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    assert out["explain"][0]["counts"]["picked"] == len(out["results"]) > 0
    assert all(h["explain"]["score"] == h["score"] for h in out["results"])
    plain = json.loads(cli(ws, index, "search", "token bucket Redis", "--json").stdout)
    assert "explain" not in plain and [h["score"] for h in plain["results"]] == [
        h["score"] for h in out["results"]
    ]
