"""Following another process's vector writes through the index's log, under races with this
process's own writes (real SQLite, the real local model)."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import write
from model_util import ensure_test_model, model_engine

from memory_ls.search.vector import VectorIndex


@pytest.fixture(scope="module")
def model_path() -> Path:
    return ensure_test_model()


def live_ids(vectors: VectorIndex, dims: int) -> set[int]:
    return {i for i, _ in vectors.search(np.ones(dims, dtype=np.float32), 10_000)}


@pytest.mark.model
def test_own_embeddings_landing_after_a_followed_delete_leave_no_phantom(
    ws: Path, tmp_path: Path, model_path: Path
):
    """The editor embeds a new note; before its in-memory vectors hear of it, the agent
    deletes that note and the editor's search follows the log. The editor's late news of its
    own vectors must not bring back the deleted chunks: the log has moved past them, so no
    later follow would ever remove them."""
    idx = tmp_path / "i.sqlite"
    editor, agent = model_engine(ws, idx, model_path), model_engine(ws, idx, model_path)
    with editor, agent:
        editor.sync()
        editor.search("dark mode")  # loads the vectors, notes the data version
        write(ws, "memory/new.md", "# New\n\nA note about sourdough starters and hydration.\n")
        editor.sync(embed=False)
        reached, go = threading.Event(), threading.Event()
        ctx = editor.indexer.ctx
        own_update = ctx.on_vectors
        assert own_update is not None

        def late(removed, added):  # the embedding thread, between its commit and this news
            reached.set()
            go.wait(10)
            own_update(removed, added)

        editor.indexer.ctx = replace(ctx, on_vectors=late)
        embedding = threading.Thread(target=editor.embed_pending)
        embedding.start()
        assert reached.wait(60)
        (ws / "memory/new.md").unlink()
        agent.sync()  # another process deletes the note's chunks
        editor.indexer.notice_other_writers()  # the editor's search thread meanwhile
        go.set()
        embedding.join(60)
        editor.indexer.ctx = ctx
        editor.search("anything at all", min_score=0)
        fresh = VectorIndex(editor.indexer.writer.all_embeddings)
        dims = editor.provider.dims
        assert live_ids(editor.vectors, dims) == live_ids(fresh, dims)


@pytest.mark.model
def test_another_process_s_commit_before_the_first_search_is_followed(
    ws: Path, tmp_path: Path, model_path: Path
):
    """The editor's first sync loads the vectors; an agent commits before the editor's first
    search, which is where the editor first notes the data version: that commit's vectors
    must still reach the editor, not wait for some later commit of another process."""
    idx = tmp_path / "i.sqlite"
    editor, agent = model_engine(ws, idx, model_path), model_engine(ws, idx, model_path)
    with editor, agent:
        editor.sync()  # loads the vectors (warm)
        write(ws, "memory/agent.md", "# Agent\n\nA note about sourdough starters.\n")
        agent.sync()
        editor.search("anything at all", min_score=0)
        fresh = VectorIndex(editor.indexer.writer.all_embeddings)
        dims = editor.provider.dims
        assert live_ids(editor.vectors, dims) == live_ids(fresh, dims)


def unit_blobs(ids, seed: int) -> list[tuple[int, bytes]]:
    rng = np.random.default_rng(seed)
    return [(i, rng.standard_normal(8).astype(np.float32).tobytes()) for i in ids]


def test_a_load_keeps_every_vector_another_process_did_not_change(tmp_path: Path):
    """Another process gives an old chunk (5) its vector while a load runs, between the load's
    count and its scan of the rows. The scan then finds one row more than it counted; what it
    leaves out must be a vector the log brings afterwards, never one that did not change
    (11): nothing would ever bring that one back."""
    from memory_ls.index.store import Store

    path = tmp_path / "i.sqlite"
    writer, reader, follower = Store(path), Store(path, create=False), Store(path, create=False)
    with writer.transaction():
        writer.set_embeddings(unit_blobs([*range(1, 5), *range(6, 12)], 1), "m")
    scans = []

    def during_the_scan(sql: str) -> None:
        if "FROM chunk_vectors ORDER BY id" in sql and not scans:
            scans.append(sql)
            with writer.transaction():  # another process, as the scan starts
                writer.set_embeddings(unit_blobs([5], 2), "m")

    def loader(large: int):
        reader.conn.set_trace_callback(during_the_scan)
        try:
            return reader.all_embeddings(large, room=True)
        finally:
            reader.conn.set_trace_callback(None)

    live = VectorIndex(loader, marker=reader.vector_log.mark)
    live.warm()
    live.follow(lambda mark: follower.vector_log.since(mark, 1024))
    fresh = VectorIndex(writer.all_embeddings)
    assert live_ids(live, 8) == live_ids(fresh, 8) == set(range(1, 12))
    for s in (writer, reader, follower):
        s.close()


def test_sign_codes_stay_contiguous_when_appends_outgrow_the_room():
    """Large mode scans the codes a word of every row at a time (``hamming``): grown as a
    transposed copy, each word's row was strided, and the scan took 2.2 times as long at
    20,000 vectors until the next compaction."""
    rng = np.random.default_rng(0)
    ids = np.arange(1, 201, dtype=np.int64)
    mat = unit_rows(rng, 200)
    live = VectorIndex(lambda _: (ids, mat.astype(np.float16)), large=100)  # no room left
    live.warm()
    live.update([], [(1000, unit_rows(rng, 1)[0])])
    assert live._codes is not None and live._codes.flags.c_contiguous
    q = unit_rows(rng, 1)[0]
    assert live.search(q, 3)[0][0] in {*ids.tolist(), 1000}


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, 64)).astype(np.float32)  # codes of two words
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_following_across_a_rebuild_copied_in_never_mixes_two_indexes(tmp_path: Path):
    """Another process's rebuild copies a new index over this one (a log of its own, the same
    chunk ids for other chunks) while the changes are being read: what is applied must come
    from one index, never the old log's numbers read in the new log (the new index's chunks
    11-13 on the old vectors)."""
    from memory_ls.index.store import Store

    path = tmp_path / "i.sqlite"
    agent, reader, follower = Store(path), Store(path, create=False), Store(path, create=False)
    rebuilt = Store(tmp_path / "rebuilt.sqlite")
    with rebuilt.transaction():
        rebuilt.set_embeddings(unit_blobs(range(1, 21), 3), "m")
    with agent.transaction():
        agent.set_embeddings(unit_blobs(range(1, 11), 1), "m")
    live = VectorIndex(
        lambda large: reader.all_embeddings(large, room=True), marker=reader.vector_log.mark
    )
    live.warm()
    with agent.transaction():
        agent.set_embeddings(unit_blobs(range(1, 4), 2), "m")
    before = VectorIndex(agent.all_embeddings)
    before.warm()

    def copy_in(sql: str) -> None:
        if "LEFT JOIN chunk_vectors" in sql:
            agent.replace_with(rebuilt)  # the other process's rebuild lands now

    def changes(mark):
        follower.conn.set_trace_callback(copy_in)
        try:
            return follower.vector_log.since(mark, 1024)
        finally:
            follower.conn.set_trace_callback(None)

    live.follow(changes)
    after = VectorIndex(agent.all_embeddings)
    q = unit_rows(np.random.default_rng(5), 1)[0][:8]
    q /= np.linalg.norm(q)
    got = live.search(q, 100)
    assert any(
        [i for i, _ in got] == [i for i, _ in want]
        and np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
        for want in (before.search(q, 100), after.search(q, 100))
    )
    for s in (agent, reader, follower, rebuilt):
        s.close()


def test_the_log_keeps_its_last_entries_whatever_a_transaction_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Every commit prunes the log: deleted vectors log a row each too, and a process that
    only deletes (notes removed, no new vectors) let it grow until the next vector write."""
    from memory_ls.index import vectors as stored
    from memory_ls.index.store import Store

    monkeypatch.setattr(stored, "KEPT_CHANGES", 3)
    store = Store(tmp_path / "i.sqlite")

    def logged() -> list[int]:
        return [i for (i,) in store.conn.execute("SELECT id FROM vector_changes ORDER BY seq")]

    with store.transaction():
        store.set_embeddings(unit_blobs(range(1, 11), 1), "m")
    assert logged() == [8, 9, 10]
    with store.transaction():
        store.conn.execute("DELETE FROM chunk_vectors WHERE id <= 6")
    assert logged() == [4, 5, 6]
    store.close()


