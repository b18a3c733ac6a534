"""Growing transcripts are indexed by their tail: only appended bytes are read, old chunks
keep their rows, ids and vectors, and the result equals indexing the whole file."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from conftest import fts_leaks, write
from fake_secrets import PRIVATE_KEY, SECRETS

from memory_ls.chunking import ChunkLimits, chunk_text
from memory_ls.engine import MemoryEngine
from memory_ls.index import transcripts as sync_mod
from memory_ls.index.schema import connect
from memory_ls.index.store import Store
from memory_ls.settings import Settings
from memory_ls.sources.sessions import ANCHOR_BYTES, render_transcript

PATH = "sessions/live.jsonl"


def msg(role: str, content, **extra) -> dict:
    return {"type": "message", "message": {"role": role, "content": content, **extra}}


def jsonl(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def append(path: Path, text: str | bytes) -> None:
    with path.open("ab") as fh:
        fh.write(text.encode() if isinstance(text, str) else text)


def conversation(n: int, start: int = 0) -> list[dict]:
    out = []
    for i in range(start, start + n):
        if i % 2:
            out.append(msg("assistant", [{"type": "text", "text": f"answer {i}: " + "ok " * 12}]))
        else:
            out.append(msg("user", f"question {i} about topic{i} and the weather"))
    return out


class FakeProvider:
    """Deterministic vectors from the text's hash; counts what it was asked to embed."""

    id = "fake"
    model = "fake-16"
    provider_key = "k"
    dims = 16
    max_input_tokens = 0
    max_input_bytes = 0

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def _vec(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        v = np.random.default_rng(seed).standard_normal(self.dims).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vec(text)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded += list(texts)
        return np.stack([self._vec(t) for t in texts])

    def close(self) -> None:
        pass


def settings(tokens: int = 48, overlap: int = 12, **sync) -> Settings:
    s = Settings(provider="none", sources=["memory", "sessions"])
    s.sessions.globs = ["sessions/*.jsonl"]
    s.chunking.tokens, s.chunking.overlap = tokens, overlap
    s.sync.sessions.delta_bytes = 0  # index every change
    for k, v in sync.items():
        setattr(s.sync.sessions, k, v)
    return s


def make_engine(root: Path, idx: Path, provider=None, **kw) -> MemoryEngine:
    return MemoryEngine(root, settings(**kw), provider=provider, index_path=idx)


def sql(idx: Path, query: str, *params) -> list[tuple]:
    """Run one statement on the index with the SQLite library the engine uses (two libraries
    on one file in one process do not see each other's locks)."""
    conn, _ = connect(idx, vec=False)
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def rows(engine: MemoryEngine, path: str = PATH) -> list[tuple]:
    """(id, start, end, text, embedding) of a file's chunks, in order."""
    return sql(
        engine.index_path,
        "SELECT c.id, c.start_line, c.end_line, c.text, v.embedding FROM chunks c "
        "LEFT JOIN chunk_vectors v ON v.id = c.id WHERE c.path = ? ORDER BY c.id",
        path,
    )


def expected_chunks(engine: MemoryEngine, file: Path) -> list[tuple[int, int, str]]:
    """What indexing the whole file at once gives (the rendering + chunking of a full read)."""
    src = render_transcript(file.read_bytes().decode("utf-8", errors="replace"))
    limits: ChunkLimits = engine.indexer.ctx.limits
    return [
        (c.start_line, c.end_line, c.text)
        for c in chunk_text(src.text, limits, list(src.line_map) if src.line_map else None)
    ]


def assert_same_as_whole(engine: MemoryEngine, file: Path) -> None:
    assert [(s, e, t) for _, s, e, t, _ in rows(engine)] == expected_chunks(engine, file)
    src = render_transcript(file.read_bytes().decode("utf-8", errors="replace"))
    with engine.indexer.reader() as store:
        info = store.file_infos([PATH]).get(PATH)
    assert info is not None
    assert (info[1], info[2] or []) == (len(src.line_map), list(src.line_map))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes read from transcripts by syncs, through the sync module's open seam."""
    reads: list[int] = []

    class Counting:
        def __init__(self, fh):
            self.fh = fh

        def read(self, n: int = -1) -> bytes:
            data = self.fh.read(n)
            reads.append(len(data))
            return data

        def seek(self, pos: int, whence: int = 0) -> int:
            return self.fh.seek(pos, whence)

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.fh.close()

    real = sync_mod._open
    monkeypatch.setattr(sync_mod, "_open", lambda p, folders=0: Counting(real(p, folders)))
    return reads


# -- the tail is all that is read --------------------------------------------------------------


def test_append_reads_and_embeds_only_the_tail(ws: Path, tmp_path: Path, counted: list[int]):
    file = write(ws, PATH, jsonl({"type": "session", "id": "s"}, *conversation(60)))
    provider = FakeProvider()
    engine = make_engine(ws, tmp_path / "idx.sqlite", provider)
    try:
        engine.sync("test")
        before = rows(engine)
        assert len(before) > 10 and all(r[4] is not None for r in before)
        assert sum(counted) >= file.stat().st_size  # the first sync reads it all
        counted.clear()
        provider.embedded.clear()

        added = jsonl(
            msg("user", "Where did we park the quetzal migration?"),
            msg("assistant", [{"type": "text", "text": "In the quetzal branch, behind a flag."}]),
        )
        append(file, added)
        report = engine.sync("watch")
        assert (report.indexed, report.appended) == (1, 1)
        # Read: the appended bytes, plus two anchor windows of at most 4 KB each.
        assert len(added) <= sum(counted) <= len(added) + 2 * ANCHOR_BYTES
        after = rows(engine)
        # Every chunk but the open last one is untouched: same row, id, text and vector.
        assert after[: len(before) - 1] == before[:-1]
        new = after[len(before) - 1 :]
        assert any("quetzal" in r[3] for r in new)
        # Only chunks with new text were embedded, and all got vectors; the other texts
        # embedded are line vectors (query.lines) of those new chunks only.
        texts = {r[3] for r in after}
        whole = [t for t in provider.embedded if t in texts]
        assert sorted(whole) == sorted(r[3] for r in new if r[3] != before[-1][3])
        lines = [t for t in provider.embedded if t not in texts]
        assert all(any(t in r[3] for r in new) for t in lines)
        assert all(r[4] is not None for r in after)
        assert_same_as_whole(engine, file)

        hit = engine.search("quetzal migration", sources=["sessions"], mode="keyword").results[0]
        assert hit.path == PATH and hit.end_line == 63 and 58 <= hit.start_line <= 62
        assert "quetzal" in engine.get(hit.citation).text
        ex = engine.get(f"{PATH}#L62-L63")
        assert ex.text.split("\n") == [
            "User: Where did we park the quetzal migration?",
            "Assistant: In the quetzal branch, behind a flag.",
        ]
        assert (ex.from_line, ex.to_line, ex.total_lines) == (62, 63, 63)
        # Unchanged since: the cheap mtime + size check skips it without reading.
        counted.clear()
        assert engine.sync("again").indexed == 0 and not counted
    finally:
        engine.close()


def test_the_indexed_part_is_trusted_not_reread(ws: Path, tmp_path: Path):
    """An honest observable: bytes changed in the middle after indexing (same size, outside
    the anchor windows) stay as indexed when only the tail is read; a full rebuild sees them."""
    records = [msg("user", "the albatross ledger")] + conversation(400)
    file = write(ws, PATH, jsonl(*records))
    engine = make_engine(ws, tmp_path / "idx.sqlite", tokens=400, overlap=80)
    try:
        engine.sync("test")
        raw = file.read_bytes()
        at = raw.index(b"question 200 about")
        assert ANCHOR_BYTES < at < len(raw) - 2 * ANCHOR_BYTES
        file.write_bytes(raw[:at] + b"question 200 zzzzz" + raw[at + 18 :])
        append(file, jsonl(msg("user", "the flamingo addendum")))
        assert engine.sync("watch").appended == 1
        assert engine.search("flamingo addendum").results
        assert engine.search("question 200 about", sources=["sessions"]).results
        assert not engine.search("zzzzz").results
        engine.sync("test", force=True)
        assert engine.search("zzzzz").results
    finally:
        engine.close()


def test_many_appends_equal_one_whole_read(ws: Path, tmp_path: Path):
    """Random appends of every shape; after each sync the chunks are exactly those of a whole
    read (the open chunk is re-chunked with what follows, overlap included)."""
    rng = random.Random(7)
    file = write(ws, PATH, "")
    engine = make_engine(ws, tmp_path / "idx.sqlite", tokens=40, overlap=10)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota"]
    words += ["kappa", "lambda", "mu"]
    try:
        appended = 0
        for step in range(40):
            recs: list[object] = []
            for _ in range(rng.randint(0, 4)):
                kind = rng.random()
                text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 60)))
                if kind < 0.1:  # one line far over the chunk budget
                    recs.append(msg("user", "longline " + "x" * rng.randint(300, 900)))
                elif kind < 0.2:
                    recs.append(msg("assistant", [{"type": "toolCall", "name": "exec"}]))
                elif kind < 0.3:
                    recs.append(msg("toolResult", [{"type": "text", "text": text}]))
                elif kind < 0.4:
                    recs.append("not json {")
                else:
                    role = rng.choice(["user", "assistant"])
                    recs.append(msg(role, text.replace(" mu ", "\n\nmu ")))
            if step % 9 == 5:  # the rest of the half line
                append(file, 'tent": "the rest of it"}}\n')
            elif step % 9 == 8:  # the newline after a whole line
                append(file, "\n")
            append(file, jsonl(*recs))
            if step % 9 == 4:  # half a line: left for the next sync
                append(file, '{"type": "message", "message": {"role": "user", "con')
            elif step % 9 == 7:  # a whole line without its newline yet: indexed, re-read
                append(file, json.dumps(msg("user", f"pending {step} " + words[step % 12])))
            report = engine.sync("watch")
            appended += report.appended
            assert not report.skipped
            assert_same_as_whole(engine, file)
        assert appended >= 30
    finally:
        engine.close()


