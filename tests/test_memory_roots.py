"""Agents' own memory folders outside the workspace (``memory.roots``): Claude Code's auto
memory (``~/.claude/projects/<project>/memory``) and OpenClaw's workspace
(``~/.openclaw/workspace``) indexed, searched, cited ``memory:<name>/...``, read by ``get``,
dated, checked (a root's ``MEMORY.md`` is its agent's index), watched, offered by ``sessions
detect`` and doctor; never written to. Real files under a fake home, the real CLI, the real
server over stdio."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from cli_util import doctor, run_cli
from conftest import write
from lsp_harness import (  # noqa: F401
    Start,
    definition_and_hover,
    eventually,
    file_created,
    open_doc,
    raw_request,
    search,
    start,
    status,
    uri,
    watched_patterns,
)
from lsprotocol import types

from memory_ls.engine import MemoryEngine
from memory_ls.hygiene.checks import agent_path
from memory_ls.search.citations import find_citations, parse_citation
from memory_ls.server.citations import check_citation
from memory_ls.server.watch import watch_dirs
from memory_ls.settings import MemoryRoot, SessionRoot, Settings, load
from memory_ls.sources.dates import file_date
from memory_ls.workspace import PathError

PROJECT = "-home-me-src-zebra"
CLAUDE_MEM = f".claude/projects/{PROJECT}/memory"
INDEX_LINES = (
    "# Memory\n"
    "\n"
    "- The okapi service deploys with a blue green rollout; see [deploy](deploy.md).\n"
    "- The quokka cache is flushed at midnight.\n"
)
CLAIM = "memory:openclaw/memory/2026-01-10.md"


def make_home(tmp_path: Path) -> Path:
    """A fake $HOME with Claude Code's auto memory and OpenClaw's workspace in their layouts."""
    home = tmp_path / "home"
    write(home, f"{CLAUDE_MEM}/MEMORY.md", INDEX_LINES)
    write(home, f"{CLAUDE_MEM}/deploy.md", "# Deploy\n\nRollbacks of okapi pin the image digest.\n")
    write(home, f".claude/projects/{PROJECT}/9f2c.jsonl", "{}\n")  # a transcript: not memory
    oc = home / ".openclaw/workspace"
    write(oc, "MEMORY.md", "# OpenClaw memory\n\nThe wombat queue runs on Kafka.\n")
    write(
        oc,
        "memory/2026-01-10.md",
        "# 2026-01-10\n\nMet with the wombat team.\nThe wombat queue moved to Redis streams.\n",
    )
    write(oc, "SOUL.md", "# Soul\n\nBe kind to the narwhal.\n")  # not a memory file by its globs
    return home


def make_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(
        ws, "MEMORY.md", f"# Work\n\n- Queue notes: {CLAIM}#L3-L4 and [runbook](memory/run.md).\n"
    )
    write(ws, "memory/run.md", "# Runbook\n\nRestart the pangolin worker.\n")
    return ws


def claude_root(home: Path, **kw: str) -> MemoryRoot:
    return MemoryRoot(str(home / CLAUDE_MEM), **kw)  # type: ignore[arg-type]


def openclaw_root(home: Path) -> MemoryRoot:
    return MemoryRoot(
        str(home / ".openclaw/workspace"), globs=["MEMORY.md", "memory.md", "memory/**/*.md"]
    )


def settings(*roots: MemoryRoot) -> Settings:
    s = Settings(provider="none")
    s.memory.roots = list(roots)
    return s


def engine(ws: Path, tmp_path: Path, s: Settings) -> MemoryEngine:
    e = MemoryEngine(ws, s, index_path=tmp_path / "idx.sqlite")
    e.sync("test")
    return e


def snapshot(folder: Path) -> dict[str, tuple[str, float]]:
    """Every entry below ``folder`` with its content hash and mtime: nothing may change."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            out[str(p.relative_to(folder))] = (digest, p.lstat().st_mtime)
    return out


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return make_home(tmp_path)


@pytest.fixture
def both(tmp_path: Path, home: Path):
    s = settings(claude_root(home, name="zebra"), openclaw_root(home))
    e = engine(make_ws(tmp_path), tmp_path, s)
    yield e
    e.close()


