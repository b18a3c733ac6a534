"""The OpenClaw memory plugin (integrations/openclaw) in the real OpenClaw, without a chat model.

OpenClaw ``2026.9.6`` (the version integrations/openclaw/NOTES.md was read from) is installed from
npm into ``~/.cache/memory-ls-openclaw`` (``$MEMORY_LS_OPENCLAW_CACHE``), outside the clone, and run
on the Node 24 of ``editors/vscode/e2e/install.sh --node-only`` (OpenClaw needs Node >= 24.16). A
temporary OpenClaw home gets the plugin with ``openclaw plugins install <folder>`` (which selects
``plugins.slots.memory``), the workspace in OpenClaw's layout (``MEMORY.md``,
``memory/YYYY-MM-DD.md``) and ``plugins.entries.memory-core.enabled: false`` (the guide's one
setting). Then OpenClaw's own code runs:

- ``openclaw status --json --all``: the memory status OpenClaw prints, through the slot;
- ``openclaw_drive.mjs``: the agent tools as OpenClaw's plugin loader and tool resolver assemble
  them for a run, and the slot's manager as its memory host resolves it: English and Chinese
  searches, ``memory_get`` of the cited range, a note written after start found by a later search;
- a session transcript in OpenClaw's format (tests/support/transcript_fixtures.py) under the
  state folder's ``agents/main/sessions/``, with ``memory.search.sources`` holding ``sessions``:
  a line of it found by ``memory_search`` (``corpus=sessions``) and read back by ``memory_get``;
- the same with ``memory-ls`` off ``PATH``, with a ``memory-ls`` that never answers, with one
  older than the plugin's minimum, with no embedding model, while the first sync of a large
  workspace runs, and with paths outside the workspace: the reason in the tool result and in
  the status, quickly, and no traceback.

The memory-ls is this Python's. Without npm or the registry the tests skip saying how to get
them; under ``CI`` they fail instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from openclaw_setup import (
    DRIVER,
    MEMORY_LS,
    OPENCLAW_VERSION,
    PLUGIN,
    BuildFailed,
    Missing,
    build_plugin,
    node24,
    npm,
    openclaw_env,
    openclaw_package,
    plugin_folder,
)
from transcript_fixtures import jsonl, question
from transcript_fixtures import openclaw as openclaw_transcript

HOW = (
    "needs npm and the npm registry: Node 24 comes from editors/vscode/e2e/install.sh --node-only, "
    f"openclaw@{OPENCLAW_VERSION} from npm into ~/.cache/memory-ls-openclaw"
)


def _missing(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"OpenClaw test in CI: {why}")
    pytest.skip(f"{why} ({HOW})")


@contextlib.contextmanager
def _needed() -> Iterator[None]:
    """What openclaw_setup cannot have here: a skip outside CI, a failure in CI."""
    try:
        yield
    except Missing as missing:
        _missing(str(missing))
    except BuildFailed as failed:
        pytest.fail(str(failed))


WORKSPACE = {
    "MEMORY.md": "# Memory\n\n## Decisions\n\n"
    "- We chose PostgreSQL for the payments ledger because of its row locks.\n"
    "- The staging cluster runs in Frankfurt.\n",
    "memory/2026-07-01.md": "# 2026-07-01\n\n会议决定：下周三发布新版本，由王芳负责回滚预案。\n\n"
    "Also: the design review moved to Thursday.\n",
    "memory/2026-07-02.md": "# 2026-07-02\n\n"
    "Invoice export was slow: the nightly job scanned every row.\n",
}


class OpenClaw:
    """A temporary OpenClaw home with the plugin installed and the slot selected."""

    def __init__(self, root: Path, node: Path, package: Path) -> None:
        self.root = root
        self.node = node
        self.package = package
        self.home = root / "home"
        self.workspace = root / "workspace"
        self.config_path = self.home / ".openclaw" / "openclaw.json"
        self.home.mkdir(parents=True)
        for rel, text in WORKSPACE.items():
            (self.workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.workspace / rel).write_text(text, encoding="utf-8")

    def env(self, *, with_memory_ls: bool = True) -> dict[str, str]:
        return openclaw_env(self.root, self.home, self.node, with_memory_ls=with_memory_ls)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.node), str(self.package / "openclaw.mjs"), *args],
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def configure(
        self,
        plugin_config: dict[str, object] | None = None,
        memory_search: dict[str, object] | None = None,
        workspace: Path | None = None,
    ) -> None:
        config = json.loads(self.config_path.read_text())
        config.setdefault("agents", {}).setdefault("defaults", {})["workspace"] = str(
            workspace or self.workspace
        )
        config.pop("memory", None)
        if memory_search:
            config["memory"] = {"search": memory_search}
        entries = config["plugins"]["entries"]
        entries["memory-core"] = {"enabled": False}
        entries["memory-ls"] = {
            "enabled": True,
            **({"config": plugin_config} if plugin_config else {}),
        }
        self.config_path.write_text(json.dumps(config, indent=2))

    def drive(
        self,
        steps: list[dict[str, object]],
        *,
        with_memory_ls: bool = True,
        timeout: float = 90,
        env: dict[str, str] | None = None,
    ) -> dict:
        steps_file = self.root / f"steps-{time.monotonic_ns()}.json"
        steps_file.write_text(json.dumps(steps, ensure_ascii=False), encoding="utf-8")
        proc = subprocess.run(
            [str(self.node), str(DRIVER), str(self.package), str(steps_file)],
            cwd=self.root,
            env={**self.env(with_memory_ls=with_memory_ls), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def node() -> Path:
    with _needed():
        return node24()
    raise AssertionError  # unreachable: _needed skips or fails


@pytest.fixture(scope="module")
def built(node: Path) -> Path:
    """The plugin folder, built (npm ci, npm run build)."""
    with _needed():
        build_plugin(node.parent)
    return PLUGIN


@pytest.fixture(scope="module")
def openclaw(tmp_path_factory: pytest.TempPathFactory, node: Path, built: Path) -> OpenClaw:
    assert MEMORY_LS.exists(), f"no memory-ls beside {sys.executable}: pip install -e ."
    with _needed():
        package = openclaw_package(node.parent)
    oc = OpenClaw(tmp_path_factory.mktemp("openclaw"), node, package)
    with plugin_folder():
        installed = oc.cli("plugins", "install", str(PLUGIN), "--force", "--accept-capabilities")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    config = json.loads(oc.config_path.read_text())
    assert config["plugins"]["slots"]["memory"] == "memory-ls", config
    oc.configure()
    return oc


def _step(answer: dict, index: int) -> dict:
    step = answer["steps"][index]
    assert step["ok"], step
    return step


def test_tools_answer_from_memory_ls(openclaw: OpenClaw) -> None:
    new_note = openclaw.workspace / "memory" / "2026-07-03.md"
    answer = openclaw.drive(
        [
            {
                "op": "tool",
                "name": "memory_search",
                "params": {"query": "which database for the payments ledger"},
            },
            {"op": "tool", "name": "memory_get", "params": {"path": "$cited"}},
            {"op": "tool", "name": "memory_search", "params": {"query": "什么时候发布新版本"}},
            {
                "op": "tool",
                "name": "memory_get",
                "params": {"path": "memory/2026-07-01.md", "from": 3, "lines": 1},
            },
            {"op": "tool", "name": "memory_get", "params": {"path": "memory/nope.md"}},
            {
                "op": "write",
                "path": str(new_note),
                "text": "# 2026-07-03\n\nThe zeppelin hangar lease renews in March.\n",
            },
            {
                "op": "until",
                "query": "zeppelin hangar lease",
                "path": "memory/2026-07-03.md",
                "withinMs": 5000,
            },
            {"op": "manager", "method": "search", "query": "Frankfurt staging cluster"},
        ]
    )
    tools = {t["name"]: t for t in answer["tools"]}
    # The slot owner's tools, with memory-core's names and parameters (memory-core is off).
    assert {"memory_search", "memory_get"} <= tools.keys()
    assert tools["memory_search"]["parameters"]["required"] == ["query"]
    assert "memory-ls" in tools["memory_search"]["description"]
    assert tools["memory_get"]["parameters"]["required"] == ["path"]

    english = _step(answer, 0)["result"]["details"]
    top = english["results"][0]
    assert top["path"] == "MEMORY.md" and top["source"] == "memory" and top["corpus"] == "memory"
    assert top["citation"].startswith("MEMORY.md#L") and top["snippet"].endswith(
        f"Source: {top['citation']}"
    )
    assert "PostgreSQL" in top["snippet"]
    assert english["citations"] == "auto" and english["debug"]["backend"] == "memory-ls"

    cited = _step(answer, 1)["result"]["details"]
    assert cited["status"] == "ok" and cited["path"] == "MEMORY.md", cited
    assert "PostgreSQL for the payments ledger" in cited["text"]
    assert cited["from"] == top["startLine"]

    chinese = _step(answer, 2)["result"]["details"]["results"]
    assert chinese and chinese[0]["path"] == "memory/2026-07-01.md", chinese

    line = _step(answer, 3)["result"]["details"]
    # Cut as memory-core cuts a read (dist/read-file-*.mjs): more lines follow, so nextFrom.
    assert line == {
        "status": "ok",
        "text": "会议决定：下周三发布新版本，由王芳负责回滚预案。\n\n"
        "[More content available. Use from=4 to continue.]",
        "path": "memory/2026-07-01.md",
        "from": 3,
        "lines": 1,
        "truncated": True,
        "nextFrom": 4,
    }
    assert _step(answer, 4)["result"]["details"] == {
        "status": "not_found",
        "text": "",
        "path": "memory/nope.md",
    }

    # memory-ls syncs before a search at most once a second: the note is found within that.
    later = _step(answer, 6)
    assert later["result"]["found"], later
    assert later["ms"] < 5000

    # The manager OpenClaw's memory host resolves for the slot (status, gateway memory.search).
    hits = _step(answer, 7)["result"]
    assert (
        hits[0]["path"] == "MEMORY.md"
        and {"startLine", "endLine", "score", "snippet", "source"} <= hits[0].keys()
    )


def test_openclaw_status_shows_memory_ls(openclaw: OpenClaw) -> None:
    proc = openclaw.cli("status", "--json", "--all")
    assert proc.returncode == 0, proc.stderr[-3000:]
    memory = json.loads(proc.stdout)["memory"]
    assert memory["workspaceDir"] == str(openclaw.workspace)
    assert memory["files"] >= 3 and memory["chunks"] >= 3
    ls = memory["custom"]["memoryLs"]
    assert ls["engine"] == "memory-ls" and ls["mode"] in ("keyword", "hybrid")
    assert ls["settingsProblems"] == []
    if ls["mode"] == "keyword":
        assert memory["fallback"]["reason"], memory


def test_memory_ls_missing_gives_a_reason(openclaw: OpenClaw) -> None:
    off_path = os.pathsep.join([str(openclaw.node.parent), "/usr/bin", "/bin"])
    assert shutil.which("memory-ls", path=off_path) is None, (
        "a memory-ls outside the venv is on the test PATH"
    )
    answer = openclaw.drive(
        [
            {"op": "tool", "name": "memory_search", "params": {"query": "payments ledger"}},
            {"op": "tool", "name": "memory_get", "params": {"path": "MEMORY.md"}},
            {"op": "manager", "method": "status", "purpose": "status"},
        ],
        with_memory_ls=False,
    )
    search = _step(answer, 0)
    details = search["result"]["details"]
    assert details["results"] == [] and details["unavailable"] is True
    assert "memory-ls is not installed" in details["error"] and details["action"]
    assert "Traceback" not in search["result"]["text"] and "    at " not in search["result"]["text"]
    assert search["ms"] < 5000
    got = _step(answer, 1)["result"]["details"]
    assert got["status"] == "error" and got["code"] == "MEMORY_LS_MISSING"
    status = _step(answer, 2)["result"]
    assert "not installed" in status["custom"]["memoryLs"]["error"]


def test_memory_ls_that_never_answers_times_out(openclaw: OpenClaw, tmp_path: Path) -> None:
    stuck = tmp_path / "memory-ls"
    stuck.write_text("#!/bin/sh\nexec sleep 30\n")
    stuck.chmod(0o755)
    openclaw.configure({"command": str(stuck), "timeoutMs": 1500})
    try:
        answer = openclaw.drive(
            [{"op": "tool", "name": "memory_search", "params": {"query": "payments ledger"}}]
        )
    finally:
        openclaw.configure()
    step = _step(answer, 0)
    details = step["result"]["details"]
    assert details["results"] == [] and details["timedOut"] is True, details
    assert "did not answer within" in details["error"]
    assert step["ms"] < 5000


def test_a_transcript_line_is_found(openclaw: OpenClaw) -> None:
    # OpenClaw's transcripts: <state dir>/agents/<id>/sessions/<session id>.jsonl (dist/paths-*.mjs,
    # resolveAgentSessionsDir); the state dir is $OPENCLAW_HOME/.openclaw.
    sessions = openclaw.home / ".openclaw" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    transcript = sessions / "b1e2c3d4-0000-4a5b-8c6d-7e8f9a0b1c2d.jsonl"
    transcript.write_text(jsonl(openclaw_transcript(6)), encoding="utf-8")
    openclaw.configure(
        memory_search={"sources": ["memory", "sessions"], "experimental": {"sessionMemory": True}}
    )
    try:
        answer = openclaw.drive(
            [
                {
                    "op": "tool",
                    "name": "memory_search",
                    "params": {
                        "query": "why does the quokka4 job fail at night",
                        "corpus": "sessions",
                    },
                },
                {"op": "tool", "name": "memory_get", "params": {"path": "$cited"}},
                {"op": "tool", "name": "memory_search", "params": {"query": "quokka4 job"}},
            ]
        )
    finally:
        openclaw.configure()
        transcript.unlink()
    assert (
        "session transcripts"
        in {t["name"]: t for t in answer["tools"]}["memory_search"]["description"]
    )
    found = _step(answer, 0)["result"]["details"]
    assert found["results"], found
    top = found["results"][0]
    assert top["source"] == "sessions" and top["corpus"] == "sessions", top
    assert top["path"].startswith("sessions:openclaw/") and transcript.name in top["path"], top
    assert question(4) in top["snippet"], top
    cited = _step(answer, 1)["result"]["details"]
    assert cited["status"] == "ok", cited
    assert question(4) in cited["text"], cited
    # Without corpus, a session hit comes beside the memory files (the notes hold no quokka).
    mixed = _step(answer, 2)["result"]["details"]["results"]
    assert mixed and mixed[0]["source"] == "sessions", mixed


def test_an_agents_own_memory_settings_win(openclaw: OpenClaw) -> None:
    """memory.search of one agent over the defaults, read from 2026.9.6's keyed roster
    (agents.entries.<id>) and from the older list (agents.list[]), as memory-core reads them."""
    plugin = (PLUGIN / "dist" / "memory-ls.js").as_uri()
    script = f"""