def test_own_vectors_committed_before_a_load_that_holds_newer_ones_are_skipped(tmp_path: Path):
    """This process commits a chunk's vector; before its in-memory rows hear of it, another
    process gives the chunk a newer one and a load reads the rows past both. The news of the
    own commit, landing late, must not put the older vector back over the newer (the log is
    past both, so nothing would ever correct it)."""
    from memory_ls.index.schema import f16_blob, f32_blob
    from memory_ls.index.store import Store

    path = tmp_path / "i.sqlite"
    own, other, reader = Store(path), Store(path), Store(path, create=False)
    with own.transaction():
        own.set_embeddings(unit_blobs(range(1, 6), 1), "m")
    live = VectorIndex(
        lambda large: reader.all_embeddings(large, room=True), marker=reader.vector_log.mark
    )
    (older,) = unit_blobs([3], 2)
    at = []
    with own.transaction():
        own.set_embeddings([older], "m")
        own.after_commit(lambda: at.append(own.committed))  # as the engine's news reads it
    (newer,) = unit_blobs([3], 3)
    with other.transaction():
        other.set_embeddings([newer], "m")
    live.warm()  # the first search, say: it reads the newer vector
    late = np.frombuffer(f32_blob(f16_blob(older[1])), dtype=np.float32)
    live.update([], [(3, late)], at=at[0])
    q = np.frombuffer(f32_blob(f16_blob(newer[1])), dtype=np.float32)
    assert live.search(q, 1)[0][0] == 3 and live.search(q, 1)[0][1] > 0.999
    for s in (own, other, reader):
        s.close()


