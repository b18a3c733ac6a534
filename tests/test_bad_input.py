"""Bad input found by fuzzing: a lone surrogate in a transcript, paths the file system refuses
(too long, a NUL byte), a glob's ``**/`` matching no folder. Each gives a clear error or is
skipped; none takes a sync, a request or the server down."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write

from memory_ls.cli import main
from memory_ls.engine import MemoryEngine
from memory_ls.server.folders import Folders
from memory_ls.sessions.writer import save_session
from memory_ls.settings import Settings
from memory_ls.sources.sessions import render_transcript
from memory_ls.workspace import PathError

# JSON may spell a lone surrogate; json.loads keeps it, and UTF-8 cannot encode it.
LONE = '{"role": "user", "content": "kestrel \\ud800 plan"}\n'


def sessions_engine(ws: Path, tmp_path: Path, glob: str = "sessions/*.jsonl") -> MemoryEngine:
    s = Settings(provider="none", sources=["memory", "sessions"])
    s.sessions.globs = [glob]
    return MemoryEngine(ws, s, index_path=tmp_path / "idx.sqlite")


def test_a_lone_surrogate_in_a_transcript_is_replaced_not_fatal(ws: Path, tmp_path: Path):
    assert render_transcript(LONE).text == "User: kestrel \ufffd plan"
    write(ws, "sessions/s.jsonl", LONE)
    engine = sessions_engine(ws, tmp_path)
    try:
        engine.sync("test")  # raised UnicodeEncodeError: nothing of the workspace was indexed
        assert [h.path for h in engine.search("kestrel").results] == ["sessions/s.jsonl"]
        assert engine.search("token bucket").results  # the notes too
    finally:
        engine.close()


def test_a_lone_surrogate_in_a_header_still_saves_the_note(ws: Path, tmp_path: Path):
    header = '{"type": "session", "id": "x\\udc00y", "key": "k\\ud800"}\n'
    t = write(tmp_path, "t.jsonl", header + LONE)
    path = save_session(ws, t)
    assert "\ufffd" in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["a" * 300 + ".md", "a" * 300 + ".md#L1-L2"])
def test_a_name_too_long_is_a_path_error(ws: Path, tmp_path: Path, name: str):
    engine = MemoryEngine(ws, Settings(provider="none"), index_path=tmp_path / "idx.sqlite")
    try:
        with pytest.raises(PathError, match="cannot be read"):
            engine.get("memory/" + name)  # raised OSError (ENAMETOOLONG)
    finally:
        engine.close()


def test_a_nul_byte_in_a_uri_locates_nothing(ws: Path):
    folders = Folders()  # no folder needed: Path.resolve raised before any was looked at
    assert folders.locate("file://" + str(ws) + "/memory/%00.md") is None


def test_a_glob_whose_double_star_matches_no_folder_gets_what_it_indexes(ws: Path, tmp_path: Path):
    write(ws, "sessions/top.jsonl", '{"role": "user", "content": "heron survey"}\n')
    engine = sessions_engine(ws, tmp_path, glob="sessions/**/*.jsonl")
    try:
        engine.sync("test")
        hit = engine.search("heron survey").results[0]
        assert hit.path == "sessions/top.jsonl"
        assert engine.get(hit.citation).text == "User: heron survey"  # was: not a memory file
    finally:
        engine.close()


@pytest.mark.parametrize("cite", ["MEMORY.md#L5-L2", "MEMORY.md#L0", "MEMORY.md#L0-L-3"])
def test_a_citation_of_bad_line_numbers_says_so(ws: Path, tmp_path: Path, cite: str, capsys):
    engine = MemoryEngine(ws, Settings(provider="none"), index_path=tmp_path / "idx.sqlite")
    try:
        with pytest.raises(ValueError, match="bad line numbers"):
            engine.get(cite)  # was: "not a memory file"
    finally:
        engine.close()
    assert main(["get", "-w", str(ws), "--index", str(tmp_path / "idx.sqlite"), cite]) == 2
    assert "bad line numbers" in capsys.readouterr().err
