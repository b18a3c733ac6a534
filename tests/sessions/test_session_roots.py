"""Transcript folders outside the workspace (``sessions.roots``): indexing, the
``sessions:<name>/`` keys in results and citations, path safety, problem states, and
``memory-ls sessions detect``. Real files in tmp folders; the real home is never read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write
from lsp_harness import (  # noqa: F401
    Start,
    definition_and_hover,
    file_created,
    open_doc,
    search,
    start,
    status,
    uri,
    watched_patterns,
)
from lsprotocol import types

from memory_ls.engine import MemoryEngine
from memory_ls.search.citations import find_citations, parse_citation
from memory_ls.server.citations import check_citation
from memory_ls.settings import SessionRoot, Settings, load
from memory_ls.workspace import PathError

PROJECT = "-home-me-zebra"
KEY = f"sessions:claude/{PROJECT}/9f2c.jsonl"


def claude_line(role: str, text: str) -> str:
    content = text if role == "user" else [{"type": "text", "text": text}]
    rec = {"type": role, "message": {"role": role, "content": content}, "sessionId": "9f2c"}
    return json.dumps(rec) + "\n"


def transcript() -> str:
    return (
        claude_line("user", "How do we deploy the okapi service?")
        + claude_line("assistant", "The okapi service deploys with a blue green rollout.")
        + claude_line("user", "And the rollback?")
        + claude_line("assistant", "Rollbacks of okapi pin the previous image digest.")
    )


def make_home(tmp_path: Path) -> Path:
    """A fake $HOME with the three agents' folders, in their real layouts."""
    home = tmp_path / "home"
    write(home, f".claude/projects/{PROJECT}/9f2c.jsonl", transcript())
    write(
        home,
        ".codex/sessions/2026/01/05/rollout-2026-01-05T10-00-00-abc.jsonl",
        claude_line("user", "codex talk about the quokka cache"),
    )
    write(
        home,
        ".openclaw/agents/main/sessions/s1.jsonl",
        claude_line("user", "openclaw talk about the wombat queue"),
    )
    write(home, ".openclaw/agents/main/agent/notes.jsonl", "{}\n")  # not under sessions/
    return home


def make_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", f"# Memory\n\nDeploy notes: {KEY}#L2-L3 and okapi basics.\n")
    return ws


def settings(*roots: SessionRoot) -> Settings:
    s = Settings(provider="none", sources=["memory", "sessions"])
    s.sessions.roots = list(roots)
    return s


def engine(ws: Path, tmp_path: Path, s: Settings) -> MemoryEngine:
    e = MemoryEngine(ws, s, index_path=tmp_path / "idx.sqlite")
    e.sync("test")
    return e


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return make_home(tmp_path)


@pytest.fixture
def claude(tmp_path: Path, home: Path):
    e = engine(make_ws(tmp_path), tmp_path, settings(SessionRoot(str(home / ".claude/projects"))))
    yield e
    e.close()


def test_root_is_indexed_with_a_readable_key(claude: MemoryEngine, home: Path) -> None:
    hit = claude.search("okapi rollback digest").results[0]
    assert hit.path == KEY and hit.source == "sessions"
    assert hit.citation.startswith(KEY + "#L")
    assert (hit.start_line, hit.end_line) == (1, 4)  # JSONL lines
    out = hit.to_json(claude.root)
    assert out["uri"] == (home / ".claude/projects" / PROJECT / "9f2c.jsonl").as_uri()
    assert parse_citation(hit.citation) is not None
    assert claude.search("okapi", path_prefix="sessions:claude/").results
    st = claude.status()
    assert st["chunksBySource"]["sessions"] >= 1 and st["rootProblems"] == []
    assert st["sessionRoots"][0]["name"] == "claude"


