"""``memory-ls doctor`` through the real CLI: each test breaks one thing (a model not pulled, an
index of an older schema, the team database down or refusing the password, an agent without
the MCP server) and checks that doctor names it and its fix, and that it wrote nothing.

"No FTS5" is not tested: every SQLite this suite can load (the stdlib's, sqlean.py's) has FTS5
compiled in, and making one without it would take a mock of the driver.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path

import psycopg
from cli_util import doctor, run_cli
from conftest import write
from pg_util import scratch_database, shared_url, unique, with_database
from repo_root import REPO

from memory_ls.doctor.clients import VSCODE_EXTENSION_ID
from memory_ls.index.schema import SCHEMA_VERSION

IDS = ["python", "sqlite", "llama.cpp", "settings", "models", "index", "team", "providers"]
IDS += ["editors", "agents", "cache"]


def workspace(root: Path, settings: str = 'provider = "none"\n') -> Path:
    write(root, ".memory-ls.toml", settings)
    write(root, "MEMORY.md", "# Memory\n\nThe user prefers green tea.\n")
    write(root, "memory/2026-01-02.md", "# Standup\n\nThe deploy moved to Thursday.\n")
    return root


def index(root: Path, home: Path) -> Path:
    done = run_cli("index", "-w", str(root), home=home)
    assert done.returncode == 0, done.stderr
    (path,) = (Path(os.environ["XDG_CACHE_HOME"]) / "memory-ls" / "index").glob("*.sqlite")
    return path


def meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def test_a_healthy_workspace_passes_with_json_and_text(tmp_path: Path):
    root, home = workspace(tmp_path / "ws"), tmp_path / "home"
    path = index(root, home)
    before = path.read_bytes()
    code, checks, _ = doctor(root, home)
    assert code == 0
    assert list(checks) == IDS
    assert {c["status"] for c in checks.values()} <= {"ok", "warn"}
    assert set(checks["python"]) == {"id", "status", "summary", "detail", "fix"}
    idx = checks["index"]
    assert idx["status"] == "ok", idx
    assert f"schema {SCHEMA_VERSION}" in idx["summary"] and "2 files" in idx["summary"]
    assert checks["team"]["summary"].startswith("not used")
    # Read-only: the index is byte for byte as it was, and no side file was left beside it.
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    text = run_cli("doctor", "-w", str(root), home=home)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    marked = [line[len("[ ok ] ") :].split()[0] for line in lines if line.startswith("[")]
    assert marked == IDS


def test_drift_between_disk_and_index_is_counted_without_indexing(tmp_path: Path):
    root, home = workspace(tmp_path / "ws"), tmp_path / "home"
    path = index(root, home)
    write(root, "memory/new.md", "# New\n\nNot indexed yet.\n")
    (root / "memory" / "2026-01-02.md").unlink()
    write(root, "MEMORY.md", "# Memory\n\nThe user prefers black coffee now.\n")
    code, checks, _ = doctor(root, home)
    idx = checks["index"]
    assert code == 0 and idx["status"] == "warn"
    assert "3 files differ from disk" in idx["summary"]
    assert "not indexed: memory/new.md" in idx["detail"]
    assert (
        "changed: MEMORY.md" in idx["detail"] and "deleted: memory/2026-01-02.md" in idx["detail"]
    )
    assert idx["fix"].startswith(f"memory-ls index -w {root}")
    with sqlite3.connect(path) as conn:  # doctor indexed nothing
        assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 2


def test_a_model_not_pulled_is_named_with_the_pull_command(tmp_path: Path):
    # XDG_CACHE_HOME is the test's own, empty folder (conftest.py): no model was ever pulled.
    root, home = workspace(tmp_path / "ws", ""), tmp_path / "home"
    code, checks, _ = doctor(root, home)
    models = checks["models"]
    assert code == 0 and models["status"] == "warn"
    assert "no model pulled" in models["summary"] and models["fix"] == "memory-ls model pull"
    write(root, ".memory-ls.toml", '[local]\nmodel = "multilingual-e5-small"\n')
    code, checks, _ = doctor(root, home)
    models = checks["models"]
    assert code == 1 and models["status"] == "fail"
    assert models["fix"] == "memory-ls model pull multilingual-e5-small"


def test_an_index_of_an_older_schema_is_found_and_left_as_it_is(tmp_path: Path):
    root, home = workspace(tmp_path / "ws"), tmp_path / "home"
    path = index(root, home)
    older = str(SCHEMA_VERSION - 1)
    with sqlite3.connect(path) as conn:  # as index/schema.py records a version: meta's row
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (older,))
    code, checks, _ = doctor(root, home)
    idx = checks["index"]
    assert code == 0 and idx["status"] == "warn"
    assert f"schema {older}, older than this memory-ls writes ({SCHEMA_VERSION})" in idx["summary"]
    assert idx["fix"] == "memory-ls index"
    assert meta(path)["schema"] == older  # doctor did not upgrade it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def team_settings(url: str, namespace: str = "doctor") -> str:
    return (
        'provider = "none"\n[store]\nbackend = "postgres"\n'
        f'[store.postgres]\nurl = "{url}"\nnamespace = "{namespace}"\ntimeoutMs = 3000\n'
    )


def test_the_team_database_down_fails_with_the_reason_and_no_password(tmp_path: Path):
    password = "doctor-s3cret-pw"
    url = f"postgresql://memory:{password}@127.0.0.1:{free_port()}/memory"
    root, home = workspace(tmp_path / "ws", team_settings(url)), tmp_path / "home"
    code, checks, out = doctor(root, home)
    team = checks["team"]
    assert code == 1 and team["status"] == "fail"
    assert "unreachable" in team["summary"] and "memory:***@127.0.0.1" in team["summary"]
    assert "start the server" in team["fix"]
    assert password not in out
    text = run_cli("doctor", "-w", str(root), home=home)
    assert text.returncode == 1 and password not in text.stdout + text.stderr


def test_a_wrong_password_fails_as_bad_credentials(tmp_path: Path):
    url = shared_url()  # skips without a PostgreSQL (fails in CI), as tests/team/ do
    password = psycopg.conninfo.conninfo_to_dict(url)["password"]
    wrong = url.replace(f":{password}@", ":wrong-doctor-pw-123@")
    root, home = workspace(tmp_path / "ws", team_settings(wrong)), tmp_path / "home"
    code, checks, out = doctor(root, home)
    team = checks["team"]
    assert code == 1 and team["status"] == "fail"
    assert "bad credentials" in team["summary"] and "~/.pgpass" in team["fix"]
    assert "wrong-doctor-pw-123" not in out and password not in out


def test_a_reachable_team_database_and_a_role_without_privileges(tmp_path: Path):
    with scratch_database(shared_url()) as db:
        root, home = workspace(tmp_path / "ws", team_settings(db)), tmp_path / "home"
        done = run_cli("index", "-w", str(root), home=home)  # creates pgvector and the schema
        assert done.returncode == 0, done.stderr
        code, checks, out = doctor(root, home)
        team = checks["team"]
        assert code == 0 and team["status"] == "ok", team
        assert "pgvector" in team["summary"] and "namespace doctor: 2 files" in team["summary"]
        password = psycopg.conninfo.conninfo_to_dict(db)["password"]
        assert password not in out
        role, pw = unique("reader"), "reader-pw-8642"
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{pw}'")
            conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
        try:
            as_reader = with_database(db, db.rsplit("/", 1)[1], role, pw)
            write(root, ".memory-ls.toml", team_settings(as_reader))
            code, checks, _ = doctor(root, home)
            team = checks["team"]
            assert code == 1 and team["status"] == "fail"
            assert f"role {role} may not read and write" in team["summary"]
            assert team["fix"].startswith("the tables' owner runs GRANT SELECT, INSERT")
        finally:
            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute(f"DROP OWNED BY {role}")
                conn.execute(f"DROP ROLE {role}")


def test_editors_and_agents_as_found_under_home(tmp_path: Path):
    package = json.loads((REPO / "editors/vscode/package.json").read_text(encoding="utf-8"))
    assert f"{package['publisher']}.{package['name']}" == VSCODE_EXTENSION_ID
    root, home = workspace(tmp_path / "ws"), tmp_path / "home"
    ext = home / ".vscode-server/extensions" / f"{VSCODE_EXTENSION_ID}-0.1.0"
    write(ext, "package.json", json.dumps({"version": "0.1.0"}))
    write(home, ".codex/config.toml", '[mcp_servers.other]\ncommand = "other"\n')
    write(home, ".codex/sessions/2026/01/02/rollout.jsonl", "{}\n")
    write(root, ".mcp.json", json.dumps({"mcpServers": {"memory": {"command": "memory-ls"}}}))
    code, checks, _ = doctor(root, home)
    assert "VS Code extension 0.1.0 in ~/.vscode-server/extensions" in checks["editors"]["summary"]
    agents = checks["agents"]
    assert code == 0 and agents["status"] == "warn"
    assert "transcript folders: codex" in agents["summary"]
    assert "MCP configured for: claude" in agents["summary"]
    assert "[mcp_servers.memory-ls]" in agents["fix"]


def test_a_remote_provider_without_its_key(tmp_path: Path):
    root, home = workspace(tmp_path / "ws", 'provider = "voyage"\n'), tmp_path / "home"
    code, checks, _ = doctor(root, home)
    assert code == 1 and checks["providers"]["status"] == "fail"
    assert checks["providers"]["fix"].startswith("export VOYAGE_API_KEY=")
    code, checks, out = doctor(root, home, env={"VOYAGE_API_KEY": "pa-doctor-key-777"})
    assert code == 0 and checks["providers"]["status"] == "ok"
    assert "VOYAGE_API_KEY" in checks["providers"]["detail"] and "pa-doctor-key-777" not in out