def test_roots_are_indexed_as_memory_with_readable_keys(both: MemoryEngine, home: Path) -> None:
    hit = both.search("okapi blue green rollout").results[0]
    assert hit.path == "memory:zebra/MEMORY.md" and hit.source == "memory"
    assert hit.citation.startswith("memory:zebra/MEMORY.md#L")
    assert hit.to_json(both.root)["uri"] == (home / CLAUDE_MEM / "MEMORY.md").as_uri()
    assert parse_citation(hit.citation) is not None
    hits = both.search("wombat redis streams").results
    assert hits[0].path == CLAIM and hits[0].source == "memory"
    assert both.search("wombat", path_prefix="memory:openclaw/").results
    assert both.search("narwhal kind").results == []  # SOUL.md is outside openclaw's globs
    st = both.status()
    assert st["rootProblems"] == [] and st["sessionRoots"] == []
    assert [r["name"] for r in st["memoryRoots"]] == ["zebra", "openclaw"]


def test_get_and_go_to_citation_resolve_root_notes(both: MemoryEngine, home: Path) -> None:
    ex = both.get(f"{CLAIM}#L3-L4")
    assert (ex.path, ex.from_line, ex.to_line, ex.total_lines) == (CLAIM, 3, 4, 4)
    assert ex.text == "Met with the wombat team.\nThe wombat queue moved to Redis streams."
    real = home / ".openclaw/workspace/memory/2026-01-10.md"
    assert ex.to_json(both.root)["uri"] == real.as_uri()
    assert both.get(str(real)).path == CLAIM  # an absolute path gets the same key
    assert both.get("memory:openclaw/memory/../MEMORY.md").path == "memory:openclaw/MEMORY.md"
    (_, _, cite) = find_citations(f"as noted in {CLAIM}#L3-L4, the queue moved.")[0]
    chk = check_citation(both, cite, None)
    assert chk.problem is None and chk.excerpt is not None and chk.excerpt.path == CLAIM


def test_dated_by_file_name_as_in_the_workspace(both: MemoryEngine) -> None:
    assert str(file_date(CLAIM, 0.0)) == "2026-01-10"
    for evergreen in (
        "memory:zebra/MEMORY.md",
        "memory:zebra/deploy.md",
        "memory:openclaw/MEMORY.md",
    ):
        assert file_date(evergreen, 1.7e9) is None, evergreen
    assert file_date("memory:zebra/2026-13-01-x.md", 1.7e9) is None  # no such date: evergreen
    # Date filters keep the dated note and leave the evergreen ones out, as in the workspace.
    assert [h.path for h in both.search("wombat after:2026-01-01").results] == [CLAIM]
    assert both.search("wombat before:2026-01-01").results == []
    assert both.search("okapi after:2000-01-01").results == []


def test_outside_roots_symlinks_and_hidden_notes_are_refused(
    both: MemoryEngine, home: Path, tmp_path: Path
) -> None:
    secret = write(tmp_path, "secret/s.md", "# Secret\n\nThe narwhal password is hunter2.\n")
    mem = home / CLAUDE_MEM
    (mem / "link.md").symlink_to(secret)
    (mem / "linked-dir").symlink_to(secret.parent, target_is_directory=True)
    write(mem, ".hidden/h.md", "# narwhal hidden\n")
    write(mem, ".draft.md", "# narwhal draft\n")
    both.sync("test")
    assert both.search("narwhal").results == []
    for bad in (
        str(secret),  # outside the workspace and every root
        "memory:zebra/link.md",
        "memory:zebra/linked-dir/s.md",
        str(mem / "linked-dir" / "s.md"),
        "memory:zebra/../../../../secret/s.md",
        "memory:zebra/.hidden/h.md",
        "memory:zebra/.draft.md",
        "memory:nobody/MEMORY.md",  # no root by that name
        "memory:openclaw/SOUL.md",  # not matched by the root's globs
        f"memory:zebra/../{PROJECT}/9f2c.jsonl",
    ):
        with pytest.raises(PathError):
            both.get(bad)
    with pytest.raises(PathError, match="symlinks"):
        both.get("memory:zebra/link.md")
    with pytest.raises(PathError, match="no memory.roots entry is named 'nobody'"):
        both.get("memory:nobody/MEMORY.md")
    assert not both.set_document("memory:zebra/linked-dir/s.md", "# x\n")
    chk = check_citation(both, parse_citation("memory:zebra/link.md#L1"), None)  # type: ignore[arg-type]
    assert chk.excerpt is None


