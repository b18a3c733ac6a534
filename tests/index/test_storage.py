"""The compact index layout (schema 3): vectors once, as float16, FTS5 contentless, and an index
written by the previous layout (schema 2) upgraded in place with nothing lost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import fts_leaks, write
from model_util import ensure_test_model
from model_util import model_engine as engine

from memory_ls.engine import MemoryEngine
from memory_ls.index.schema import FTS_TOKENIZER, SCHEMA_VERSION, connect
from memory_ls.index.store import Store
from memory_ls.settings import Settings
from memory_ls.text import fts_text

pytestmark = pytest.mark.model

# Schema 2 as memory-ls wrote it until this layout (frozen here: the code no longer has it).
V2_DDL = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (
  path TEXT PRIMARY KEY, source TEXT NOT NULL, hash TEXT NOT NULL, mtime REAL NOT NULL,
  size INTEGER NOT NULL, date TEXT, lines INTEGER NOT NULL DEFAULT 0, line_map TEXT, tail TEXT
);
CREATE TABLE chunks (
  id INTEGER PRIMARY KEY, path TEXT NOT NULL, source TEXT NOT NULL,
  start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash TEXT NOT NULL,
  model TEXT NOT NULL DEFAULT '', text TEXT NOT NULL, embedding BLOB, updated_at REAL NOT NULL
);
CREATE INDEX chunks_path ON chunks(path);
CREATE INDEX chunks_pending ON chunks(id) WHERE embedding IS NULL;
CREATE VIRTUAL TABLE chunks_fts USING fts5(body, tokenize = '{FTS_TOKENIZER}');
CREATE TABLE embedding_cache (
  provider TEXT NOT NULL, model TEXT NOT NULL, provider_key TEXT NOT NULL, hash TEXT NOT NULL,
  embedding BLOB NOT NULL, used_at REAL NOT NULL,
  PRIMARY KEY (provider, model, provider_key, hash)
);
CREATE INDEX embedding_cache_lru ON embedding_cache(used_at);
"""
QUERIES = ["how do we throttle clients", "database choice", "rollback image", "token bucket"]


@pytest.fixture(scope="module")
def model_path() -> Path:
    return ensure_test_model()


def query(idx: Path, sql: str, *params: object) -> list[tuple]:
    conn, _ = connect(idx)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def answers(e: MemoryEngine) -> list[list[tuple[str, int, float]]]:
    return [
        [(h.path, h.start_line, round(h.score, 3)) for h in e.search(q, min_score=0).results]
        for q in QUERIES
    ]


def chunk_vectors(e: MemoryEngine) -> dict[int, np.ndarray]:
    with e.indexer.reader() as r:
        ids, mat = r.all_embeddings()
    return {int(i): mat[n] for n, i in enumerate(ids)}


def write_v2(src: Path, dest: Path) -> None:
    """``dest``: the index ``src`` (schema 3) as schema 2 stored it, vectors in every place
    schema 2 kept them (chunks and the cache, float32) and one cache entry of a deleted chunk."""
    conn, _ = connect(dest, vec=False)
    conn.executescript(V2_DDL)
    conn.execute("ATTACH DATABASE ? AS new", (str(src),))
    conn.execute(
        "INSERT INTO files SELECT path, source, hash, mtime, size, date, lines, line_map, tail "
        "FROM new.files"
    )
    conn.execute("INSERT INTO meta SELECT * FROM new.meta WHERE key != 'ftsText'")
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    key = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    rows = conn.execute(
        "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.hash, c.model, c.text, "
        "v.embedding, c.updated_at FROM new.chunks c JOIN new.chunk_vectors v ON v.id = c.id"
    ).fetchall()
    conn.execute("DETACH DATABASE new")
    f32 = [np.frombuffer(r[8], np.float16).astype(np.float32).tobytes() for r in rows]
    conn.executemany(
        "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(*r[:8], b, r[9]) for r, b in zip(rows, f32, strict=True)],
    )
    conn.executemany(
        "INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)", [(r[0], fts_text(r[7])) for r in rows]
    )
    cache = [(r[5], b) for r, b in zip(rows, f32, strict=True)] + [("gone-chunk", f32[0])]
    conn.executemany(
        "INSERT OR IGNORE INTO embedding_cache VALUES (?, ?, ?, ?, ?, 1.0)",
        [(key["provider"], key["model"], key["providerKey"], h, b) for h, b in cache],
    )
    conn.commit()
    conn.close()


