"""A keyword search split by rowid range over several connections answers exactly what one
FTS5 query over the whole table answers: the same chunks, BM25 scores and order."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from conftest import spy_submit, write

import memory_ls.index.keyword_scan as keyword_scan
from memory_ls.engine import MemoryEngine
from memory_ls.index.keyword_scan import KeywordScan
from memory_ls.search.query import match_expression, query_terms
from memory_ls.settings import Settings

WORDS = [
    "redis",
    "backoff",
    "ledger",
    "quota",
    "tenant",
    "rollback",
    "gateway",
    "cron",
    "vault",
    "schema",
]


@pytest.fixture
def engine(tmp_path: Path):
    rng = random.Random(3)
    root = tmp_path / "ws"
    for i in range(400):
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40)))
        # Every tenth note is the same text: equal BM25 scores, so the order of ties counts.
        write(root, f"memory/n{i:03}.md", f"# N\n\n{'redis ledger' if i % 10 == 0 else body}\n")
    e = MemoryEngine(root, Settings(provider="none"), index_path=tmp_path / "i.sqlite")
    e.sync()
    yield e
    e.close()


def expr(query: str) -> str:
    out = match_expression(query_terms(query))
    assert out is not None
    return out


def test_ranges_give_the_one_query_answer(engine: MemoryEngine):
    with engine.indexer.reader() as store:
        scan = KeywordScan(store.conn, store.path, cores=3)
        try:
            scan.search(expr("redis"), 25)
            assert scan._siblings == []  # nothing said the query is large: one query
            for q in ("redis", "redis ledger", "vault OR cron backoff", "tenant quota schema"):
                whole = scan.search(expr(q), 25)
                assert len(whole) == 25
                split = scan.search(expr(q), 25, postings=10**6)
                assert split == whole
            assert len(scan._siblings) == 2  # three ranges: this connection and two more
            ties = scan.search(expr("redis ledger"), 400, postings=10**6)
            assert len({r for _, r in ties}) < len(ties)  # the equal notes tie...
            assert ties == sorted(ties, key=lambda r: (r[1], r[0]))  # ...and rowid orders them
        finally:
            scan.close()


def test_a_failing_range_raises_and_leaves_no_range_running(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
):
    finished: list[object] = []
    real_range = keyword_scan._range

    def slow_elsewhere(conn, *args):
        if conn is not store.conn:  # the sibling's range is still running when ours fails
            time.sleep(0.3)
        try:
            return real_range(conn, *args)
        finally:
            finished.append(conn)

    monkeypatch.setattr(keyword_scan, "_range", slow_elsewhere)
    with engine.indexer.reader() as store:
        scan = KeywordScan(store.conn, store.path, cores=2)
        try:
            with pytest.raises(Exception, match="fts5"):
                scan.search("AND AND", 10, postings=10**6)  # not FTS5 syntax
            assert len(finished) == 2  # the sibling's range ended before the search returned
            assert scan.search(expr("redis"), 5, postings=10**6) == scan.search(expr("redis"), 5)
        finally:
            scan.close()


def test_the_engine_splits_a_large_keyword_search(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(keyword_scan, "usable_cores", lambda: 2)  # CI may have one core
    engine.indexer.readers.drop()  # readers made from here on see two cores
    queries = ["redis backoff", "ledger", "tenant quota rollback", "vault"]

    def answers() -> list[list[tuple[str, int, float]]]:
        return [
            [(h.path, h.start_line, h.score) for h in engine.search(q, max_results=8).results]
            for q in queries
        ]

    whole = answers()
    monkeypatch.setattr(keyword_scan, "SPLIT_FROM", 1)
    ranges = spy_submit(monkeypatch, keyword_scan._PARTS)
    assert answers() == whole
    assert len(ranges) >= len(queries)  # every query ran at least one range elsewhere
    assert all(len(hits) == 8 for hits in whole)


def test_the_chunk_count_read_from_fts5_follows_every_write(tmp_path: Path):
    """Document frequencies are judged against the number of chunks, which comes from FTS5's
    averages record (count(*) reads the whole table): it must equal count(*) as files come
    and go, from an empty index on."""
    from memory_ls.index.vocab import varint

    assert varint(bytes.fromhex("c3fd4e")) == 1_113_806  # as FTS5 wrote it for 1.1M rows
    assert varint(b"\xff" * 9) == 2**64 - 1 and varint(b"\x81") is None
    root = tmp_path / "ws"
    write(root, "MEMORY.md", "# Memory\n")
    e = MemoryEngine(root, Settings(provider="none"), index_path=tmp_path / "i.sqlite")
    try:
        for step in range(4):
            e.sync()
            with e.indexer.reader() as store:
                store._df._df_time = float("-inf")  # past the cache's lifetime
                expected = store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
                assert store.doc_frequencies(["redis"])[1] == expected
            if step == 0:
                for i in range(30):
                    write(root, f"memory/n{i}.md", f"# N{i}\n\nredis {i}\n\n" * (i % 4 + 1))
            elif step == 1:
                for i in range(0, 30, 3):
                    (root / f"memory/n{i}.md").unlink()
            else:
                write(root, "memory/n1.md", "# N1\n\nnothing else\n")
        assert expected > 0
    finally:
        e.close()


def test_a_chunk_rewritten_during_a_split_search_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """An edit commits between the bounds being read and a range running: the edited chunk
    leaves its old id for one past the old largest, which only an open-ended last range
    still holds."""
    root = tmp_path / "ws"
    for i in range(40):
        text = "zebraword redis" if i == 30 else f"redis note {i}"
        write(root, f"memory/n{i:02}.md", f"# N{i}\n\n{text}\n")
    e = MemoryEngine(root, Settings(provider="none"), index_path=tmp_path / "i.sqlite")
    edited: list[bool] = []
    real_range = keyword_scan._range

    def edit_first(conn, *args):
        if conn is not store.conn and not edited:  # the last range, before it reads
            write(root, "memory/n30.md", "# N30\n\nzebraword redis, edited\n")
            e.sync()
            edited.append(True)
        return real_range(conn, *args)

    monkeypatch.setattr(keyword_scan, "_range", edit_first)
    try:
        e.sync()
        with e.indexer.reader() as store:
            scan = KeywordScan(store.conn, store.path, cores=2)
            try:
                before = store.fts_search(expr("zebraword"), 5)
                assert len(before) == 1
                hits = scan.search(expr("zebraword"), 5, postings=10**6)
                assert edited
                assert len(hits) == 1 and hits[0][0] > before[0][0]  # found under its new id
            finally:
                scan.close()
    finally:
        e.close()


def test_words_left_out_are_scored_back_for_the_chunks_found(engine: MemoryEngine):
    """Words left out of the FTS5 query for speed still count in the BM25 of every chunk the
    other words find: the answer is the whole query's best among the chunks that hold one of
    the kept words, with the same scores."""
    with engine.indexer.reader() as store:
        scan = KeywordScan(store.conn, store.path, cores=2)
        try:
            for kept, left, limit in (
                ("vault", "redis", 10),
                ("cron backoff", "ledger tenant", 25),
                ("schema", "redis ledger quota", 60),
                ("gateway", "rollback", 400),
            ):
                holding = {cid for cid, _ in scan.search(expr(kept), 10**6)}
                whole = scan.search(expr(f"{kept} {left}"), 10**6)
                want = [(cid, r) for cid, r in whole if cid in holding][:limit]
                for postings in (0, 10**6):  # one query, and ranges on two connections
                    got = scan.search(expr(kept), limit, postings, left_out=expr(left))
                    assert [c for c, _ in got] == [c for c, _ in want]
                    assert [r for _, r in got] == pytest.approx([r for _, r in want], abs=1e-9)
                alone = scan.search(expr(kept), limit)
                assert [c for c, _ in alone] != [c for c, _ in want]  # the left-out words count
        finally:
            scan.close()


def test_a_word_over_the_postings_budget_still_ranks_the_chunks_found(tmp_path: Path):
    """A query whose words match more chunks than ``query.keywordPostingsBudget`` leaves the
    most common word out of the FTS5 query; the chunks the rarer word finds are still ranked
    (and scored) as the whole query ranks them."""
    # "walrus" alone in 20 notes, with "deploy" in 10 more; "deploy" in a fifth of all.
    words = {i: "walrus" if i < 20 else "walrus deploy" for i in range(30)}
    words.update({i: "deploy" for i in range(30, 1100) if i % 5 == 0})
    whole, budgeted = (budget_run(tmp_path, words, "walrus deploy", 10, b) for b in (0, 100))
    assert [p for p, _ in whole] == [f"memory/n{i:04}.md" for i in range(20, 30)]
    assert budgeted == whole


def budget_run(
    tmp_path: Path, words: dict[int, str], query: str, limit: int, budget: int
) -> list[tuple[str, float]]:
    """The hits (path, score) of ``query`` over 1,100 notes, note ``i`` holding ``words[i]``,
    with ``query.keywordPostingsBudget`` set to ``budget``."""
    root = tmp_path / "ws"
    if not root.exists():
        for i in range(1100):
            text = f"# Note\n\nstatus update for the week {words.get(i, '')}\n"
            write(root, f"memory/n{i:04}.md", text)
    s = Settings(provider="none")
    s.query.keyword_postings_budget = budget
    with MemoryEngine(root, s, index_path=tmp_path / "i.sqlite") as e:
        e.sync()
        hits = e.search(query, max_results=limit, min_score=0).results
        return [(h.path, h.score) for h in hits]


def test_a_very_common_word_is_counted_from_a_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """On a large index a word in most chunks is counted in a few id windows (reading its
    whole list cost 20-30 ms at a million chunks); every other word is counted exactly."""
    import memory_ls.index.vocab as vocab

    monkeypatch.setattr(vocab, "ESTIMATE_FROM", 1000)
    monkeypatch.setattr(vocab, "WINDOWS", 8)
    root = tmp_path / "ws"
    # "databases" in 3 of 4 notes (its token "databas" stems again to "databa": the sample must
    # match the word), "walrus" in 1 of 5, "ferry" in 2.
    for i in range(1600):
        words = ["databases" if i % 4 else "", "walrus" if i % 5 == 0 else ""]
        write(root, f"memory/n{i:04}.md", f"# N\n\n{' '.join(words)} {'ferry' * (i < 2)}\n")
    with MemoryEngine(root, Settings(provider="none"), index_path=tmp_path / "i.sqlite") as e:
        e.sync()
        with e.indexer.reader() as store:
            exact = [
                store.conn.execute(
                    "SELECT count(*) FROM chunks WHERE text LIKE ?", (f"%{w}%",)
                ).fetchone()[0]
                for w in ("databases", "walrus", "ferry")
            ]
            assert exact == [1200, 320, 2]
            counted: list[str] = []
            real_count = store._df._count
            monkeypatch.setattr(store._df, "_count", lambda t: counted.append(t) or real_count(t))
            df, total = store.doc_frequencies(["databases", "walrus", "ferry"])
            assert total == 1600
            assert sorted(counted) == ["ferri", "walru"]  # stemmed, as FTS5 keeps them
            assert df[1:] == exact[1:]
            assert abs(df[0] - 1200) <= 60  # sampled


ODD = {0: "alpha bravo bravo charlie", 1: "alpha alpha bravo charlie", 20: "charlie"}


def test_a_budgeted_search_ranks_ties_as_the_whole_query(tmp_path: Path):
    """FTS5 sums BM25 over the phrases in the order of the expression, so the whole query must
    list its words as the search over the kept words and then those left out does: n0000 and
    n0001 score alike over "bravo alpha charlie" but for the order of the sum (bravo and alpha
    are in the same chunks), and their order and scores are the same with or without the
    budget (bravo left out by it)."""
    words = {i: ODD.get(i, "alpha bravo" if i < 20 else "") for i in range(1100)}
    whole, budgeted = (budget_run(tmp_path, words, "bravo alpha charlie", 3, b) for b in (0, 30))
    assert {p for p, _ in whole[:2]} == {"memory/n0000.md", "memory/n0001.md"}
    assert budgeted == whole


def test_a_sampled_count_is_never_more_than_the_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Ids of deleted chunks are gaps: windows that fall where the ids are dense hold more
    chunks than the average, and assuming the average scaled a word past the index (a count
    over the number of chunks gives the word a negative IDF weight in the coverage). The
    windows' chunks are counted. (From a review: 1,200 of 800 chunks.)"""
    import memory_ls.index.vocab as vocab

    monkeypatch.setattr(vocab, "ESTIMATE_FROM", 500)
    monkeypatch.setattr(vocab, "WINDOWS", 8)
    root = tmp_path / "ws"
    for i in range(1600):
        write(root, f"memory/n{i:04}.md", f"# N\n\n{'databases' if i % 4 else 'walrus'}\n")
    with MemoryEngine(root, Settings(provider="none"), index_path=tmp_path / "i.sqlite") as e:
        e.sync()
        with e.indexer.reader() as store:
            ids = store.conn.execute("SELECT id, path FROM chunks ORDER BY id").fetchall()
        assert len(ids) == 1600
        first = ids[0][0]
        # Keep the first and last id, every id in the 8 windows of 64 ids (every 200 ids), and
        # 36 after each (35 after the first): 800 chunks over 1600 ids, the windows full.
        for cid, path in ids:
            at = cid - first
            if (at % 200 >= 100 and at != 1599) or at == 99:
                (root / path).unlink()
        e.sync()
        with e.indexer.reader() as store:
            df, total = store.doc_frequencies(["databases"])
            exact = store._df._count("databas")
    assert total == 800 and 500 < exact < 700
    assert abs(df[0] - exact) <= 0.05 * total
