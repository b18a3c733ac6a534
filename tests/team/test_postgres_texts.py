"""Files that exist on another machine only (real PostgreSQL + pgvector): a client shows them
from the team index, as their own machine would, transcripts that grow included, and never a
text that is out of date."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pg_util import shared_url, unique
from team_util import NOTES, rows, team, write_notes

from memory_ls.engine import MemoryEngine
from memory_ls.engine.excerpts import ALIGN_JOIN
from memory_ls.index.postgres import URL_ENV
from memory_ls.workspace import PathError

DIARY = "memory/2026-03-02-diary.md"
DIARY_TEXT = (
    "# Tuesday\n\nThe gannet survey starts at the north pier.\r\n\n"
    "Bring the spare hydrophone.\n" + "A long line of field notes. " * 120 + "\n\nEnd.\n"
)
TRANSCRIPT = "sessions/agent-7.jsonl"


@pytest.fixture(scope="module")
def pg_url() -> str:
    return shared_url()


def turn(role: str, text: str) -> str:
    return json.dumps({"type": "message", "message": {"role": role, "content": text}}) + "\n"


def same_reads(here: MemoryEngine, there: MemoryEngine, path: str, spans) -> None:
    """``there`` (without the file) reads what ``here`` (with it) reads, marked remote."""
    for start, lines in spans:
        mine, theirs = here.get(path, start, lines), there.get(path, start, lines)
        assert not mine.remote and theirs.remote
        got = (theirs.text, theirs.from_line, theirs.to_line, theirs.total_lines)
        assert got == (mine.text, mine.from_line, mine.to_line, mine.total_lines)


def test_a_file_of_another_machine_is_read_from_the_team_index(pg_url, tmp_path: Path):
    ns = unique("texts")
    a = write_notes(tmp_path / "a", {**NOTES, DIARY: DIARY_TEXT})
    b = write_notes(tmp_path / "b", NOTES)
    s = team(pg_url, ns)
    s.sources = ["memory", "sessions"]
    s.sessions.globs = ["sessions/*.jsonl"]
    s.sync.sessions.delta_bytes = 0  # index every append
    with MemoryEngine(a, s) as ea, MemoryEngine(b, s) as eb:
        (a / TRANSCRIPT).parent.mkdir(parents=True)
        (a / TRANSCRIPT).write_text(turn("user", "Where do the gannets nest?"))
        ea.sync()
        eb.sync()
        hit = eb.search("gannet survey north pier").results[0]
        assert hit.path == DIARY and hit.remote
        assert hit.uri(b) == "memory-ls" + (b / DIARY).as_uri().removeprefix("file")
        assert hit.to_json(b)["remote"] is True
        assert "remote" not in eb.search("token bucket").results[0].to_json(b)  # b has it
        same_reads(ea, eb, DIARY, [(None, None), (3, 2), (6, 40)])
        cite = f"{DIARY}#L5-L6"
        lines = (a / DIARY).read_text().split("\n")
        assert eb.get(cite).text == ea.get(cite).text == "\n".join(lines[4:6])

        # A transcript that grows: each sync appends a part; an unterminated last line is
        # shown and then replaced when it is finished.
        with (a / TRANSCRIPT).open("a") as f:
            f.write(turn("assistant", "On the stacks past the north pier.\nTwo colonies."))
        ea.sync()
        with (a / TRANSCRIPT).open("a") as f:
            f.write(turn("user", "How many pairs?")[:-1])  # no newline yet
        ea.sync()
        same_reads(ea, eb, TRANSCRIPT, [(None, None), (2, 1), (3, 1)])
        parts = "SELECT count(*) FROM memory_file_texts WHERE ns = %s AND path = %s"
        assert rows(pg_url, parts, ns, TRANSCRIPT)[0][0] == 3  # read whole once, then tails
        with (a / TRANSCRIPT).open("a") as f:
            f.write("\n" + turn("assistant", "About 400 pairs."))
        ea.sync()
        same_reads(ea, eb, TRANSCRIPT, [(None, None), (3, 2)])
        assert "400 pairs" in eb.get(TRANSCRIPT).text
        # In an editor, in place of the file: one line per JSONL line, where hits point.
        doc = eb.get(TRANSCRIPT, aligned=True)
        shown = doc.text.split("\n")
        assert doc.remote and len(shown) == doc.total_lines == 4
        for n in range(1, 5):
            assert shown[n - 1] == ALIGN_JOIN.join(ea.get(TRANSCRIPT, n, 1).text.split("\n"))
        assert shown[1] == "Assistant: On the stacks past the north pier. ⏎ Two colonies."
        # A transcript without a current text (a client that sent none grew it) is read
        # whole at its next growth instead of having a tail appended to nothing.
        rows(pg_url, "DELETE FROM memory_file_texts WHERE ns = %s AND path = %s", ns, TRANSCRIPT)
        with (a / TRANSCRIPT).open("a") as f:
            f.write(turn("user", "And the skuas?"))
        ea.sync()
        assert eb.get(TRANSCRIPT).text == ea.get(TRANSCRIPT).text
        assert rows(pg_url, parts, ns, TRANSCRIPT) == [(1,)]
        ea.sync(force=True)  # a rebuild writes the whole text again, and tails follow it
        with (a / TRANSCRIPT).open("a") as f:
            f.write(turn("user", "And the terns?"))
        ea.sync()
        same_reads(ea, eb, TRANSCRIPT, [(None, None), (6, 1)])
        assert eb.get(TRANSCRIPT).text.endswith("User: And the terns?")

        # A text read before is not fetched again while the file keeps its hash (citation
        # diagnostics ask on every change of a document).
        rows(pg_url, "DELETE FROM memory_file_texts WHERE ns = %s AND path = %s", ns, DIARY)
        assert "hydrophone" in eb.get(DIARY).text
        # An edit reaches the other machine; a deletion makes the file unknown there.
        (a / DIARY).write_text(DIARY_TEXT.replace("hydrophone", "thermometer"))
        ea.sync()
        assert "thermometer" in eb.get(DIARY).text
        (a / DIARY).unlink()
        ea.sync()
        with pytest.raises(PathError, match="no such file"):
            eb.get(DIARY)
        assert rows(pg_url, parts, ns, DIARY) == [(0,)]  # gone with its file
        with pytest.raises(PathError, match="outside"):  # still the local answer
            eb.get("../secret.md")


def test_a_text_out_of_date_is_never_shown_and_comes_back_with_its_machine(pg_url, tmp_path: Path):
    ns = unique("texts")
    a = write_notes(tmp_path / "a", {**NOTES, DIARY: DIARY_TEXT})
    b = write_notes(tmp_path / "b", NOTES)
    c = write_notes(tmp_path / "c", {DIARY: DIARY_TEXT.replace("gannet", "puffin")})
    s = team(pg_url, ns)
    chunks = "SELECT id, hash FROM memory_chunks WHERE ns = %s ORDER BY id"
    texts = "SELECT count(*) FROM memory_file_texts WHERE ns = %s"
    with MemoryEngine(a, s) as ea:
        ea.sync()
    before = rows(pg_url, chunks, ns)
    # What clients of schema 2 leave: files pushed with no text at all...
    rows(pg_url, "DELETE FROM memory_file_texts WHERE ns = %s", ns)
    with MemoryEngine(b, s) as eb:
        eb.sync()
        with pytest.raises(PathError, match="no current text"):
            eb.get(DIARY)
        # ... which the machine that has them sends on its next connect and sync, as text
        # rows only: no chunk re-written, nothing embedded.
        with MemoryEngine(a, s) as ea:
            ea.sync()
            assert eb.get(DIARY).text == ea.get(DIARY).text
        assert rows(pg_url, chunks, ns) == before
        assert rows(pg_url, texts, ns)[0][0] == len(NOTES) + 1
        # ... and a change whose text never came: the old text is not shown for it.
        with MemoryEngine(c, s) as ec:
            ec.sync()
        rows(pg_url, "DELETE FROM memory_file_texts WHERE ns = %s AND path = %s", ns, DIARY)
        with pytest.raises(PathError, match="no current text"):
            eb.get(DIARY)
        with MemoryEngine(a, s) as ea:  # its disk decides, and its push sends the text
            ea.sync()
            assert "gannet" in eb.get(DIARY).text == ea.get(DIARY).text


def test_a_file_unknown_everywhere_and_a_team_index_down_say_so(tmp_path: Path):
    b = write_notes(tmp_path / "b", NOTES)
    s = team("postgresql://nobody@127.0.0.1:9/none?connect_timeout=1", unique("x"))
    with MemoryEngine(b, s) as eb:
        with pytest.raises(PathError, match="no such file"):
            eb.get(DIARY)
        assert eb.get("MEMORY.md").text.startswith("# Memory")  # local files as ever


def test_the_cli_marks_and_prints_a_teammates_file(pg_url, tmp_path: Path):
    ns = unique("texts")
    a = write_notes(tmp_path / "a", {**NOTES, DIARY: DIARY_TEXT})
    b = write_notes(tmp_path / "b", NOTES)
    toml = 'provider = "none"\n\n[store]\nbackend = "postgres"\n\n'
    toml += f'[store.postgres]\nnamespace = "{ns}"\n'
    (b / ".memory-ls.toml").write_text(toml)
    with MemoryEngine(a, team(pg_url, ns)) as ea:
        ea.sync()

    def cli(*args: str) -> str:
        env = {**os.environ, URL_ENV: pg_url}
        idx = str(tmp_path / "b.sqlite")
        cmd = [sys.executable, "-m", "memory_ls", *args, "-w", str(b), "--index", idx]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = cli("search", "gannet survey north pier").splitlines()[0]
    assert first.startswith(f"{DIARY}#L") and first.endswith("(team: not on this machine)")
    assert cli("get", f"{DIARY}#L5").strip() == "Bring the spare hydrophone."
    hit = json.loads(cli("search", "gannet survey north pier", "--json"))["results"][0]
    assert hit["remote"] is True and hit["uri"].startswith("memory-ls:///")
    # status names the team index and the server's buffer cache against its search indexes
    status = cli("status").splitlines()
    assert "answering   postgres" in status
    server = next(line for line in status if line.startswith("server      "))
    assert re.fullmatch(r"server {6}shared_buffers \d+ MB, indexes \d+ MB", server), server