def schema_2_index(
    ws: Path, tmp_path: Path, model_path: Path
) -> tuple[Path, Path, dict[int, np.ndarray], list[list[tuple[str, int, float]]]]:
    """(schema 3 index, its schema 2 copy, the chunk vectors, the answers to QUERIES)."""
    v3 = tmp_path / "v3.sqlite"
    with engine(ws, v3, model_path) as e:
        e.sync()
        before = answers(e)
        vectors = chunk_vectors(e)
    v2 = tmp_path / "v2.sqlite"
    write_v2(v3, v2)
    return v3, v2, vectors, before


def test_each_vector_is_stored_once_and_moves_to_the_cache_when_its_chunk_goes(
    ws: Path, tmp_path: Path, model_path: Path
):
    idx = tmp_path / "i.sqlite"
    e = engine(ws, idx, model_path)
    try:
        first = e.sync()
        n = e.status()["chunks"]
        assert first.embedded == n > 0
        assert query(idx, "SELECT count(*) FROM chunk_vectors") == [(n,)]
        assert query(idx, "SELECT count(*) FROM embedding_cache") == [(0,)]
        assert {len(b) for (b,) in query(idx, "SELECT embedding FROM chunk_vectors")} == {384 * 2}
        deploy = "memory/2026-02-01-deploy.md"
        (deploy_chunks,) = query(idx, "SELECT count(*) FROM chunks WHERE path = ?", deploy)[0]
        text = (ws / deploy).read_text()
        (ws / deploy).unlink()
        e.sync()
        # Its vectors are kept in the cache (once), and bringing the file back embeds nothing.
        assert query(idx, "SELECT count(*) FROM embedding_cache") == [(deploy_chunks,)]
        write(ws, deploy, text)
        back = e.sync()
        assert back.embedded == 0 and back.cache_hits == deploy_chunks
        assert query(idx, "SELECT count(*) FROM embedding_cache") == [(0,)]
        assert e.search("rollbacks previous image").results[0].path == deploy
    finally:
        e.close()


def test_fts_keeps_no_text_and_an_edit_leaves_no_stale_tokens(ws: Path, tmp_path: Path):
    s = Settings(provider="none")
    idx = tmp_path / "k.sqlite"
    with MemoryEngine(ws, s, index_path=idx) as e:
        write(ws, "memory/zoo.md", "# Zoo\n\nThe okapiwalkabout happened on Tuesday.\n")
        e.sync()
        assert fts_leaks(idx, ["okapiwalkabout"]) == ["okapiwalkabout"]
        assert query(idx, "SELECT name FROM sqlite_master WHERE name = 'chunks_fts_content'") == []
        write(ws, "memory/zoo.md", "# Zoo\n\nThe capybaraparade happened on Tuesday.\n")
        e.sync()
        assert fts_leaks(idx, ["okapiwalkabout", "capybaraparade"]) == ["capybaraparade"]
        assert not e.search("okapiwalkabout", min_score=0).results
        assert e.search("capybaraparade").results[0].path == "memory/zoo.md"


def test_a_schema_2_index_is_upgraded_in_place_with_nothing_lost(
    ws: Path, tmp_path: Path, model_path: Path
):
    _, v2, vectors, before = schema_2_index(ws, tmp_path, model_path)
    with engine(ws, v2, model_path) as e:
        assert not list(tmp_path.glob("*.corrupt-*"))  # upgraded, not moved aside
        report = e.sync()
        assert not report.full and report.embedded == 0  # no rebuild, nothing embedded again
        assert query(v2, "SELECT value FROM meta WHERE key = 'schema'") == [(str(SCHEMA_VERSION),)]
        assert "embedding" not in {r[1] for r in query(v2, "PRAGMA table_info(chunks)")}
        assert (
            "content" in query(v2, "SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'")[0][0]
        )
        after = chunk_vectors(e)
        assert after.keys() == vectors.keys()
        assert min(float(after[i] @ vectors[i]) for i in vectors) > 0.9999
        assert answers(e) == before
        # The cache lost its copies of the vectors chunks hold, and kept the others.
        held = query(
            v2, "SELECT count(*) FROM embedding_cache WHERE hash IN (SELECT hash FROM chunks)"
        )
        assert held == [(0,)]
        assert query(v2, "SELECT count(*) FROM embedding_cache WHERE hash = 'gone-chunk'") == [(1,)]
        mark = e.indexer.writer.vector_log.mark()  # the log of changed vectors came with it
        assert mark is not None
        # Deleting through the upgraded FTS table leaves no stale tokens.
        write(ws, "memory/2026-02-01-deploy.md", "# Weekend\n\nPlanted wombatweeds today.\n")
        e.sync()
        assert fts_leaks(v2, ["rollbacks", "wombatweeds"]) == ["wombatweeds"]
        changed = e.indexer.writer.vector_log.since(mark, 100)
        assert changed is not None and changed[1] and changed[2]  # the old chunks, the new one


