"""The engine end to end on a real SQLite index (keyword side; vectors in test_vectors.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import write

from memory_ls.engine import MemoryEngine
from memory_ls.index.store import Store
from memory_ls.search.fusion import bm25_score
from memory_ls.settings import Settings
from memory_ls.workspace import PathError


def keyword_engine(root: Path, tmp_path: Path, **query) -> MemoryEngine:
    s = Settings(provider="none")
    for k, v in query.items():
        setattr(s.query, k, v)
    e = MemoryEngine(root, s, index_path=tmp_path / "idx" / "index.sqlite")
    e.sync("test")
    return e


@pytest.fixture
def engine(ws: Path, tmp_path: Path):
    e = keyword_engine(ws, tmp_path)
    yield e
    e.close()


def paths(resp) -> list[str]:
    return [h.path for h in resp.results]


def test_indexes_only_memory_files(engine: MemoryEngine):
    st = engine.status()
    assert st["files"] == 4
    assert "README.md" not in paths(engine.search("rate limiting"))


def test_search_result_shape_and_citation(engine: MemoryEngine):
    resp = engine.search("token bucket Redis")
    hit = resp.results[0]
    assert hit.path == "memory/2026-01-10-api-design.md"
    assert hit.citation == f"{hit.path}#L{hit.start_line}-L{hit.end_line}"
    assert resp.mode == "keyword" and resp.provider is None and resp.fallback_reason
    js = resp.to_json(engine.root)
    r = js["results"][0]
    assert r["uri"].startswith("file://") and r["range"]["start"]["line"] == hit.start_line - 1
    assert {
        "path",
        "startLine",
        "endLine",
        "score",
        "snippet",
        "source",
        "citation",
        "textScore",
    } <= set(r)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("限流", "memory/notes/cjk.md"),  # two characters inside 令牌桶限流
        ("令牌桶", "memory/notes/cjk.md"),
        ("桶", "memory/notes/cjk.md"),  # one character
        ("東京", "memory/notes/cjk.md"),
        ("天気 東京", "memory/notes/cjk.md"),
        ("날씨", "memory/notes/cjk.md"),
        ("서울 산책", "memory/notes/cjk.md"),
    ],
)
def test_cjk_queries_find_their_words(engine: MemoryEngine, query: str, expected: str):
    resp = engine.search(query)
    assert paths(resp)[:1] == [expected]
    assert resp.results[0].text_score and resp.results[0].text_score > 0


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("Redis缓存", ["redis", "缓存"]),  # Latin and Chinese with no space between
        ("做缓存的Redis", ["redis", "缓存"]),
        ("APIキー", ["api", "キー"]),
        ("iPhone手机", ["iphone", "手机"]),
    ],
)
def test_mixed_script_words_find_both_parts(engine: MemoryEngine, query: str, terms: list[str]):
    """The index splits "Redis缓存" into "Redis" and the CJK grams; the query did not, and
    searched the one token "redis缓存", which no chunk holds."""
    text = "# 缓存\n\n我们用Redis做缓存。\nAPIキーは金庫。iPhone手机\n"
    write(engine.root, "memory/mixed.md", text)
    engine.sync()
    hit = engine.search(query).results[0]
    assert hit.path == "memory/mixed.md" and set(terms) <= set(hit.matched_terms)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "*",
        "AND",
        "NEAR(",
        "(rate",
        "rate)",
        'a OR "b',
        "-",
        "x" * 10_000,
        "the of and",
        "",
        "   ",
        "NOT rate",
        "col:rate",
        "^rate",
    ],
)
def test_hostile_queries_never_raise(engine: MemoryEngine, query: str):
    resp = engine.search(query)
    assert isinstance(resp.results, list)


def test_all_stop_words_still_searches(engine: MemoryEngine):
    write(engine.root, "memory/who.md", "# The Who\n\nThe Who is a band.\n")
    engine.sync()
    assert "memory/who.md" in paths(engine.search("the who"))


def test_bm25_better_rank_never_scores_lower():
    ranks = [-12.0, -7.5, -3.2, -1.0, -0.2, 0.0]
    scores = [bm25_score(r, ranks[0]) for r in ranks]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == 1.0 and scores[-1] == 0.0
    assert len(set(scores)) == len(scores)


def test_perfect_keyword_hit_passes_default_min_score(engine: MemoryEngine):
    resp = engine.search("Fly.io GitHub Actions", min_score=0.35)
    assert paths(resp)[0] == "memory/2026-02-01-deploy.md"
    assert resp.results[0].score >= 0.35


def test_top_result_does_not_depend_on_max_results(tmp_path: Path):
    root = tmp_path / "many"
    for i in range(60):
        write(
            root,
            f"memory/n{i:02d}.md",
            f"# Note {i}\n\nredis cache note number {i} " + "filler " * (i % 7) + "\n",
        )
    e = keyword_engine(root, tmp_path, min_score=0.0)
    tops = {tuple(paths(e.search("redis cache", max_results=n))[:1]) for n in (1, 2, 6, 20)}
    assert len(tops) == 1
    again = [paths(e.search("redis cache", max_results=10)) for _ in range(3)]
    assert again[0] == again[1] == again[2]
    e.close()


def test_incremental_sync_skips_unchanged_and_removes_vanished(engine: MemoryEngine):
    r = engine.sync()
    assert r.indexed == 0 and r.unchanged == 4
    p = engine.root / "memory/2026-02-01-deploy.md"
    p.write_text("# Deploy\n\nWe now deploy with Kamal.\n")
    r = engine.sync()
    assert r.indexed == 1 and r.unchanged == 3
    assert paths(engine.search("Kamal")) == ["memory/2026-02-01-deploy.md"]
    assert "memory/2026-02-01-deploy.md" not in paths(engine.search("Fly.io"))
    p.unlink()
    r = engine.sync()
    assert r.removed == 1
    assert engine.search("Kamal").results == []
    st = Store(engine.index_path, create=False)
    n = st.conn.execute(
        "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'kamal'"
    ).fetchone()[0]
    st.close()
    assert n == 0


def test_touch_without_change_costs_no_reindex(engine: MemoryEngine):
    p = engine.root / "MEMORY.md"
    os.utime(p, (1, 1))
    r = engine.sync()
    assert r.indexed == 0 and r.unchanged == 4


def test_unsaved_buffer_is_searchable_then_reverts(engine: MemoryEngine):
    path = "memory/2026-02-01-deploy.md"
    assert engine.set_document(path, "# Deploy\n\nWe moved to Nomad clusters.\n")
    assert paths(engine.search("Nomad")) == [path]
    assert path not in paths(engine.search("Fly.io"))
    # A disk sync must not overwrite the open buffer.
    engine.sync()
    assert paths(engine.search("Nomad")) == [path]
    engine.clear_document(path)
    assert engine.search("Nomad").results == []
    assert path in paths(engine.search("Fly.io"))
    assert not engine.set_document("README.md", "not memory")


def test_get_by_path_and_citation(engine: MemoryEngine):
    ex = engine.get("memory/2026-01-10-api-design.md#L3-L4")
    assert ex.text.splitlines() == [
        "We chose token bucket rate limiting backed by Redis.",
        "The limit is 100 requests per minute per key.",
    ]
    assert (ex.from_line, ex.to_line, ex.total_lines) == (3, 4, 8)
    ex = engine.get("MEMORY.md", start=3, lines=1)
    assert ex.text == "User prefers dark mode in every editor."
    for bad in ("../outside.md", "/etc/passwd", "README.md", "memory/missing.md"):
        with pytest.raises(PathError):
            engine.get(bad)
    with pytest.raises(ValueError):
        engine.get("MEMORY.md", start=0)


def test_path_safety_symlinks_and_hidden(ws: Path, tmp_path: Path):
    outside = tmp_path / "secret.md"
    outside.write_text("# secret\n\nzebra crossing\n")
    (ws / "memory" / "link.md").symlink_to(outside)
    write(ws, "memory/.hidden/h.md", "zebra hidden\n")
    write(ws, "memory/node_modules/x.md", "zebra module\n")
    e = keyword_engine(ws, tmp_path)
    assert e.search("zebra").results == []
    with pytest.raises(PathError):
        e.get("memory/link.md")
    e.close()


def test_bad_input_is_skipped_not_fatal(ws: Path, tmp_path: Path, caplog):
    write(ws, "memory/binary.md", b"\x00\x01\x02PNG" * 100)
    write(ws, "memory/latin1.md", "caf\xe9 au lait recipe\n".encode("latin-1"))
    write(ws, "memory/empty.md", "")
    write(ws, "memory/huge-line.md", "x" * (5 * 1024 * 1024 - 10) + " needle\n")
    e = keyword_engine(ws, tmp_path)
    report = e.last_sync
    assert report is not None
    assert any("binary" in s for s in report.skipped)
    assert "memory/latin1.md" in paths(e.search("recipe"))
    assert any("invalid UTF-8" in r.message for r in caplog.records)
    assert e.status()["files"] >= 6
    e.close()


def test_file_over_size_limit_is_skipped(ws: Path, tmp_path: Path):
    write(ws, "memory/big.md", "word " * 300_000)
    s = Settings(provider="none", max_file_bytes=1_000_000)
    e = MemoryEngine(ws, s, index_path=tmp_path / "i.sqlite")
    r = e.sync()
    assert any("maxFileBytes" in x for x in r.skipped)
    e.close()


def test_corrupt_index_is_moved_aside_and_rebuilt(ws: Path, tmp_path: Path):
    idx = tmp_path / "idx" / "index.sqlite"
    idx.parent.mkdir()
    idx.write_bytes(b"this is not a database" * 100)
    e = MemoryEngine(ws, Settings(provider="none"), index_path=idx)
    e.sync()
    assert e.search("Redis").results
    e.close()
    aside = [p.name for p in idx.parent.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1


def test_read_only_index_folder_is_a_clear_error(ws: Path, tmp_path: Path):
    if os.geteuid() == 0:
        # root ignores permission bits; a path under a regular file is unwritable for anyone.
        blocker = tmp_path / "file"
        blocker.write_text("x")
        with pytest.raises(OSError):
            MemoryEngine(ws, Settings(provider="none"), index_path=blocker / "index.sqlite")
        return
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    with pytest.raises(PermissionError, match="not writable"):
        MemoryEngine(ws, Settings(provider="none"), index_path=ro / "index.sqlite")


def test_settings_change_triggers_safe_rebuild(ws: Path, tmp_path: Path):
    idx = tmp_path / "i.sqlite"
    e = MemoryEngine(ws, Settings(provider="none"), index_path=idx)
    e.sync()
    e.close()
    s = Settings(provider="none")
    s.chunking.tokens = 50
    s.chunking.overlap = 10
    e = MemoryEngine(ws, s, index_path=idx)
    assert e.needs_rebuild
    r = e.sync()
    assert r.full and not e.needs_rebuild
    assert e.search("Redis").results
    e.close()


def test_temporal_decay_spares_evergreen(tmp_path: Path):
    root = tmp_path / "d"
    write(root, "MEMORY.md", "# M\n\nkubernetes cluster notes\n")
    write(root, "memory/2020-01-01-old.md", "# Old\n\nkubernetes cluster notes\n")
    write(root, "memory/2099-01-01-new.md", "# New\n\nkubernetes cluster notes\n")
    s = Settings(provider="none")
    s.query.min_score = 0.0
    s.query.temporal_decay.enabled = True
    e = MemoryEngine(root, s, index_path=tmp_path / "i.sqlite")
    e.sync()
    hits = {h.path: h.score for h in e.search("kubernetes cluster").results}
    assert hits["MEMORY.md"] == pytest.approx(hits["memory/2099-01-01-new.md"], rel=1e-6)
    assert hits["memory/2020-01-01-old.md"] < 0.01
    e.close()


def test_mmr_prefers_diverse_results(tmp_path: Path):
    root = tmp_path / "m"
    dup = "# Dup\n\npostgres vacuum tuning autovacuum settings guide\n"
    write(root, "memory/a.md", dup)
    write(root, "memory/b.md", dup)
    write(root, "memory/c.md", "# Other\n\npostgres replication lag tuning\n")
    s = Settings(provider="none")
    s.query.min_score = 0.0
    e = MemoryEngine(root, s, index_path=tmp_path / "i.sqlite")
    e.sync()
    plain = paths(e.search("postgres vacuum tuning", max_results=2))
    e.settings.query.mmr.enabled = True
    e.settings.query.mmr.lambda_ = 0.5
    diverse = paths(e.search("postgres vacuum tuning", max_results=2))
    assert set(plain) == {"memory/a.md", "memory/b.md"}
    assert "memory/c.md" in diverse
    e.close()


def test_query_filters(engine: MemoryEngine):
    assert paths(engine.search("rate limiting path:memory/2026-01")) == [
        "memory/2026-01-10-api-design.md"
    ]
    assert engine.search("rate limiting after:2026-01-15").results == []
    assert paths(engine.search("deploy after:2026-01-15")) == ["memory/2026-02-01-deploy.md"]
    # No such date: its text stays words, as for any other non-date (it kept every note out).
    assert "memory/2026-02-01-deploy.md" in paths(engine.search("deploy after:2026-13-45"))
    assert paths(engine.search("Redis -bucket")) == []
    assert paths(engine.search("requests +retry-after")) == ["memory/2026-01-10-api-design.md"]
    assert paths(engine.search("rate", path_prefix="MEMORY")) == []


def test_required_and_excluded_words_match_as_the_search_matches_words(tmp_path: Path):
    """+word and -word were substring tests: "-go" dropped a note for "good", and "+cafe"
    dropped the note about a "café" that the word "cafe" finds (diacritics are folded)."""
    root = tmp_path / "w"
    write(root, "memory/a.md", "# A\n\nThe deploy went good, no rollback.\n")
    write(root, "memory/b.md", "# B\n\nDeploy notes for the Go service.\n")
    write(root, "memory/c.md", "# C\n\nDeploy from the café wifi; limits apply.\n")
    write(root, "memory/d.md", "# D\n\nDeploy 令牌桶限流 🚀\n")
    e = keyword_engine(root, tmp_path, min_score=0.0)

    def found(query: str) -> set[str]:
        return {p.removeprefix("memory/").removesuffix(".md") for p in paths(e.search(query))}

    assert found("deploy -go") == {"a", "c", "d"}
    assert found("deploy +go") == {"b"}
    assert found("deploy +cafe") == found("deploy +Café") == {"c"}
    assert found("deploy -cafe") == {"a", "b", "d"}
    assert found("deploy -limit") == {"a", "b", "d"}  # stemmed, as "limit" finds "limits"
    assert found("deploy +限流") == found("deploy +桶") == found("deploy +🚀") == {"d"}
    assert found("deploy -令牌桶") == {"a", "b", "c"}
    assert found("deploy +the -no") == {"b", "c"}  # a stop word is a word too
    e.close()


def far_notes(root: Path, many: int = 250) -> None:
    """``many`` notes that match "redis" far better than the two notes filters pick out."""
    for i in range(many):
        write(root, f"memory/a/{i:03d}.md", f"# a{i}\n\nredis redis note {i}\n")
    far = "redis comes up once here, among many other words about the weather and lunch\n"
    write(root, "memory/b/x.md", "# b\n\n" + far)
    write(root, "memory/2026-01-01-old.md", "# old\n\n" + far)


def test_filters_find_matches_that_rank_past_the_candidates(tmp_path: Path):
    """Path, date and source filters applied to the candidates only: a note of memory/b/ that
    ranked below 250 better matches elsewhere was never one, and nothing matched (found by a
    review). Few chunks pass such a filter here, so those are scored."""
    root = tmp_path / "big"
    far_notes(root)
    e = keyword_engine(root, tmp_path)
    assert len(e.search("redis", max_results=300, min_score=0).results) == 252
    assert paths(e.search("redis file:memory/b/")) == ["memory/b/x.md"]
    assert paths(e.search("redis", path_prefix="memory/b")) == ["memory/b/x.md"]
    assert paths(e.search("redis before:2026-02-01")) == ["memory/2026-01-01-old.md"]
    assert paths(e.search("redis after:2026-02-01")) == []
    assert paths(e.search("redis file:memory/b/ source:sessions")) == []
    # A filter that many chunks pass: all of them scored, the best first.
    assert len(paths(e.search("redis file:memory/a/", max_results=20))) == 20
    e.close()


def test_line_numbers_match_the_editor(tmp_path: Path):
    root = tmp_path / "lines"
    write(root, "memory/crlf.md", "# T\r\n\r\nalpha line\r\nomega line\r\n")
    e = keyword_engine(root, tmp_path)
    hit = e.search("omega").results[0]
    assert (hit.start_line, hit.end_line) == (1, 4)
    ex = e.get("memory/crlf.md")
    assert ex.total_lines == 4 and ex.text.splitlines()[-1] == "omega line"
    assert "\r" not in ex.text
    e.close()


def test_renamed_file_moves_in_the_index(engine: MemoryEngine):
    old = engine.root / "memory/2026-02-01-deploy.md"
    new = engine.root / "memory/archive/2026-02-01-deploy.md"
    new.parent.mkdir()
    old.rename(new)
    r = engine.sync()
    assert r.removed == 1 and r.indexed == 1
    assert paths(engine.search("Fly.io")) == ["memory/archive/2026-02-01-deploy.md"]


def test_broken_model_file_degrades_to_keywords(ws: Path, tmp_path: Path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 64)  # a header cut short
    s = Settings(provider="local")
    s.local.model_path = str(bad)
    e = MemoryEngine(ws, s, index_path=tmp_path / "i.sqlite")
    e.sync()
    st = e.status()
    assert st["mode"] == "keyword" and "broken.gguf" in st["providerReason"]
    resp = e.search("token bucket")
    assert resp.mode == "keyword" and resp.results
    assert resp.fallback_reason == st["providerReason"]
    e.close()


def test_symlinked_folders_and_fifos_are_refused(ws: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# top secret\n")
    (ws / "memory" / "linked").symlink_to(outside, target_is_directory=True)
    os.mkfifo(ws / "memory" / "pipe.md")
    e = keyword_engine(ws, tmp_path)
    with pytest.raises(PathError, match="symlinks"):
        e.get("memory/linked/secret.md")
    assert not e.set_document("memory/linked/secret.md", "# x\n")
    with pytest.raises(PathError, match="regular file"):
        e.get("memory/pipe.md")  # must not block
    assert e.search("secret").results == []
    e.close()


def test_filtered_search_keeps_its_best_keyword_hit(tmp_path: Path):
    root = tmp_path / "f"
    write(root, "memory/a.md", "# A\n\nkubernetes helm chart\n")
    write(root, "memory/b.md", "# B\n\nkubernetes " + "filler " * 150 + "\n")
    e = keyword_engine(root, tmp_path)
    assert paths(e.search("kubernetes helm file:memory/b.md")) == ["memory/b.md"]
    hit = e.search("kubernetes helm", path_prefix="memory/b").results[0]
    # BM25 is normalised after the filter (the best surviving match is the reference) ...
    assert hit.path == "memory/b.md" and hit.score >= Settings().query.min_score
    # ... and its score says it holds only part of the query: a weak match, not 1.0.
    full = e.search("kubernetes helm").results[0]
    assert full.path == "memory/a.md" and full.score == 1.0 and hit.score < 0.5
    e.close()


def test_vector_mode_without_a_model_degrades_to_keywords(engine: MemoryEngine):
    resp = engine.search("token bucket", mode="vector")
    assert resp.mode == "keyword" and resp.fallback_reason
    assert paths(resp)[0] == "memory/2026-01-10-api-design.md"


def test_a_postings_budget_drops_the_most_common_words_first():
    from memory_ls.search.query import drop_common

    n = 1_000_000
    terms = [("hallonar", False), ("velsholummer", False), ("zuka", False), ("限", True)]
    df = [238_000, 1_500, 274_000, 900_000]
    # Both common words go, most common first; the rare one and the prefix term stay.
    assert drop_common(terms, df, n, 0.3, 60_000) == ([terms[1], terms[3]], [terms[2], terms[0]])
    assert drop_common(terms, df, n, 0.3, 250_000) == ([terms[0], terms[1], terms[3]], [terms[2]])
    assert drop_common(terms, df, n, 0.3, 0) == ([terms[0], terms[1], terms[2], terms[3]], [])
    # A word in 1% of chunks or fewer is never dropped (the chunks holding only such words
    # would be missed), and one word always stays.
    assert drop_common(terms[1:3], [5_000, 10_000], n, 0.3, 1_000) == (terms[1:3], [])
    assert drop_common(terms[1:3], [9_000, 10_001], n, 0.3, 1_000) == (terms[1:2], terms[2:3])
    assert drop_common(terms[2:3], [274_000], n, 0.3, 1_000) == (terms[2:3], [])


def test_very_common_words_leave_the_keyword_query(tmp_path: Path):
    from memory_ls.search.query import drop_common

    terms = [("project", False), ("walrus", False), ("限", True)]
    assert drop_common(terms, [1200, 3, 900], 1500, 0.3) == (terms[1:], [])  # over fraction
    assert drop_common(terms[:1], [1200], 1500, 0.3) == (terms[:1], [])  # never drops every word
    assert drop_common(terms, [90, 3, 9], 100, 0.3) == (terms, [])  # small index: untouched
    root = tmp_path / "big"
    for i in range(1100):
        extra = " walrus sighting" if i == 777 else ""
        write(root, f"memory/n{i}.md", f"# Note {i}\n\nproject status update {i}{extra}\n")
    e = keyword_engine(root, tmp_path)
    hit = e.search("project walrus").results[0]
    assert hit.path == "memory/n777.md" and hit.score == 1.0
    e.close()


def test_engine_never_changes_the_settings_it_is_given(ws: Path, tmp_path: Path):
    """A server compares fresh settings with the ones it opened the engine with: a relative
    ``local.modelPath`` rewritten in place made every configuration change reopen the model."""
    from memory_ls.settings import to_dict

    s = Settings()
    s.local.model_path = "models/minilm.gguf"
    before = to_dict(s)
    with MemoryEngine(ws, s, index_path=tmp_path / "i.sqlite") as e:
        assert to_dict(s) == before
        assert e.settings.local.model_path == str(ws.resolve() / "models/minilm.gguf")
        assert e.settings is not s
    fresh = Settings()
    fresh.local.model_path = "models/minilm.gguf"
    assert to_dict(fresh) == to_dict(s)  # what the server's reload compares: no reopen


def test_engine_is_a_context_manager_that_closes(ws: Path, tmp_path: Path):
    with MemoryEngine(ws, Settings(provider="none"), index_path=tmp_path / "i.sqlite") as e:
        e.sync()
        assert e.search("token bucket").results
    with pytest.raises(Exception, match="closed"):
        e.indexer.writer.conn.execute("SELECT 1")
