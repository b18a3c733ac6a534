"""Nothing leaves for whom it is not meant: the MCP HTTP server on any loopback address
checks Host and Origin (DNS rebinding), and a team URL the redaction cannot parse as one host
and port (a libpq multi-host list) neither crashes the engine nor shows its password."""

from __future__ import annotations

import re
import socket
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest
from conftest import write
from mcp_util import mcp_command, server_env
from pg_util import shared_url
from repo_root import REPO
from team_util import team, write_notes

from memory_ls.engine import MemoryEngine
from memory_ls.index.postgres.errors import describe, redact

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def loopback_other_than_127_0_0_1() -> str:
    # All of 127.0.0.0/8 is loopback on Linux, where CI runs: a failure to bind is a failure.
    socket.create_server(("127.0.0.2", 0)).close()
    return "127.0.0.2"


def test_dns_rebinding_refused_on_every_loopback_address(tmp_path: Path):
    host = loopback_other_than_127_0_0_1()
    root = tmp_path / "ws"
    write(root, ".memory-ls.toml", 'provider = "none"\n')
    write(root, "MEMORY.md", "# Memory\n\nThe launch code is 1234.\n")
    args = [*mcp_command(root, tmp_path / "i.sqlite"), "--transport", "http"]
    proc = subprocess.Popen(
        [*args, "--host", host, "--port", "0"],
        env=server_env(),
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"MCP over HTTP at (http://127\.0\.0\.2:(\d+)/mcp)", line)
        assert found, line
        url, port = found.group(1), found.group(2)
        with httpx2.Client(timeout=30) as http:
            # What a page of evil.example resolving to 127.0.0.2 sends from the browser.
            r = http.post(url, json=INIT, headers={**ACCEPT, "Host": f"evil.example:{port}"})
            assert r.status_code == 421, r.text
            r = http.post(url, json=INIT, headers={**ACCEPT, "Origin": "http://evil.example"})
            assert r.status_code == 403, r.text
            # The address itself, as an agent on this machine uses it, is served.
            r = http.post(url, json=INIT, headers=ACCEPT)
            assert r.status_code == 200, r.text
            r = http.post(url, json=INIT, headers={**ACCEPT, "Origin": f"http://{host}:{port}"})
            assert r.status_code == 200, r.text
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:Zq9SECRET@h1:5432,h2:5433/db",
        "postgresql://u:Zq9SECRET@h1:notaport/db",
        "postgresql://u:Zq9SECRET@h1:99999/db",
        "postgresql://u:Zq9SECRET@[::1]:5432/db",
        "host=h1 user=u PASSWORD=Zq9SECRET",
    ],
)
def test_redaction_of_urls_beyond_one_host_and_port(url: str):
    shown = redact(url)
    assert "Zq9SECRET" not in shown and "***" in shown
    assert "Zq9SECRET" not in describe(RuntimeError(f"failed: {url}"), url)


def test_multi_host_team_url_works_without_showing_the_password(tmp_path: Path):
    base = urlsplit(shared_url())
    assert base.password, (
        "tests/support/pg_server.sh gives its server a password; this URL has none"
    )
    hosts = f"{base.hostname}:{base.port},{base.hostname}:{base.port}"
    url = f"postgresql://{base.username}:{base.password}@{hosts}{base.path}"
    root = write_notes(tmp_path / "w", {"MEMORY.md": "# M\n\nMultihost quokka note.\n"})
    with MemoryEngine(root, team(url, f"mh_{uuid.uuid4().hex[:10]}")) as eng:
        eng.sync()
        resp = eng.search("multihost quokka", min_score=0)
        assert [r.path for r in resp.results] == ["MEMORY.md"]
        st = eng.status()
        assert st["store"]["answering"] == "postgres", st["store"]
        assert base.password not in repr(st) and st["store"]["url"].count("***") == 1