def test_without_a_tail_state_the_next_growth_reads_whole(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """When the open chunk cannot be matched to its lines, no tail state is kept: the next
    growth is read whole, correctly, and tails resume after it."""
    file = write(ws, PATH, jsonl(*conversation(12)))
    engine = make_engine(ws, tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        with monkeypatch.context() as m:
            m.setattr(sync_mod, "_open_window", lambda *a: None)
            append(file, jsonl(msg("user", "the dugong note")))
            assert engine.sync("watch").appended == 1  # a tail, that leaves no tail state
        assert sql(engine.index_path, "SELECT tail FROM files WHERE path = ?", PATH) == [(None,)]
        with engine.indexer.reader() as store:
            assert store.file_tail(PATH) is None and store.file_infos([PATH]).get(PATH) is not None
        append(file, jsonl(msg("user", "the manatee note")))
        assert engine.sync("watch").appended == 0
        append(file, jsonl(msg("user", "the sea cow note")))
        assert engine.sync("watch").appended == 1
        assert all(engine.search(w).results for w in ("dugong", "manatee", "cow"))
        assert_same_as_whole(engine, file)
    finally:
        engine.close()


# -- partial, invalid and rewritten ------------------------------------------------------------


def test_a_partial_last_line_waits_then_is_indexed(ws: Path, tmp_path: Path):
    file = write(ws, PATH, jsonl(*conversation(6)))
    engine = make_engine(ws, tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        append(file, '{"type": "message", "message": {"role": "assistant", "content": "ocelot')
        report = engine.sync("watch")
        assert report.appended == 1 and not report.skipped
        assert not engine.search("ocelot").results
        append(file, ' sightings"}}\n')
        assert engine.sync("watch").appended == 1
        hit = engine.search("ocelot sightings").results[0]
        assert (hit.path, hit.start_line, hit.end_line) == (PATH, 7, 7)
        assert_same_as_whole(engine, file)
    finally:
        engine.close()


def test_an_unterminated_valid_line_is_indexed_and_read_again(ws: Path, tmp_path: Path):
    """A writer that has not written the newline yet (or never does): the line is searchable
    now and re-read next time, never indexed twice."""
    file = write(ws, PATH, jsonl(*conversation(6)))
    engine = make_engine(ws, tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        append(file, json.dumps(msg("user", "the narwhal forecast")))
        engine.sync("watch")
        assert engine.search("narwhal forecast").results
        assert_same_as_whole(engine, file)
        append(file, "\n" + jsonl(msg("assistant", "narwhal answer")))
        assert engine.sync("watch").appended == 1
        assert_same_as_whole(engine, file)
        assert sum("narwhal forecast" in r[3] for r in rows(engine)) == 1
    finally:
        engine.close()


def test_invalid_lines_in_the_tail_are_skipped_not_fatal(ws: Path, tmp_path: Path):
    file = write(ws, PATH, jsonl(*conversation(4)))
    engine = make_engine(ws, tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        append(
            file, b"\x00\xff\xfe junk\n[1, 2\n" + jsonl(msg("user", "the kestrel plan")).encode()
        )
        report = engine.sync("watch")
        assert report.appended == 1 and not report.skipped
        hit = engine.search("kestrel plan").results[0]
        assert hit.end_line == 7 and engine.get(f"{PATH}#L7").text == "User: the kestrel plan"
        assert_same_as_whole(engine, file)
    finally:
        engine.close()


@pytest.mark.parametrize("change", ["shrunk", "rewritten-longer", "same-size", "head"])
def test_a_rewritten_transcript_is_read_whole(ws: Path, tmp_path: Path, change: str):
    file = write(ws, PATH, jsonl(msg("user", "the restic backups"), *conversation(80)))
    engine = make_engine(ws, tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        raw = file.read_bytes()
        if change == "shrunk":
            file.write_text(jsonl(msg("user", "capybara only")))
        elif change == "rewritten-longer":
            file.write_text(jsonl(*conversation(80, start=500), msg("user", "capybara only")))
        elif change == "same-size":  # a word scrubbed in place, near the end
            at = raw.rindex(b"the weather")
            file.write_bytes(raw[:at] + b"capybara ok" + raw[at + 11 :])
        else:  # the first line edited, then more appended
            file.write_bytes(raw.replace(b"the restic backups", b"the capybara only!", 1))
            append(file, jsonl(msg("user", "more")))
        report = engine.sync("watch")
        assert (report.indexed, report.appended) == (1, 0)
        assert engine.search("capybara", sources=["sessions"]).results
        if change != "same-size":
            assert not engine.search("restic", sources=["sessions"]).results
        assert_same_as_whole(engine, file)
        append(file, jsonl(msg("user", "the okapi follow-up")))  # and tails work again
        assert engine.sync("watch").appended == 1 and engine.search("okapi").results
        assert_same_as_whole(engine, file)
    finally:
        engine.close()


# -- redaction, kill-safety, upgrade -----------------------------------------------------------


def test_secrets_in_the_tail_are_redacted(ws: Path, tmp_path: Path):
    file = write(ws, PATH, jsonl(*conversation(6)))
    engine = make_engine(ws, tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        recs = [msg("user", f"zebra {i}: " + ctx.format(s)) for i, (ctx, s) in enumerate(SECRETS)]
        recs.append(msg("assistant", f"zebra key\n{PRIVATE_KEY}\nend"))
        append(file, jsonl(*recs))
        assert engine.sync("watch").appended == 1
        idx = engine.index_path
        stored = "\n".join(r[0] for r in sql(idx, "SELECT text FROM chunks"))
        stored += "\n".join(r[0] or "" for r in sql(idx, "SELECT tail FROM files"))
        got = engine.get(PATH).text
        assert "zebra 3" in stored and "[REDACTED:" in stored and "[REDACTED:" in got
        for _, s in SECRETS:
            assert s not in stored and s not in got
        assert fts_leaks(idx, [s for _, s in SECRETS]) == []
        assert "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun" not in stored
        assert_same_as_whole(engine, file)
    finally:
        engine.close()


def test_a_failure_mid_tail_changes_nothing(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The tail is written in the sync's one transaction: chunks, line map and tail state
    commit together or not at all, and the next sync does the work again."""
    file = write(ws, PATH, jsonl(*conversation(30)))
    engine = make_engine(ws, tmp_path / "idx.sqlite")
    try:
        engine.sync("test")
        before = rows(engine)
        row = sql(engine.index_path, "SELECT * FROM files WHERE path = ?", PATH)
        append(file, jsonl(msg("user", "the pelican report")))

        def boom(*args, **kwargs):
            raise RuntimeError("killed")

        with monkeypatch.context() as m:
            m.setattr(Store, "extend_file", boom)
            with pytest.raises(RuntimeError):
                engine.sync("watch")
        assert rows(engine) == before and not engine.search("pelican").results
        assert sql(engine.index_path, "SELECT * FROM files WHERE path = ?", PATH) == row
        assert engine.sync("watch").appended == 1 and engine.search("pelican").results
        assert_same_as_whole(engine, file)
    finally:
        engine.close()


def test_a_version_1_index_is_upgraded_in_place(ws: Path, tmp_path: Path):
    file = write(ws, PATH, jsonl(*conversation(10)))
    idx = tmp_path / "idx.sqlite"
    engine = make_engine(ws, idx)
    engine.sync("test")
    ids = [r[0] for r in rows(engine)]
    engine.close()
    sql(idx, "ALTER TABLE files DROP COLUMN tail")  # what a version 1 index looks like
    sql(idx, "UPDATE meta SET value = '1' WHERE key = 'schema'")
    engine = make_engine(ws, idx)
    try:
        assert not list(tmp_path.glob("idx.sqlite.corrupt-*"))
        assert not engine.needs_rebuild and [r[0] for r in rows(engine)] == ids
        append(file, jsonl(msg("user", "the lemur memo")))
        first = engine.sync("watch")  # no tail state yet: read whole once
        assert (first.indexed, first.appended) == (1, 0) and engine.search("lemur").results
        append(file, jsonl(msg("user", "the tapir memo")))
        assert engine.sync("watch").appended == 1 and engine.search("tapir").results
        assert_same_as_whole(engine, file)
    finally:
        engine.close()