import {{ resolveOpenClawMemorySettings as r }} from {json.dumps(plugin)};
const search = {{ query: {{ maxResults: 3 }}, extraPaths: ["notes"] }};
const base = {{ memory: {{ search: {{ query: {{ maxResults: 9, minScore: 0.2 }} }} }} }};
console.log(JSON.stringify([
  r({{ ...base, agents: {{ entries: {{ ops: {{ memory: {{ search }} }} }} }} }}, "ops"),
  r({{ ...base, agents: {{ list: [{{ id: "ops", memory: {{ search }} }}] }} }}, "ops"),
  r({{ ...base, agents: {{ entries: {{ ops: {{ memory: {{ search }} }} }} }} }}, "main"),
]));
"""
    with plugin_folder():
        out = subprocess.run(
            [str(openclaw.node), "--input-type=module", "-e", script],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    keyed, listed, other = json.loads(out.stdout)
    for agent in (keyed, listed):
        assert agent["maxResults"] == 3 and agent["minScore"] == 0.2
        assert agent["extraPaths"] == ["notes"]
    assert other["maxResults"] == 9 and other["extraPaths"] == []


def _no_stack(result: dict) -> None:
    text = result["text"]
    assert "Traceback" not in text and "    at " not in text, text


def test_memory_ls_too_old_says_upgrade(openclaw: OpenClaw, tmp_path: Path) -> None:
    # A stand-in that answers the MCP handshake as memory-ls 0.0.9 would, then nothing.
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "memory-ls", "version": "0.0.9"},
        },
    }
    old = tmp_path / "memory-ls"
    old.write_text(f"#!/bin/sh\nread line\necho '{json.dumps(init)}'\nexec sleep 30\n")
    old.chmod(0o755)
    openclaw.configure({"command": str(old)})
    try:
        answer = openclaw.drive(
            [
                {"op": "tool", "name": "memory_search", "params": {"query": "payments ledger"}},
                {"op": "tool", "name": "memory_get", "params": {"path": "MEMORY.md"}},
                {"op": "manager", "method": "status", "purpose": "status"},
            ]
        )
    finally:
        openclaw.configure()
    search = _step(answer, 0)
    details = search["result"]["details"]
    too_old = "memory-ls 0.0.9 is older than 0.1.0"
    assert details["results"] == [] and details["unavailable"] is True, details
    assert too_old in details["error"] and "pip install -U memory-ls" in details["error"]
    assert "upgrade" in details["action"]
    _no_stack(search["result"])
    assert search["ms"] < 5000
    got = _step(answer, 1)["result"]["details"]
    assert got["status"] == "error" and got["code"] == "MEMORY_LS_TOO_OLD", got
    assert too_old in got["error"]
    status = _step(answer, 2)["result"]
    assert too_old in status["custom"]["memoryLs"]["error"], status
    assert too_old in status["lastSyncError"]


def test_no_model_says_keyword_only_and_why(openclaw: OpenClaw, tmp_path: Path) -> None:
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    answer = openclaw.drive(
        [
            {"op": "tool", "name": "memory_search", "params": {"query": "payments ledger"}},
            {"op": "manager", "method": "status", "purpose": "status"},
        ],
        env={"XDG_CACHE_HOME": str(empty)},
    )
    search = _step(answer, 0)["result"]
    details = search["details"]
    assert details["results"] and details["mode"] == "keyword-only", details
    assert "memory-ls model pull" in details["fallback"]["reason"], details
    _no_stack(search)
    status = _step(answer, 1)["result"]
    assert status["custom"]["memoryLs"]["mode"] == "keyword", status
    assert "memory-ls model pull" in status["fallback"]["reason"], status
    assert "memory-ls model pull" in status["custom"]["memoryLs"]["providerReason"]


def test_a_search_during_the_first_sync_says_so(openclaw: OpenClaw, tmp_path: Path) -> None:
    # 30,000 notes: memory-ls's first sync of them takes about 12 s on an idle 2-core machine,
    # while a search waits at most 3 s for it (memory_ls/mcp/tools.py FIRST_SYNC_WAIT_SECONDS) and
    # then answers from the files indexed so far (200 a transaction, in path order), with
    # ``indexing``: the plugin passes the hits on marked as memory-core marks a partial recall
    # (partial, warning, action), well inside OpenClaw's 15 s budget and the plugin's own 12 s.
    big = tmp_path / "big"
    (big / "memory").mkdir(parents=True)
    words = ["alpha", "beta", "gamma", "delta", "ledger", "payments", "zeta", "theta"]
    for i in range(30000):
        text = " ".join(words[(i + j) % len(words)] for j in range(200))
        (big / "memory" / f"n{i:05d}.md").write_text(f"# note {i}\n\n{text}\n")
    (big / "memory" / "n00000.md").write_text("# note 0\n\nThe quillwort audit is due.\n")
    (big / "memory" / "n29999.md").write_text("# last\n\nThe zeppelin hangar lease renews.\n")
    openclaw.configure(workspace=big)
    try:
        answer = openclaw.drive(
            [
                # Status first: this driver's manager and tools come from two plugin loads,
                # so two memory-ls; asked after the search, status came from one started later,
                # whose sync a loaded machine could finish before it answered.
                {"op": "manager", "method": "status", "purpose": "status"},
                {"op": "tool", "name": "memory_search", "params": {"query": "zeppelin hangar"}},
                {
                    "op": "until",
                    "query": "zeppelin hangar",
                    "path": "memory/n29999.md",
                    "withinMs": 180000,
                    "whole": True,
                },
                {"op": "tool", "name": "memory_search", "params": {"query": "quillwort audit"}},
            ],
            env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
            timeout=300,
        )
    finally:
        openclaw.configure()
    status = _step(answer, 0)["result"]
    assert "still running" in status["custom"]["memoryLs"]["indexing"], status
    search = _step(answer, 1)
    details = search["result"]["details"]
    # An answer, not a failure: the hits so far (the last note is not indexed yet), and why.
    assert "unavailable" not in details and "disabled" not in details, details
    assert details["partial"] is True and details["indexing"] is True, details
    assert details["results"] == [], details
    assert "first sync" in details["warning"] and "may be incomplete" in details["warning"]
    assert "first sync" in details["fallback"]["reason"], details
    assert "Retry" in details["action"]
    _no_stack(search["result"])
    assert search["ms"] < 8000
    later = _step(answer, 2)["result"]
    assert later["found"], later
    done = _step(answer, 3)["result"]["details"]
    assert done["results"] and done["results"][0]["path"] == "memory/n00000.md", done
    assert "partial" not in done and "indexing" not in done, done


def test_paths_outside_the_workspace_say_why(openclaw: OpenClaw, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.md").write_text("# Secret\n\nThe vault code is 1234.\n")
    openclaw.configure(memory_search={"extraPaths": [str(elsewhere)]})
    try:
        answer = openclaw.drive(
            [
                {"op": "tool", "name": "memory_search", "params": {"query": "vault code"}},
                {
                    "op": "tool",
                    "name": "memory_get",
                    "params": {"path": str(elsewhere / "secret.md")},
                },
                {"op": "tool", "name": "memory_get", "params": {"path": "../elsewhere/secret.md"}},
                {"op": "manager", "method": "status", "purpose": "status"},
            ]
        )
    finally:
        openclaw.configure()
    search = _step(answer, 0)["result"]
    details = search["details"]
    assert details["results"] == [], details
    (warning,) = details["warnings"]
    assert f"extraPaths: {elsewhere} is outside the workspace" in warning, warning
    _no_stack(search)
    for index in (1, 2):
        got = _step(answer, index)["result"]
        assert got["details"]["status"] == "error", got
        assert "outside the workspace" in got["details"]["error"], got
        assert "1234" not in got["text"]
        _no_stack(got)
    status = _step(answer, 3)["result"]
    assert status["custom"]["memoryLs"]["pathProblems"] == [warning], status


def test_the_package_is_ready_to_publish(openclaw: OpenClaw, tmp_path: Path) -> None:
    """What ``npm publish`` would upload, without the registry: ``npm pack`` (its ``prepack``
    builds) holds exactly the compiled plugin, the manifest, README, LICENSE and package.json, at
    the manifest's version; and that tarball installs and loads in OpenClaw as a user's
    ``openclaw plugins install @memory-ls/openclaw-memory-ls`` would get it (``npm-pack:``,
    OpenClaw's managed npm project, docs/plugins/building-plugins.md "Test the package install")."""
    node_bin = openclaw.node.parent
    with plugin_folder():
        dry = npm(node_bin, "pack", "--dry-run", "--json")
        packed = npm(node_bin, "pack", "--pack-destination", str(tmp_path), "--json")
    assert dry.returncode == 0, dry.stderr[-3000:]
    (listing,) = json.loads(dry.stdout)
    sources = sorted(p.stem for p in (PLUGIN / "src").glob("*.ts"))
    assert sources == ["index", "memory-ls", "openclaw"], sources
    compiled = {f"dist/{stem}{ext}" for stem in sources for ext in (".js", ".d.ts")}
    shipped = {"package.json", "openclaw.plugin.json", "README.md", "LICENSE"}
    assert {f["path"] for f in listing["files"]} == compiled | shipped, listing["files"]

    package = json.loads((PLUGIN / "package.json").read_text())
    manifest = json.loads((PLUGIN / "openclaw.plugin.json").read_text())
    assert listing["name"] == package["name"] == "@memory-ls/openclaw-memory-ls"
    assert listing["version"] == package["version"] == manifest["version"], (package, manifest)
    assert package["main"] == package["openclaw"]["extensions"][0] == "./dist/index.js"
    assert package["exports"]["."]["default"] == "./dist/index.js"
    assert package["publishConfig"]["access"] == "public"
    assert "prepack" in package["scripts"] and not package.get("dependencies")
    # The lock pins the build's TypeScript; the runtime needs nothing from npm.
    lock = json.loads((PLUGIN / "package-lock.json").read_text())
    assert lock["packages"][""]["devDependencies"] == package["devDependencies"]

    assert packed.returncode == 0, packed.stderr[-3000:]
    tarball = tmp_path / json.loads(packed.stdout)[0]["filename"]
    fresh = OpenClaw(tmp_path / "fresh", openclaw.node, openclaw.package)
    installed = fresh.cli(
        "plugins", "install", f"npm-pack:{tarball}", "--force", "--accept-capabilities"
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert json.loads(fresh.config_path.read_text())["plugins"]["slots"]["memory"] == "memory-ls"
    inspect = fresh.cli("plugins", "inspect", "memory-ls", "--runtime", "--json")
    assert inspect.returncode == 0, inspect.stderr[-3000:]
    plugin = json.loads(inspect.stdout)["plugin"]
    assert plugin["status"] == "loaded", plugin
    assert plugin["version"] == plugin["packageVersion"] == package["version"], plugin
    assert plugin["source"].endswith("/@memory-ls/openclaw-memory-ls/dist/index.js"), plugin
    assert set(plugin["toolNames"]) == {"memory_search", "memory_get"}, plugin


def _user_config(openclaw: OpenClaw, text: str) -> Path:
    """The user's own memory-ls config.toml, as memory-ls finds it (XDG_CONFIG_HOME)."""
    path = openclaw.root / "xdg-config" / "memory-ls" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _transcripts(openclaw: OpenClaw, tmp_path: Path) -> tuple[Path, Path]:
    """The same OpenClaw transcript in OpenClaw's sessions folder and in another agent's folder
    (a sessions root of the user's own config.toml)."""
    sessions = openclaw.home / ".openclaw" / "agents" / "main" / "sessions"
    other = tmp_path / "other-agent"
    for folder in (sessions, other):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "c0ffee00-0000-4a5b-8c6d-7e8f9a0b1c2d.jsonl").write_text(
            jsonl(openclaw_transcript(6)), encoding="utf-8"
        )
    return sessions, other


SESSIONS_ON = {"sources": ["memory", "sessions"], "experimental": {"sessionMemory": True}}


def test_openclaw_settings_and_the_users_config_both_apply(
    openclaw: OpenClaw, tmp_path: Path
) -> None:
    """OpenClaw's memory.search mapped by the plugin, and the user's own memory-ls config.toml:
    a key only one sets applies; the same key in both, the user's file wins; sessions roots add
    up (docs/guides/openclaw.md, "Settings: who wins")."""
    for rel, text in {
        "team/kestrel.md": "# Kestrel\n\nThe kestrel runbook lives in the ops wiki.\n",
        "agent-notes/osprey.md": "# Osprey\n\nThe osprey migration finished in June.\n",
    }.items():
        (openclaw.workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (openclaw.workspace / rel).write_text(text, encoding="utf-8")
    sessions, other = _transcripts(openclaw, tmp_path)
    user = _user_config(
        openclaw,
        'provider = "none"\nextraPaths = ["team"]\n\n[query]\nmaxResults = 3\n\n'
        f'[[sessions.roots]]\npath = "{other}"\nname = "other"\nglobs = ["*.jsonl"]\n',
    )
    openclaw.configure(
        memory_search={**SESSIONS_ON, "extraPaths": ["agent-notes"], "provider": "local"}
    )
    try:
        answer = openclaw.drive(
            [
                {"op": "tool", "name": "memory_search", "params": {"query": "kestrel runbook"}},
                {"op": "tool", "name": "memory_search", "params": {"query": "osprey migration"}},
                {
                    "op": "tool",
                    "name": "memory_search",
                    "params": {"query": question(4), "corpus": "sessions", "maxResults": 10},
                },
                {"op": "manager", "method": "status", "purpose": "status"},
            ]
        )
    finally:
        openclaw.configure()
        user.unlink()
        shutil.rmtree(openclaw.workspace / "team")
        shutil.rmtree(openclaw.workspace / "agent-notes")
        shutil.rmtree(sessions)
    # extraPaths in both: the user's file wins (its folder is searched, OpenClaw's is not).
    kestrel = _step(answer, 0)["result"]["details"]["results"]
    assert kestrel and kestrel[0]["path"] == "team/kestrel.md", kestrel
    osprey = _step(answer, 1)["result"]["details"]["results"]
    assert not any(r["path"].startswith("agent-notes/") for r in osprey), osprey
    # sessions: OpenClaw's transcripts (the plugin's root) beside the user's own root.
    hits = _step(answer, 2)["result"]["details"]["results"]
    roots = {r["path"].split("/", 1)[0] for r in hits}
    assert roots == {"sessions:openclaw", "sessions:other"}, hits
    # provider in both: the user's "none" over OpenClaw's "local"; the file read without problems.
    status = _step(answer, 3)["result"]
    ls = status["custom"]["memoryLs"]
    assert ls["mode"] == "keyword" and "provider is 'none'" in ls["providerReason"], ls
    assert ls["settingsProblems"] == [] and ls["rootProblems"] == [], ls
    assert "configProblems" not in ls, ls


def test_the_plugins_own_provider_wins_and_inline_roots_say_why(
    openclaw: OpenClaw, tmp_path: Path
) -> None:
    """The plugin's own provider (plugins.entries.memory-ls.config) wins over the user's file;
    a user's sessions.roots written inline cannot take OpenClaw's beside them: the user's roots
    and the rest of the file still apply, and the tool result and status say what is left out."""
    sessions, other = _transcripts(openclaw, tmp_path)
    user = _user_config(
        openclaw,
        'provider = "none"\n\n[sessions]\n'
        f'roots = [{{ path = "{other}", name = "other", globs = ["*.jsonl"] }}]\n',
    )
    openclaw.configure({"provider": "voyage"}, memory_search=SESSIONS_ON)
    try:
        answer = openclaw.drive(
            [
                {
                    "op": "tool",
                    "name": "memory_search",
                    "params": {"query": question(4), "corpus": "sessions", "maxResults": 10},
                },
                {"op": "manager", "method": "status", "purpose": "status"},
            ],
            env={"VOYAGE_API_KEY": ""},
        )
    finally:
        openclaw.configure()
        user.unlink()
        shutil.rmtree(sessions)
    details = _step(answer, 0)["result"]["details"]
    assert details["results"], details
    assert {r["path"].split("/", 1)[0] for r in details["results"]} == {"sessions:other"}
    (warning,) = details["warnings"]
    assert "sets sessions.roots inline" in warning and str(sessions) in warning, warning
    ls = _step(answer, 1)["result"]["custom"]["memoryLs"]
    assert ls["providerReason"].startswith("voyage"), ls
    assert ls["settingsProblems"] == [], ls
    assert ls["configProblems"] == [warning], ls
