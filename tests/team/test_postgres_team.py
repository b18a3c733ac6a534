"""Several machines on one team namespace, with the real server stopped and started under them
(tests/support/pg_util.py): what one machine removes, renames or rewrites reaches the others,
whether the team index was there at the time or not, and whichever machine wrote the file first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
from pg_util import PgServer, require_server_binaries, shared_url, unique
from team_util import by_primary, paths, rows, team, write_notes

from memory_ls.engine import MemoryEngine
from memory_ls.engine.team.removals import waiting
from memory_ls.index.postgres import URL_ENV

ANIMALS = {
    "memory/zebras.md": "# Zebras\n\nZebras graze on the savanna.\n",
    "memory/giraffes.md": "# Giraffes\n\nGiraffes browse the acacia trees.\n",
    "memory/lions.md": "# Lions\n\nLions hunt at dusk.\n",
}


def team_files(url: str, ns: str) -> dict[str, str]:
    return dict(rows(url, "SELECT path, hash FROM memory_files WHERE ns = %s", ns))


def test_a_removal_reaches_the_team_index_whoever_wrote_the_file_first(tmp_path: Path):
    """Machine B pushes the notes first, so it is every team row's writer; machine A has the
    same notes. A's removals used to reach the team index only from a process that was
    connected before its own local sync saw them: a `memory-ls index` run, or any removal
    made while PostgreSQL was down, left the note in the team index for good, where A's own
    searches found it again as a teammate's file."""
    require_server_binaries()
    server = PgServer()
    try:
        url = server.up()
        ns = unique("removals")
        a, b = write_notes(tmp_path / "a", ANIMALS), write_notes(tmp_path / "b", ANIMALS)

        def machine(root: Path, name: str) -> MemoryEngine:
            s = team(url, ns, retry_after_s=0.2)
            return MemoryEngine(root, s, index_path=tmp_path / f"{name}.sqlite")

        with machine(b, "b") as eb:
            eb.sync()
        with machine(a, "a") as ea:
            ea.sync()  # the same content: nothing written, B stays the writer
        # A CLI run (a process of its own) that removes a note.
        (a / "memory/zebras.md").unlink()
        with machine(a, "a") as ea:
            ea.sync()
            assert paths(ea.search("zebras savanna", min_score=0)) == []
        assert "memory/zebras.md" not in team_files(url, ns)

        with machine(a, "a") as lsp:  # a language server, connected before the outage
            lsp.sync()
            server.down()
            (a / "memory/giraffes.md").unlink()
            lsp.sync()  # the local index only
            (a / "memory/lions.md").unlink()
            with machine(a, "a") as cli:  # and a CLI run while it is down
                cli.sync()
            server.up()
            # Meanwhile C rewrites the lions' note: its newer version is not A's to remove.
            c = write_notes(tmp_path / "c", {"memory/lions.md": "# Lions\n\nLions rest at noon.\n"})
            with machine(c, "c") as ec:
                ec.sync()
            time.sleep(0.3)  # the cooldown
            resp = lsp.search("giraffes acacia", min_score=0)
            assert by_primary(resp) and paths(resp) == []
            assert waiting(lsp.indexer) == {}
            assert sorted(team_files(url, ns)) == ["memory/lions.md"]
            resp = lsp.search("lions rest noon", min_score=0)
            assert paths(resp) == ["memory/lions.md"] and resp.results[0].remote
    finally:
        server.remove()


def test_a_search_never_waits_out_a_teammates_rebuild(tmp_path: Path):
    """A search pushes this folder's changed files first. When a teammate's forced rebuild
    held one of them (its transaction locks every file of its folder until it commits), the
    push waited for the whole rebuild, and the search with it: minutes on a large namespace.
    Now the push gives up after the search's wait, the search answers, and the file goes
    with the next push."""
    url = shared_url()
    ns = unique("rebuild")
    notes = {"memory/held.md": "# Held\n\nThe rebuild holds this note.\n"}
    a, b = write_notes(tmp_path / "a", notes), write_notes(tmp_path / "b", notes)
    with (
        MemoryEngine(a, team(url, ns), index_path=tmp_path / "a.sqlite") as ea,
        MemoryEngine(b, team(url, ns), index_path=tmp_path / "b.sqlite") as eb,
    ):
        ea.sync()
        eb.sync()
        # A's rebuild, stopped inside its transaction once it holds the note's lock.
        held, release = threading.Event(), threading.Event()
        reindex = ea.route.team._reindex

        def slow_reindex(store, paths, report):
            def hold():
                store.lock_path("memory/held.md")
                held.set()
                release.wait(30)

            store.lock_namespace = hold  # runs first inside the rebuild's transaction
            reindex(store, paths, report)

        ea.route.team._reindex = slow_reindex
        rebuild = threading.Thread(target=ea.sync, kwargs={"force": True})
        rebuild.start()
        try:
            assert held.wait(30)
            (b / "memory/held.md").write_text("# Held\n\nA zebra crossing, edited on B.\n")
            eb.mark_dirty([str(b / "memory/held.md")])
            t0 = time.monotonic()
            resp = eb.search("zebra crossing", min_score=0)
            took = time.monotonic() - t0
            assert took < 5, took
            assert by_primary(resp) and eb.status()["store"]["answering"] == "postgres"
        finally:
            release.set()
            rebuild.join(30)
        ea.route.team._reindex = reindex
        # The rebuild wrote A's version last; B's edit goes with its next push.
        resp = eb.search("zebra crossing", min_score=0)
        assert paths(resp) == ["memory/held.md"]
        assert "zebra" in rows(url, "SELECT text FROM memory_chunks WHERE ns = %s", ns)[0][0]


def test_a_cli_search_answers_while_the_team_index_is_slow(tmp_path: Path):
    """`memory-ls search` pushes this folder's changes before it searches. With a table of
    the team index locked (an administrator's ALTER TABLE or VACUUM FULL, a stuck migration),
    that push waited under the writer's 10-minute budget, so the search hung for minutes
    instead of answering from the local index within the budget as docs/guides/team.md says."""
    url, ns = shared_url(), unique("slow")
    root = write_notes(tmp_path / "ws", {"memory/x.md": "# X\n\nA zebra crossing.\n"})
    (root / ".memory-ls.toml").write_text(
        f'[store]\nbackend = "postgres"\n[store.postgres]\nnamespace = "{ns}"\n'
    )
    env = {**os.environ, URL_ENV: url}
    cli = [sys.executable, "-m", "memory_ls", "search", "zebra", "-w", str(root)]
    cli += ["--index", str(tmp_path / "i.sqlite")]
    first = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and "team index unavailable" not in first.stderr
    (root / "memory/x.md").write_text("# X\n\nA zebra crossing, edited.\n")
    with psycopg.connect(url) as conn:
        conn.execute("LOCK TABLE memory_files IN ACCESS EXCLUSIVE MODE")
        t0 = time.monotonic()
        out = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - t0
        conn.rollback()
    assert out.returncode == 0 and "memory/x.md#L1-L3" in out.stdout
    assert "too slow" in out.stderr and url.split(":")[2].split("@")[0] not in out.stderr
    assert took < 30, took
    # The lock gone, the next search pushes the edit.
    subprocess.run(cli, env=env, capture_output=True, text=True, timeout=120, check=True)
    (text,) = rows(url, "SELECT text FROM memory_chunks WHERE ns = %s", ns)[0]
    assert "edited" in text