def test_bad_roots_are_named_and_the_rest_indexed(home: Path, tmp_path: Path) -> None:
    ws = make_ws(tmp_path)
    write(ws, "agent-memory/MEMORY.md", "# inside\n\nThe pangolin is inside the workspace.\n")
    roots = [
        claude_root(home, name="zebra"),
        MemoryRoot(str(home / "gone"), name="gone"),
        MemoryRoot(str(home / CLAUDE_MEM / "MEMORY.md"), name="file"),
        MemoryRoot("relative/memory"),
        MemoryRoot(str(ws / "agent-memory")),  # inside the workspace
        MemoryRoot(str(ws / "memory"), name="ws-memory"),  # the workspace's own memory/
        MemoryRoot(str(ws)),  # the workspace itself
        MemoryRoot(str(tmp_path)),  # holds the workspace
        MemoryRoot(str(home / "x"), name="bad name!"),
        MemoryRoot(str(home / "y" / "memory"), name="zebra"),  # the name is taken
    ]
    e = engine(ws, tmp_path, settings(*roots))
    problems = "\n".join(e.status()["rootProblems"])
    e.sync("again")  # the same problems a second time do not crash either
    assert "memory.roots gone (" in problems and "no such folder" in problems
    assert "memory.roots file (" in problems and "is a file" in problems
    assert "relative/memory: not absolute" in problems
    assert f"{ws / 'agent-memory'}: is inside the workspace folder" in problems
    assert f"{ws / 'memory'}: is inside the workspace folder" in problems
    assert f"{ws}: is the workspace folder" in problems
    assert f"{tmp_path}: holds the workspace folder" in problems
    assert "name 'bad name!'" in problems
    assert "the name 'zebra' is taken" in problems
    # The good root is read; the workspace's notes are read once, under their workspace keys.
    assert e.search("okapi blue green").results[0].path == "memory:zebra/MEMORY.md"
    assert [h.path for h in e.search("pangolin worker").results] == ["memory/run.md"]
    # Configured and usable (a missing one may come back); the refused ones are not listed.
    assert [r["name"] for r in e.status()["memoryRoots"]] == ["zebra", "gone", "file"]
    e.close()


def test_roots_need_memory_in_sources(home: Path, tmp_path: Path) -> None:
    s = settings(claude_root(home))
    s.sources = ["sessions"]
    e = engine(make_ws(tmp_path), tmp_path, s)
    assert (
        "memory.roots is set but `sources` does not include memory" in e.status()["rootProblems"][0]
    )
    with pytest.raises(PathError):
        e.get("memory:claude-src-zebra/MEMORY.md")
    e.close()


def test_a_memory_root_inside_a_sessions_root_keeps_its_kind(home: Path, tmp_path: Path) -> None:
    """Claude Code keeps a project's auto memory in the folder of its transcripts."""
    line = {"type": "user", "message": {"role": "user", "content": "the capybara cron"}}
    write(home, f".claude/projects/{PROJECT}/9f2c.jsonl", json.dumps(line) + "\n")
    s = settings(claude_root(home))
    s.sources = ["memory", "sessions"]
    s.sessions.roots = [SessionRoot(str(home / ".claude/projects"))]
    e = engine(make_ws(tmp_path), tmp_path, s)
    key = "memory:claude-home-me-src-zebra/MEMORY.md"  # the default name of a project's memory
    assert [h.path for h in e.search("quokka midnight").results] == [key]
    assert e.get(str(home / CLAUDE_MEM / "MEMORY.md")).path == key
    hit = e.search("capybara cron").results[0]
    assert (hit.path, hit.source) == (f"sessions:claude/{PROJECT}/9f2c.jsonl", "sessions")
    e.close()