def test_an_unreadable_upgrade_moves_the_index_aside_and_rebuilds(ws: Path, tmp_path: Path):
    idx = tmp_path / "bad.sqlite"
    conn, _ = connect(idx, vec=False)
    conn.executescript(V2_DDL)
    conn.execute("INSERT INTO meta VALUES ('schema', '99')")  # a version this code cannot read
    conn.commit()
    conn.close()
    with MemoryEngine(ws, Settings(provider="none"), index_path=idx) as e:
        e.sync()
        assert e.search("token bucket").results
    assert len(list(tmp_path.glob("bad.sqlite.corrupt-*"))) == 1


def test_sqlite_vec_table_exists_only_while_it_is_the_backend(
    ws: Path, tmp_path: Path, model_path: Path
):
    idx = tmp_path / "i.sqlite"
    vec_rows = "SELECT count(*) FROM sqlite_master WHERE name = 'chunks_vec'"
    with engine(ws, idx, model_path) as e:
        e.sync()
        n = e.status()["chunks"]
        numpy_answers = answers(e)
    assert query(idx, vec_rows) == [(0,)]  # the default keeps no second copy
    s = Settings(provider="local")
    s.local.model_path = str(model_path)
    s.store.vector_backend = "sqlite-vec"
    with MemoryEngine(ws, s, index_path=idx) as e:
        assert e.status()["vectorBackend"] == "sqlite-vec"
        assert query(idx, "SELECT count(*) FROM chunks_vec") == [(n,)]  # filled from the store
        assert answers(e) == numpy_answers
    with engine(ws, idx, model_path) as e:
        e.sync()
        assert e.status()["vectorBackend"] == "numpy"
    assert query(idx, vec_rows) == [(0,)]


def test_a_rebuild_is_seeded_from_a_schema_2_index_without_embedding_again(
    ws: Path, tmp_path: Path, model_path: Path
):
    v3, v2, vectors, _ = schema_2_index(ws, tmp_path, model_path)
    n = len(vectors)
    seeded = Store(tmp_path / "new.sqlite")
    try:
        assert seeded.cache.copy_from(v2) >= n  # float32 vectors of schema 2, as float16
        key = seeded.cache.index_key()
        assert key == ("", "", "")  # the new index holds no chunks yet
        meta = dict(query(v2, "SELECT key, value FROM meta"))
        old_key = (meta["provider"], meta["model"], meta["providerKey"])
        hashes = [h for (h,) in query(v3, "SELECT hash FROM chunks ORDER BY id")]
        got = seeded.cache.get(old_key, hashes)
        assert len(got) == len(set(hashes))
        ids = [i for (i,) in query(v3, "SELECT id FROM chunks ORDER BY id")]
        for cid, h in zip(ids, hashes, strict=True):
            v = np.frombuffer(got[h], dtype=np.float32)
            assert v.shape == (384,) and float(v @ vectors[cid]) > 0.9999
    finally:
        seeded.close()


def test_background_sample_is_spread_over_the_ids_and_skips_holes():
    """sqlite-vec's calibration sample: looked up by id (no pass over the table), even over
    the id range, only vectors that exist, at most ``limit``, all of a small index."""
    from memory_ls.index.vectors import sample_embeddings

    conn, _ = connect(":memory:", vec=False)
    conn.execute("CREATE TABLE chunk_vectors (id INTEGER PRIMARY KEY, embedding BLOB)")
    rng = np.random.default_rng(1)
    vecs = {i: rng.standard_normal(8).astype(np.float16) for i in range(1, 1001)}
    conn.executemany(
        "INSERT INTO chunk_vectors VALUES (?, ?)", [(i, v.tobytes()) for i, v in vecs.items()]
    )
    assert sample_embeddings(conn, 2000, 8).shape == (1000, 8)  # a small index: every vector
    conn.execute("DELETE FROM chunk_vectors WHERE id % 2 = 0")  # holes: the even ids
    got = sample_embeddings(conn, 100, 8)
    assert 0 < len(got) <= 100
    odd = np.stack([v.astype(np.float32) for i, v in vecs.items() if i % 2])
    odd /= np.linalg.norm(odd, axis=1, keepdims=True)
    nearest = (got @ odd.T).max(axis=1)
    assert np.all(nearest > 0.999)  # each sampled row is one of the vectors that exist
    conn.execute("DELETE FROM chunk_vectors")
    assert sample_embeddings(conn, 100, 8).shape == (0, 8)
