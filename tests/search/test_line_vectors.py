"""Line vectors (schema 4): every line of a chunk embedded on its own after the chunk vectors,
and a search re-scoring its best candidates by their best line. Real model, real SQLite."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import write
from line_notes import ANSWER, FILLER, NOTE, QUESTION, long_note
from model_util import ensure_test_model

from memory_ls.embeddings.factory import create_provider
from memory_ls.engine import MemoryEngine
from memory_ls.index.line_vectors import segments
from memory_ls.index.schema import SCHEMA_VERSION, connect
from memory_ls.settings import Settings

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def model_path() -> Path:
    return ensure_test_model()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, "memory/2026-03-01-session-4.md", NOTE)
    write(root, "MEMORY.md", "# Memory\n\nPrefers tea.\n")  # one short line: no line vectors
    write(root, "memory/2026-03-02-plans.md", "# Plans\n\nBook the dentist for Tuesday.\n")
    return root


def engine(root: Path, idx: Path, model_path: Path, **lines: object) -> MemoryEngine:
    s = Settings(provider="local")
    s.local.model_path = str(model_path)
    for k, v in lines.items():
        setattr(s.query.lines, k, v)
    return MemoryEngine(root, s, index_path=idx)


def rows(idx: Path, sql: str, *params: object) -> list[tuple]:
    conn, _ = connect(idx, vec=False)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_segments_are_the_lines_worth_a_vector():
    long = " ".join(f"Sentence number {i} says something about the harbour." for i in range(20))
    text = "# Heading\n\nshort\nThe first real line of the note.\n\n" + long + "\n---\n"
    got = segments(text)
    assert got[0] == (3, "The first real line of the note.")
    # The 1,000-character line is cut into its sentences, each numbered with its line.
    assert [i for i, _ in got[1:]] == [5] * 20
    assert got[1][1] == "Sentence number 0 says something about the harbour."
    assert segments("# Only\n\nOne line worth a vector here.\n") == []  # the chunk says it
    assert segments(text, keep=lambda p: "first" in p) == []  # one part left: none
    zh = "对接口设置令牌桶限流，每个密钥每分钟一百次。超过限制时返回四二九错误。"
    assert segments(zh * 20 + "\nA second line about the limits.") != []
    assert len(segments(zh * 20)) == zh.count("。") * 20  # CJK sentence ends, no spaces


def test_lines_are_embedded_after_the_chunks_and_go_with_them(
    notes: Path, tmp_path: Path, model_path: Path
):
    idx = tmp_path / "i.sqlite"
    with engine(notes, idx, model_path) as e:
        e.sync()
        assert rows(idx, "SELECT count(*) FROM chunks WHERE lines = 0") == [(0,)]
        assert e.status()["pendingLineVectors"] == 0
        # A backfill cut short (the process ended) resumes where it stopped.
        conn, _ = connect(idx, vec=False)
        conn.execute("DELETE FROM chunk_lines")
        conn.execute("UPDATE chunks SET lines = 0")
        conn.close()
        assert e.status()["pendingLineVectors"] == 3
        assert e.embed_pending() == 0  # no chunk vector was missing
        assert e.status()["pendingLineVectors"] == 0
        stored = rows(
            idx,
            "SELECT c.text, l.rows, l.vectors FROM chunks c JOIN chunk_lines l ON l.id = c.id",
        )
        assert len(stored) == 1  # the session note; the one-line notes have none
        text, line_rows, blob = stored[0]
        want = segments(text)
        assert list(np.frombuffer(line_rows, np.uint16)) == [i for i, _ in want]
        got = np.frombuffer(blob, np.int8).astype(np.float32).reshape(len(want), -1)
        assert e.provider is not None
        direct = e.provider.embed_documents([p for _, p in want])
        cos = [float(unit(a) @ unit(b)) for a, b in zip(got, direct, strict=True)]
        assert min(cos) > 0.9999

        # An edit replaces the chunk: its old lines go, the new text's lines come.
        write(notes, "memory/2026-03-01-session-4.md", NOTE.replace("marathon", "triathlon"))
        e.sync()
        orphans = "SELECT count(*) FROM chunk_lines WHERE id NOT IN (SELECT id FROM chunks)"
        assert rows(idx, orphans) == [(0,)]
        assert rows(idx, "SELECT count(*) FROM chunks WHERE lines = 0") == [(0,)]
        (new_text,) = rows(idx, "SELECT c.text FROM chunks c JOIN chunk_lines l ON l.id = c.id")[0]
        assert "triathlon" in new_text
        (notes / "memory/2026-03-01-session-4.md").unlink()
        e.sync()
        assert rows(idx, "SELECT count(*) FROM chunk_lines") == [(0,)]


def test_the_best_line_lifts_a_long_chunk_by_the_documented_mix(
    notes: Path, tmp_path: Path, model_path: Path
):
    path = "memory/2026-03-01-session-4.md"
    with engine(notes, tmp_path / "off.sqlite", model_path, max_chunks=0) as e:
        e.sync()
        off = next(h for h in e.search(QUESTION, min_score=0).results if h.path == path)
        assert e.provider is not None
        q = unit(e.provider.embed_query(QUESTION))
        best = max(float(q @ unit(v)) for v in e.provider.embed_documents(FILLER + [ANSWER]))
    with engine(notes, tmp_path / "on.sqlite", model_path) as e:
        e.sync()
        on = next(h for h in e.search(QUESTION, min_score=0).results if h.path == path)
    assert off.vector_score is not None and on.vector_score is not None
    # The answering line is much closer to the question than the whole chunk is.
    assert best > off.vector_score + 0.1
    assert on.vector_score == pytest.approx(0.5 * off.vector_score + 0.5 * best, abs=2e-3)
    assert on.score > off.score
    # The hit points at the answering line, not at the first line naming Melanie.
    answer_line = NOTE.split("\n").index(ANSWER) + 1
    assert off.best_line == NOTE.split("\n").index(FILLER[1]) + 1
    assert on.best_line == answer_line


def test_an_index_past_max_chunks_drops_its_line_vectors(
    notes: Path, tmp_path: Path, model_path: Path
):
    idx = tmp_path / "i.sqlite"
    with engine(notes, idx, model_path) as e:
        e.sync()
    assert rows(idx, "SELECT count(*) FROM chunk_lines") == [(1,)]
    with engine(notes, idx, model_path, max_chunks=2) as e:  # 3 chunks: over
        report = e.sync()
        assert report.embedded == 0
        assert rows(idx, "SELECT count(*) FROM chunk_lines") == [(0,)]
        assert e.status()["pendingLineVectors"] == 0  # none will come: nothing waits
        with e.indexer.reader() as r:
            assert r.lines is not None and r.lines.count_pending() == 3  # though unembedded
        assert e.search(QUESTION).results  # still answers, from the chunk vectors


def test_lines_the_model_cannot_read_get_no_vector(tmp_path: Path, model_path: Path):
    root = tmp_path / "zh"
    lines = [
        "对接口设置令牌桶限流，每个密钥每分钟一百次请求。",
        "超过限制时返回四二九错误，并附带重试时间。",
        "限流的配置保存在共享的缓存服务里面。",
    ]
    write(root, "memory/2026-01-10-rate-limit.md", "# 限流\n\n" + "\n".join(lines) + "\n")
    idx = tmp_path / "zh.sqlite"
    with engine(root, idx, model_path) as e:
        e.sync()
    # MiniLM reads these as [UNK]: the chunk is done, with no line vectors.
    assert rows(idx, "SELECT count(*), sum(lines) FROM chunks") == [(1, 1)]
    assert rows(idx, "SELECT count(*) FROM chunk_lines") == [(0,)]


def test_a_schema_3_index_is_upgraded_and_only_its_lines_are_embedded(
    notes: Path, tmp_path: Path, model_path: Path
):
    idx = tmp_path / "v3.sqlite"
    with engine(notes, idx, model_path) as e:
        e.sync()
        vectors_before = rows(idx, "SELECT id, embedding FROM chunk_vectors ORDER BY id")
    # Back to schema 3 as the previous version wrote it: no lines column, no chunk_lines.
    conn, _ = connect(idx, vec=False)
    conn.executescript(
        "DROP TABLE chunk_lines; DROP INDEX chunks_lines_pending;"
        "ALTER TABLE chunks DROP COLUMN lines; ALTER TABLE files DROP COLUMN meta;"
        "UPDATE meta SET value = '3' WHERE key = 'schema';"
    )
    conn.close()
    with engine(notes, idx, model_path) as e:
        assert not list(tmp_path.glob("*.corrupt-*"))  # upgraded in place, not moved aside
        report = e.sync()
        assert not report.full and report.embedded == 0
        assert rows(idx, "SELECT value FROM meta WHERE key = 'schema'") == [(str(SCHEMA_VERSION),)]
        assert rows(idx, "SELECT id, embedding FROM chunk_vectors ORDER BY id") == vectors_before
        assert rows(idx, "SELECT count(*) FROM chunk_lines") == [(1,)]
        assert e.search(QUESTION).results[0].path == "memory/2026-03-01-session-4.md"


class Counting:
    """The real provider, remembering every text it was asked to embed."""

    def __init__(self, inner):
        self.inner, self.texts = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed_documents(self, texts):
        self.texts += list(texts)
        return self.inner.embed_documents(texts)


def test_a_rebuild_keeps_the_lines_of_unchanged_chunks(
    notes: Path, tmp_path: Path, model_path: Path
):
    idx = tmp_path / "i.sqlite"
    with engine(notes, idx, model_path) as e:
        e.sync()
        before = rows(
            idx, "SELECT c.hash, l.rows, l.vectors FROM chunks c JOIN chunk_lines l USING(id)"
        )
    s = Settings(provider="local")
    s.local.model_path = str(model_path)
    s.chunking.tokens = 300  # new chunking: a rebuild, with the same text in these small notes
    provider, _ = create_provider(s)
    counting = Counting(provider)
    with MemoryEngine(notes, s, provider=counting, index_path=idx) as e:
        report = e.sync()
        assert report.full and report.embedded == 0  # chunk vectors from the cache
        assert counting.texts == []  # and no line embedded again
        after = rows(
            idx, "SELECT c.hash, l.rows, l.vectors FROM chunks c JOIN chunk_lines l USING(id)"
        )
        assert after == before
        assert e.status()["pendingLineVectors"] == 0
        assert e.search(QUESTION).results[0].best_line == NOTE.split("\n").index(ANSWER) + 1


def test_an_edit_re_embeds_only_the_lines_of_the_chunks_it_changed(
    tmp_path: Path, model_path: Path
):
    root = tmp_path / "ws"
    write(root, "memory/diary.md", long_note())
    idx = tmp_path / "i.sqlite"
    s = Settings(provider="local")
    s.local.model_path = str(model_path)
    counting = Counting(create_provider(s)[0])
    with MemoryEngine(root, s, provider=counting, index_path=idx) as e:
        e.sync()
        chunks = rows(idx, "SELECT id, text FROM chunks ORDER BY start_line")
        assert len(chunks) >= 3 and rows(idx, "SELECT count(*) FROM chunk_lines") == [
            (len(chunks),)
        ]
        counting.texts.clear()
        # An editor buffer with one line added at the end: the file is re-chunked as a whole.
        e.set_document(root / "memory/diary.md", long_note() + "Entry 60: the quetzal left.\n")
        e.embed_pending()
        after = rows(idx, "SELECT id, text FROM chunks ORDER BY start_line")
        changed = [t for _, t in after if t not in {t for _, t in chunks}]
        assert changed and len(changed) < len(after)
        # Embedded: the changed chunks and their lines, nothing of the chunks left as they were.
        assert counting.texts and all(any(t in c for c in changed) for t in counting.texts)
        assert rows(idx, "SELECT count(*) FROM chunks WHERE lines = 0") == [(0,)]
        assert rows(idx, "SELECT count(*) FROM chunk_lines") == [(len(after),)]
        orphans = "SELECT count(*) FROM chunk_lines WHERE id NOT IN (SELECT id FROM chunks)"
        assert rows(idx, orphans) == [(0,)]


def test_lines_read_before_an_edit_are_not_stored_for_the_new_text(tmp_path: Path):
    from memory_ls.index.line_vectors import ChunkLines
    from memory_ls.index.store import Store

    store = Store(tmp_path / "s.sqlite")
    try:
        with store.transaction():
            store.conn.execute(
                "INSERT INTO chunks(id, path, source, start_line, end_line, hash, text, vec, "
                "updated_at) VALUES (1, 'a.md', 'memory', 1, 2, 'new-hash', 'x\\ny', 1, 0)"
            )
            # A stale row under the same id, as an older writer could leave it.
            store.conn.execute("INSERT INTO chunk_lines VALUES (1, x'0000', x'0101')")
        assert store.lines is not None
        unit = np.eye(2, 4, dtype=np.float32)
        lines = {1: ChunkLines(np.array([0, 1]), unit)}
        with store.transaction():
            store.lines.put([(1, "old-hash")], lines)  # read before the text changed
        assert store.lines.count_pending() == 1  # still waiting, for the new text's lines
        assert set(store.lines.get([1])) == {1}  # the stale row is untouched by a miss
        with store.transaction():
            store.lines.put([(1, "new-hash")], {})  # the new text has no lines worth a vector
        assert store.lines.count_pending() == 0 and store.lines.get([1]) == {}
    finally:
        store.close()


def test_reciprocal_rank_fusion_sees_the_re_scored_vector_ranks(tmp_path: Path):
    from memory_ls.index.line_vectors import ChunkLines
    from memory_ls.index.store import Store
    from memory_ls.search.fusion import Candidate
    from memory_ls.search.score import by_lines
    from memory_ls.settings.query import LineSettings

    store = Store(tmp_path / "s.sqlite")
    try:
        with store.transaction():
            for cid in (1, 2):
                store.conn.execute(
                    "INSERT INTO chunks(id, path, source, start_line, end_line, hash, text, vec, "
                    "updated_at) VALUES (?, 'a.md', 'memory', 1, 2, ?, 'x\\ny', 1, 0)",
                    (cid, f"h{cid}"),
                )
        q = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
        # Chunk 2 ranks second by its own vector but holds a line that is the query itself.
        best = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], dtype=np.float32)
        far = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]], dtype=np.float32)
        assert store.lines is not None
        with store.transaction():
            store.lines.put(
                [(1, "h1"), (2, "h2")],
                {1: ChunkLines(np.array([0, 1]), far), 2: ChunkLines(np.array([0, 1]), best)},
            )
        one = Candidate(1, vector=0.5, vector_rank=1)
        two = Candidate(2, vector=0.4, vector_rank=2)
        kw = Candidate(3, vector=0.1, text=1.0)  # a keyword candidate the KNN did not return
        lines = store.lines
        closest = by_lines(lines, q, [one, two, kw], LineSettings(), lambda c: c.vector or 0.0)
        assert set(closest) == {1, 2}
        assert two.vector == pytest.approx(0.7) and one.vector == pytest.approx(0.25)
        assert (two.vector_rank, one.vector_rank, kw.vector_rank) == (1, 2, None)
    finally:
        store.close()