def test_check_runs_over_roots_and_their_index(home: Path, tmp_path: Path) -> None:
    """load-cap: a root's MEMORY.md is Claude Code's always-loaded index; orphan: a topic file
    it never links; the workspace's MEMORY.md is not the index of a root's files."""
    mem = home / CLAUDE_MEM
    write(mem, "MEMORY.md", INDEX_LINES + "".join(f"- fact number {n}\n" for n in range(1, 231)))
    write(mem, "unlinked.md", "# Unlinked\n\nThe ibis feeder is refilled on Mondays.\n")
    ws = make_ws(tmp_path)
    write(
        ws,
        ".memory-ls.toml",
        'provider = "none"\n\n'
        f'[[memory.roots]]\npath = "~/{CLAUDE_MEM}"\nname = "zebra"\n\n'
        '[[memory.roots]]\npath = "~/.openclaw/workspace"\n'
        'globs = ["MEMORY.md", "memory/**/*.md"]\n',
    )
    before = snapshot(home)
    done = run_cli(
        "check", "-w", str(ws), "--index", str(tmp_path / "i.sqlite"), "--json", home=home
    )
    assert done.returncode == 1, done.stderr
    found = {(f["code"], f["path"]): f for f in json.loads(done.stdout)["findings"]}
    cap = found[("load-cap", "memory:zebra/MEMORY.md")]
    assert (
        cap["startLine"] == 201 and "Claude Code loads only the first 200 lines" in cap["message"]
    )
    orphan = found[("orphan", "memory:zebra/unlinked.md")]
    assert orphan["related"] == [{"path": "memory:zebra/MEMORY.md", "startLine": 1, "endLine": 1}]
    # deploy.md is linked from its root's index; the workspace's MEMORY.md is no index of
    # the roots' notes, and the OpenClaw root's dated note is a log, not a topic file.
    assert ("orphan", "memory:zebra/deploy.md") not in found
    assert not any(c == "orphan" and p.startswith("memory:openclaw/") for c, p in found)
    assert snapshot(home) == before  # read only: nothing under a root was written or touched
    assert agent_path("memory:zebra/MEMORY.md") == "MEMORY.md"
    assert agent_path("memory/MEMORY.md") == "memory/MEMORY.md"


def test_detect_offers_memory_folders_and_the_snippet_works(home: Path, tmp_path: Path) -> None:
    ws = make_ws(tmp_path)
    home_project = re.sub(r"[^A-Za-z0-9]", "-", str(home)) + "-src-app"  # Claude's encoding
    write(home, f".claude/projects/{home_project}/memory/MEMORY.md", "# App\n\nThe ibex build.\n")
    out = run_cli("sessions", "detect", home=home)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "[[memory.roots]]" in text and "[[sessions.roots]]" in text
    assert 'path = "~/.openclaw/workspace"' in text
    assert f'path = "~/{CLAUDE_MEM}"' in text
    assert (
        "# openclaw: 2 notes (~/.openclaw/workspace: MEMORY.md, memory/*.md), "
        "cited memory:openclaw/" in text
    )
    # A project under the home folder is named without it: ~/src/app -> claude-src-app.
    assert (
        "cited memory:claude-src-app/" in text and "cited memory:claude-home-me-src-zebra/" in text
    )
    assert not (ws / ".memory-ls.toml").exists()  # it enables nothing
    write(ws, ".memory-ls.toml", 'provider = "none"\n' + text)
    idx = str(tmp_path / "d.sqlite")
    got = run_cli("get", f"{CLAIM}#L4", "-w", str(ws), "--index", idx, home=home)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "The wombat queue moved to Redis streams."
    got = run_cli("search", "ibex build", "-w", str(ws), "--index", idx, "--json", home=home)
    assert json.loads(got.stdout)["results"][0]["path"] == "memory:claude-src-app/MEMORY.md"
    got = run_cli("get", "memory:openclaw/SOUL.md", "-w", str(ws), "--index", idx, home=home)
    assert got.returncode == 2 and "not matched by its root's globs" in got.stderr
    _, checks, _ = doctor(ws, home)
    detail = checks["agents"]["detail"]
    assert f"memory folder openclaw: {home / '.openclaw/workspace'} (2 notes)" in detail
    assert (
        "memory folders: openclaw, claude-home-me-src-zebra, claude-src-app"
        in checks["agents"]["summary"]
    )


def test_doctor_says_when_memory_folders_are_not_indexed(home: Path, tmp_path: Path) -> None:
    _, checks, _ = doctor(make_ws(tmp_path), home)
    assert "memory.roots is empty" in checks["agents"]["detail"]