def test_get_by_citation_path_and_absolute_path(claude: MemoryEngine, home: Path) -> None:
    ex = claude.get(f"{KEY}#L2-L3")
    assert (ex.path, ex.from_line, ex.to_line, ex.total_lines) == (KEY, 2, 3, 4)
    assert "blue green" in ex.text and "And the rollback?" in ex.text and "How do" not in ex.text
    assert ex.to_json(claude.root)["uri"].endswith(f"/{PROJECT}/9f2c.jsonl")
    real = home / ".claude/projects" / PROJECT / "9f2c.jsonl"
    assert claude.get(str(real), start=4).path == KEY  # an absolute path gets the same key
    # A citation found in prose, with the prefix, resolves too.
    (_, _, cite) = find_citations(f"see {KEY}#L2-L3.")[0]
    chk = check_citation(claude, cite, None)
    assert chk.problem is None and chk.excerpt is not None and chk.excerpt.path == KEY


def test_outside_roots_and_symlinks_are_refused(
    claude: MemoryEngine, home: Path, tmp_path: Path
) -> None:
    secret = write(tmp_path, "secret/s.jsonl", claude_line("user", "narwhal password"))
    projects = home / ".claude/projects"
    (projects / PROJECT / "link.jsonl").symlink_to(secret)
    (projects / "linked-dir").symlink_to(secret.parent, target_is_directory=True)
    write(projects, ".hidden/h.jsonl", claude_line("user", "narwhal hidden"))
    claude.sync("test")
    assert claude.search("narwhal").results == []
    for bad in (
        str(secret),  # outside the workspace and every root
        str(home / ".codex/sessions/2026/01/05/rollout-2026-01-05T10-00-00-abc.jsonl"),
        f"sessions:claude/{PROJECT}/link.jsonl",
        "sessions:claude/linked-dir/s.jsonl",
        str(projects / "linked-dir" / "s.jsonl"),
        "sessions:claude/../../../secret/s.jsonl",
        "sessions:claude/.hidden/h.jsonl",
        "sessions:codex/2026/01/05/x.jsonl",  # no root by that name
        "sessions:claude/" + PROJECT + "/../../x.md",
    ):
        with pytest.raises(PathError):
            claude.get(bad)
    with pytest.raises(PathError, match="symlinks"):
        claude.get(f"sessions:claude/{PROJECT}/link.jsonl")
    assert not claude.set_document("sessions:claude/linked-dir/s.jsonl", "{}\n")
    chk = check_citation(claude, parse_citation("sessions:claude/linked-dir/s.jsonl#L1"), None)  # type: ignore[arg-type]
    assert chk.excerpt is None


def test_roots_need_sessions_in_sources(home: Path, tmp_path: Path) -> None:
    s = settings(SessionRoot(str(home / ".claude/projects")))
    s.sources = ["memory"]
    e = engine(make_ws(tmp_path), tmp_path, s)
    assert e.search("okapi blue green").results[0].path == "MEMORY.md"
    assert all(h.source == "memory" for h in e.search("okapi").results)
    assert "does not include sessions" in e.status()["rootProblems"][0]
    with pytest.raises(PathError):
        e.get(KEY)
    e.close()


def test_problem_roots_are_named_and_the_rest_indexed(home: Path, tmp_path: Path) -> None:
    locked = home / "locked"
    write(locked, "p/a.jsonl", claude_line("user", "locked away"))
    roots = [
        SessionRoot(str(home / ".claude/projects")),
        SessionRoot(str(home / "gone"), name="gone"),
        SessionRoot(str(home / ".claude/projects" / PROJECT / "9f2c.jsonl"), name="file"),
        SessionRoot(str(locked)),
        SessionRoot("relative/path"),
        SessionRoot(str(home / "x" / "projects")),  # the default name "projects"...
        SessionRoot(str(home / "y" / "projects")),  # ...is then taken
        SessionRoot(str(home / "z"), name="bad name!"),
        SessionRoot(str(home / ("x" * 300)), name="long"),  # unreadable even for root
    ]
    locked.chmod(0)
    try:
        e = engine(make_ws(tmp_path), tmp_path, settings(*roots))
        problems = e.status()["rootProblems"]
        e.sync("again")  # a second sync with the same problems does not crash either
        assert e.search("okapi rollback digest").results[0].path == KEY
    finally:
        locked.chmod(0o755)
    text = "\n".join(problems)
    assert "sessions.roots gone (" in text and "no such folder" in text
    assert "sessions.roots file (" in text and "is a file" in text
    if os.geteuid() != 0:  # root reads anything
        assert "sessions.roots locked (" in text and "cannot read" in text
    assert "sessions.roots long (" in text and "cannot read it (File name too long)" in text
    assert "relative/path: not absolute" in text
    assert "the name 'projects' is taken" in text
    assert "name 'bad name!'" in text
    e.close()