def test_own_writes_with_no_other_commit_between_move_the_rows_mark(tmp_path: Path):
    """A large own backfill after the load filled the log past what a follow reads (and past
    what the log keeps): the next commit of another process then loaded every vector again.
    With no other commit in between, the rows' mark moves with the own writes."""
    from memory_ls.index.store import Store

    path = tmp_path / "i.sqlite"
    own, other, reader = Store(path), Store(path), Store(path, create=False)
    with own.transaction():
        own.set_embeddings(unit_blobs(range(1, 11), 1), "m")
    loads = []

    def loader(large: int):
        loads.append(large)
        return reader.all_embeddings(large, room=True)

    live = VectorIndex(loader, marker=reader.vector_log.mark)
    live.warm()
    backfill = unit_blobs(range(100, 1300), 2)  # more than a follow reads (1,024 here)
    vecs = [(i, np.frombuffer(b, dtype=np.float32)) for i, b in backfill]
    with own.transaction():
        own.set_embeddings(backfill, "m")
        own.after_commit(lambda: live.update([], vecs, at=own.committed, alone=True))
    assert live.mark == own.vector_log.mark() and own.committed is None
    with other.transaction():
        other.set_embeddings(unit_blobs([5], 3), "m")
    live.follow(lambda mark: other.vector_log.since(mark, 1024))
    assert live.search(np.ones(8, dtype=np.float32), 1)  # answered from the followed rows
    assert len(loads) == 1 and live.size == 1210
    for s in (own, other, reader):
        s.close()


@pytest.mark.model
def test_every_file_of_one_own_commit_reaches_the_vectors(
    ws: Path, tmp_path: Path, model_path: Path
):
    """A sync commits up to 200 files in one transaction, and each file tells the in-memory
    vectors of its own changes, all with the same place in the log. With no other process
    about, the first one moves the rows' mark to that place: the others must still apply
    (they were skipped as held already, and no follow would ever bring them)."""
    e = model_engine(ws, tmp_path / "i.sqlite", model_path)
    with e:
        e.sync()
        e.search("dark mode")  # loads the vectors, notes the data version
        mem = ws / "memory"
        (mem / "2026-01-10-api-design.md").rename(mem / "x-api.md")
        (mem / "2026-02-01-deploy.md").rename(mem / "y-deploy.md")
        e.sync(embed=False)  # both renamed notes in one commit, their vectors from the cache
        hit = e.search("Deploys go through GitHub Actions", mode="vector", min_score=0)
        assert hit.results[0].path == "memory/y-deploy.md"
        fresh = VectorIndex(e.indexer.writer.all_embeddings)
        dims = e.provider.dims
        assert live_ids(e.vectors, dims) == live_ids(fresh, dims)


@pytest.mark.parametrize("dims", [384, 100, 13])
def test_sign_codes_pack_each_half_as_the_joined_bits_would(dims: int):
    """The codes are packed a half at a time (no copy of every bit of a million rows): the
    bytes must be those of packing both halves joined, whatever the dimensions."""
    from memory_ls.search.vector import _rotation, sign_codes

    rows = np.random.default_rng(dims).standard_normal((50, dims)).astype(np.float32)
    joined = np.concatenate([rows > 0, rows @ _rotation(dims) > 0], axis=1)
    bits = np.packbits(joined, axis=1)
    bits = np.pad(bits, ((0, 0), (0, -bits.shape[1] % 8)))
    assert np.array_equal(sign_codes(rows), np.ascontiguousarray(bits.view(np.uint64).T))