def test_toml_roots_with_tilde(home: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    ws = make_ws(tmp_path)
    write(
        ws,
        ".memory-ls.toml",
        'provider = "none"\n\n[[memory.roots]]\npath = "~/.openclaw/workspace"\n',
    )
    s, problems = load(ws)
    assert problems == [] and s.memory.roots == [MemoryRoot("~/.openclaw/workspace")]
    e = engine(ws, tmp_path, s)
    assert e.get(f"{CLAIM}#L4").text == "The wombat queue moved to Redis streams."
    assert watch_dirs(ws, s)[-1] == (home / ".openclaw/workspace", True)  # the server's watcher
    e.close()
    write(ws, ".memory-ls.toml", "[[memory.roots]]\nglobs = []\n")
    _, problems = load(ws)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "memory.roots: an entry without a path; ignored"
    ]


def test_mcp_resources_list_and_read_root_notes(both: MemoryEngine) -> None:
    from memory_ls.mcp.resources import list_resources, read_resource

    uris = [str(r.uri) for r in list_resources(both)]
    assert "memory://memory%3Aopenclaw/memory/2026-01-10.md" in uris
    assert (
        "Redis streams"
        in read_resource(both, "memory://memory%3Aopenclaw/memory/2026-01-10.md").text
    )
    with pytest.raises(PathError):
        read_resource(both, "memory://memory%3Azebra/../../../../etc/passwd.md")


async def test_editor_opens_cited_root_notes_and_watches_roots(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Go to definition on a ``memory:openclaw/...#L3-L4`` citation opens the note itself; the
    roots are registered with the client's watcher and a note it reports is searchable."""
    home = make_home(tmp_path)
    ws = make_ws(tmp_path)
    oc = home / ".openclaw/workspace"
    write(
        ws,
        ".memory-ls.toml",
        f'[[memory.roots]]\npath = "{oc}"\nglobs = ["MEMORY.md", "memory/**/*.md"]\n',
    )
    client = await start(ws)
    st = await status(client)
    assert st["rootProblems"] == [] and st["memoryRoots"][0]["name"] == "openclaw"
    real = oc / "memory/2026-01-10.md"

    open_doc(client, ws / "MEMORY.md")
    locs, hov = await definition_and_hover(client, ws / "MEMORY.md", 2, "memory:", 12)
    assert locs and locs[0].uri == uri(real)
    assert (locs[0].range.start.line, locs[0].range.end.line) == (2, 4)
    assert hov and "Redis streams" in hov.contents.value and CLAIM in hov.contents.value

    res = await search(client, "wombat redis streams")
    assert res["results"][0]["path"] == CLAIM and res["results"][0]["uri"] == uri(real)

    assert {"baseUri": uri(oc), "pattern": "memory/**/*.md"} in watched_patterns(client)
    file_created(
        client,
        write(oc, "memory/2026-02-01.md", "# 2026-02-01\n\nThe capybara cron runs hourly.\n"),
    )
    hits = (await search(client, "capybara cron"))["results"]
    assert [h["path"] for h in hits] == ["memory:openclaw/memory/2026-02-01.md"]


async def test_editor_diagnostics_of_root_notes_sit_on_the_notes_themselves(
    start: Start,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A root's ``MEMORY.md`` past Claude Code's cap gets its ``load-cap`` diagnostic at the
    file's own URI (not ``<workspace>/memory:<name>/...``), and no code action makes a file
    under the root (roots are read-only)."""
    home = make_home(tmp_path)
    ws = make_ws(tmp_path)
    oc = home / ".openclaw/workspace"
    write(oc, "MEMORY.md", "".join(f"- Fact {i} of the wombat queue.\n" for i in range(230)))
    write(ws, ".memory-ls.toml", f'[[memory.roots]]\npath = "{oc}"\nglobs = ["MEMORY.md"]\n')
    client = await start(ws, init_options={"provider": "none"})
    real = uri(oc / "MEMORY.md")

    async def flagged() -> bool:
        return any(d.code == "load-cap" for d in client.diagnostics.get(real, []))

    await eventually(flagged)
    assert not [u for u in client.diagnostics if "memory:" in u]
    (d,) = [d for d in client.diagnostics[real] if d.code == "load-cap"]
    assert d.range.start.line == 200
    open_doc(client, oc / "MEMORY.md")
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=real),
        range=d.range,
        context=types.CodeActionContext(diagnostics=[d]),
    )
    conv = client.protocol._converter
    actions = await raw_request(client, "textDocument/codeAction", conv.unstructure(params))
    assert not [a for a in actions or [] if "topic file" in a["title"]]