def test_a_root_that_disappears_leaves_the_index(claude: MemoryEngine, home: Path) -> None:
    assert claude.search("okapi rollback digest").results[0].path == KEY
    shutil.rmtree(home / ".claude")
    report = claude.sync("gone")
    assert report.removed == 1
    assert [h.path for h in claude.search("okapi").results] == ["MEMORY.md"]
    assert "no such folder" in claude.status()["rootProblems"][0]
    with pytest.raises(PathError, match="no such file"):
        claude.get(KEY)


def test_default_names_and_globs(home: Path, tmp_path: Path) -> None:
    s = settings(
        SessionRoot(str(home / ".claude/projects")),
        SessionRoot(str(home / ".codex/sessions")),
        SessionRoot(str(home / ".openclaw/agents"), globs=["*/sessions/*.jsonl"]),
    )
    e = engine(make_ws(tmp_path), tmp_path, s)
    keys = sorted(h.path for q in ("quokka", "wombat") for h in e.search(q).results)
    assert keys == [
        "sessions:codex/2026/01/05/rollout-2026-01-05T10-00-00-abc.jsonl",
        "sessions:openclaw/main/sessions/s1.jsonl",
    ]
    with pytest.raises(PathError):  # outside the root's globs
        e.get("sessions:openclaw/main/agent/notes.jsonl")
    e.close()


def test_toml_roots_with_tilde(home: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    ws = make_ws(tmp_path)
    write(
        ws,
        ".memory-ls.toml",
        'sources = ["memory", "sessions"]\nprovider = "none"\n\n'
        '[[sessions.roots]]\npath = "~/.claude/projects"\nglobs = ["**/*.jsonl"]\n',
    )
    s, problems = load(ws)
    assert problems == [] and s.sessions.roots == [SessionRoot("~/.claude/projects")]
    e = engine(ws, tmp_path, s)
    assert e.get(f"{KEY}#L4").text.startswith("Assistant: Rollbacks of okapi")
    e.close()


def run_cli(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "memory_ls", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_detect_prints_a_snippet_that_works(home: Path, tmp_path: Path) -> None:
    ws = make_ws(tmp_path)
    out = run_cli("sessions", "detect", home=home, cwd=ws)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for path in ("~/.claude/projects", "~/.codex/sessions", "~/.openclaw/agents"):
        assert f'path = "{path}"' in text
    assert "# claude: 1 transcript (~/.claude/projects/<project>/*.jsonl)" in text
    assert "# openclaw: 1 transcript (" in text
    assert not (ws / ".memory-ls.toml").exists()  # it enables nothing
    # Pasted into the workspace's settings, it works as printed.
    write(ws, ".memory-ls.toml", 'provider = "none"\n' + text)
    got = run_cli("get", f"{KEY}#L2", home=home, cwd=ws)
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith("Assistant: The okapi service deploys")
    got = run_cli("get", "sessions:openclaw/main/agent/notes.jsonl", home=home, cwd=ws)
    assert got.returncode == 2 and "not matched by its root's globs" in got.stderr
    # A missing root after the fact: a status problem, not a crash.
    shutil.rmtree(home / ".codex")
    st = run_cli("status", home=home, cwd=ws)
    assert st.returncode == 0, st.stderr
    assert "problem     sessions.roots codex (~/.codex/sessions): no such folder" in st.stdout


def test_detect_with_nothing_found(tmp_path: Path) -> None:
    empty = tmp_path / "empty-home"
    empty.mkdir()
    out = run_cli("sessions", "detect", home=empty, cwd=tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    assert "no agent transcript folders" in out.stderr


async def test_editor_opens_the_cited_transcript(start: Start, tmp_path: Path) -> None:  # noqa: F811
    """Go to definition on a ``sessions:claude/...#L2-L3`` citation opens the transcript file
    itself at those JSONL lines; hover shows them; a new transcript seen by the client's
    watcher is searchable under its key."""
    home = make_home(tmp_path)
    ws = make_ws(tmp_path)
    projects = home / ".claude/projects"
    write(
        ws,
        ".memory-ls.toml",
        f'sources = ["memory", "sessions"]\n\n[[sessions.roots]]\npath = "{projects}"\n',
    )
    client = await start(ws)
    assert (await status(client))["rootProblems"] == []
    real = projects / PROJECT / "9f2c.jsonl"

    u = open_doc(client, ws / "MEMORY.md")
    td = types.TextDocumentIdentifier(uri=u)
    locs, hov = await definition_and_hover(client, ws / "MEMORY.md", 2, "sessions:", 12)
    assert locs and locs[0].uri == uri(real)
    assert (locs[0].range.start.line, locs[0].range.end.line) == (1, 3)
    assert hov and "blue green" in hov.contents.value and KEY in hov.contents.value
    links = await client.text_document_document_link_async(
        types.DocumentLinkParams(text_document=td)
    )
    assert [link.target for link in links] == [uri(real) + "#L2-L3"]

    res = await search(client, "okapi rollback digest")
    assert res["results"][0]["path"] == KEY and res["results"][0]["uri"] == uri(real)

    assert {"baseUri": uri(projects), "pattern": "**/*.jsonl"} in watched_patterns(client)
    file_created(
        client, write(projects, f"{PROJECT}/7e1d.jsonl", claude_line("user", "the capybara cron"))
    )
    hits = (await search(client, "capybara cron"))["results"]
    assert [h["path"] for h in hits] == [f"sessions:claude/{PROJECT}/7e1d.jsonl"]


def test_a_root_inside_the_workspace_keeps_its_key(tmp_path: Path) -> None:
    ws = make_ws(tmp_path)
    write(ws, "agent-logs/a/1.jsonl", claude_line("user", "the pangolin ledger"))
    e = engine(ws, tmp_path, settings(SessionRoot(str(ws / "agent-logs"), globs=["[a-c]/*.jsonl"])))
    assert e.search("pangolin").results[0].path == "sessions:agent-logs/a/1.jsonl"
    assert e.get(str(ws / "agent-logs/a/1.jsonl")).path == "sessions:agent-logs/a/1.jsonl"
    assert e.get("sessions:agent-logs/b/../a/1.jsonl").path == "sessions:agent-logs/a/1.jsonl"
    assert e.get(str(ws / "MEMORY.md")).path == "MEMORY.md"
    e.close()


def test_a_root_transcript_the_workspace_globs_match_too_is_indexed_once(tmp_path: Path) -> None:
    # sessions.globs found it under its workspace path and the root under the root's key: two
    # copies of every chunk in the results.
    ws = make_ws(tmp_path)
    write(ws, "agent-logs/a/1.jsonl", claude_line("user", "the pangolin ledger"))
    s = settings(SessionRoot(str(ws / "agent-logs"), globs=["[a-c]/*.jsonl"]))
    s.sessions.globs = ["agent-logs/**/*.jsonl"]
    e = engine(ws, tmp_path, s)
    assert [h.path for h in e.search("pangolin").results] == ["sessions:agent-logs/a/1.jsonl"]
    assert [f.path for f in e.workspace.discover() if "pangolin" in f.abs_path.read_text()] == [
        "sessions:agent-logs/a/1.jsonl"
    ]
    e.close()


def test_mcp_resources_list_and_read_root_transcripts(claude: MemoryEngine) -> None:
    from memory_ls.mcp.resources import list_resources, read_resource

    uris = [str(r.uri) for r in list_resources(claude)]
    rooted = [u for u in uris if "claude" in u]
    assert rooted == [f"memory://sessions%3Aclaude/{PROJECT}/9f2c.jsonl"]
    assert "blue green" in read_resource(claude, rooted[0]).text
    with pytest.raises(PathError):
        read_resource(claude, "memory://sessions%3Aclaude/../../etc/passwd.jsonl")
