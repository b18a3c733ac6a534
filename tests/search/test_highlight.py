"""A hit's best line and matched terms: matched by FTS5 as the search matches, on real indexes."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import write

from memory_ls.chunking import ChunkLimits, chunk_lines, split_lines
from memory_ls.engine import MemoryEngine
from memory_ls.search.highlight import Highlight, highlight, line_numbers, term_groups
from memory_ls.settings import Settings
from memory_ls.sources.sessions import render_transcript

NOTE = "\n".join(
    [
        "# Rate limits",  # 10
        "",
        "Date: 2026-01-10. Present: Ana, Bilal.",
        "We are limiting requests with a token bucket per key.",  # 13
        "The bucket is kept in Redis and refills every minute.",  # 14
        "令牌桶限流保护接口。",  # 15
        "Le café du matin.",  # 16
    ]
)


def mark(query: str, text: str = NOTE, first: int = 10) -> Highlight:
    numbers = list(range(first, first + len(text.split("\n"))))
    return highlight(query, [(text, numbers)])[0]


def test_porter_stemming_as_fts5_does_it():
    # "limits" and "limiting" share the stem "limit"; the heading loses to the body line.
    assert mark("limits").best_line == 13
    assert mark("refilled").best_line == 14  # refilled ~ refills
    assert mark("cafe").best_line == 16  # diacritics folded like the index folds them


def test_the_line_with_most_words_wins_and_is_not_the_first():
    assert mark("bucket redis") == Highlight(14, ["bucket", "redis"])
    assert mark("token bucket") == Highlight(13, ["token", "bucket"])


def test_stop_words_are_not_terms():
    m = mark("the bucket is kept")
    assert m.matched_terms == ["bucket", "kept"]
    assert m.best_line == 14
    # A query of nothing but stop words still searches them (as the search does).
    assert mark("the").matched_terms == ["the"]


def test_filters_and_excluded_words_are_not_terms():
    m = mark("file:memory/ after:2026-01-01 source:memory -redis +bucket token")
    assert m.matched_terms == ["bucket", "token"]
    assert m.best_line == 13
    assert term_groups("file:memory/ before:2026-02-01 -redis") == []


def test_cjk_words_match_inside_runs():
    assert mark("限流") == Highlight(15, ["限流"])
    assert mark("桶").best_line == 15  # one character: a prefix of the run's grams
    m = mark("令牌桶 接口 bucket")
    assert m.best_line == 15 and m.matched_terms == ["令牌", "牌桶", "接口", "bucket"]
    # A word counts once, however many grams it has: two words beat one long CJK word.
    assert mark("令牌桶限流 bucket redis").best_line == 14


def test_a_chunk_matching_nothing_points_at_its_first_line():
    assert mark("zebra") == Highlight(10, [])
    assert mark("") == Highlight(10, [])


def test_several_chunks_at_once():
    got = highlight("redis", [("a\nb redis", [1, 2]), ("redis\nc", [7, 8]), ("none", [3])])
    assert got == [Highlight(2, ["redis"]), Highlight(7, ["redis"]), Highlight(3, [])]


def test_note_lines_are_numbered_one_to_one_else_start_line():
    assert line_numbers("a\nb\nc", 4, 6, None) == [4, 5, 6]
    # A line cut into pieces leaves more text lines than file lines: no guessing.
    assert line_numbers("a\nb\nc\nd", 4, 6, None) == [4, 4, 4, 4]


def _transcript(n: int) -> str:
    records = [json.dumps({"type": "session", "id": "s"})]
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        body = "\n".join(f"message {i} line {k} about topic{i}x{k}" for k in range(i % 4 + 1))
        content = [{"type": "text", "text": body}, {"type": "toolCall", "name": f"tool{i}"}]
        records.append(
            json.dumps({"type": "message", "message": {"role": role, "content": content}})
        )
    return "\n".join(records) + "\n"


def test_transcript_chunks_are_placed_on_their_jsonl_lines():
    # Small chunks over multi-line messages: chunks start and end in the middle of messages.
    src = render_transcript(_transcript(30))
    rendered = split_lines(src.text)
    line_map = list(src.line_map or [])
    chunks = chunk_lines(rendered, ChunkLimits(40, 12), line_map)
    assert len(chunks) > 10
    mid_message = 0
    for c in chunks:
        lines = c.text.split("\n")
        at = rendered.index(lines[0])  # every rendered line is unique here
        assert rendered[at : at + len(lines)] == lines
        truth = line_map[at : at + len(lines)]
        assert line_numbers(c.text, c.start_line, c.end_line, line_map) == truth
        mid_message += at > 0 and line_map[at - 1] == c.start_line
    assert mid_message > 0  # the case that needs placing did occur


def test_a_transcript_window_that_cannot_be_placed_falls_back_to_start_line():
    line_map = [2, 2, 3, 3]
    # A body line that looks like a role label where no message starts: not placed.
    assert line_numbers("User: x\nUser: y\nAssistant: z", 2, 3, line_map) == [2, 2, 2]
    assert line_numbers("User: x\ny\nAssistant: z", 2, 3, line_map) == [2, 2, 3]


# -- on a real index ------------------------------------------------------------------------------


def _engine(root: Path, tmp_path: Path, settings: Settings) -> MemoryEngine:
    e = MemoryEngine(root, settings, index_path=tmp_path / "idx" / "index.sqlite")
    e.sync("test")
    return e


def test_a_hit_points_at_its_best_line_of_the_file(ws: Path, tmp_path: Path):
    engine = _engine(ws, tmp_path, Settings(provider="none"))
    try:
        path = "memory/2026-01-10-api-design.md"
        lines = (ws / path).read_text(encoding="utf-8").split("\n")
        resp = engine.search("429 retry after")
        hit = resp.results[0]
        assert hit.path == path and hit.start_line == 1
        assert lines[hit.best_line - 1] == "Clients get HTTP 429 with a Retry-After header."
        js = resp.to_json(engine.root)["results"][0]
        assert js["bestLine"] == hit.best_line and js["matchedTerms"] == ["429", "retry"]
        assert hit.start_line <= hit.best_line <= hit.end_line
        hit = engine.search("requests per minute").results[0]
        assert lines[hit.best_line - 1].startswith("The limit is 100 requests per minute")
        cjk = engine.search("限流").results[0]
        assert cjk.path == "memory/notes/cjk.md" and cjk.best_line == 3
        assert cjk.matched_terms == ["限流"]
    finally:
        engine.close()


def test_a_transcript_hit_points_at_the_jsonl_line_of_its_message(ws: Path, tmp_path: Path):
    records = [
        {"type": "session", "id": "s1"},
        {"type": "message", "message": {"role": "user", "content": "Where do backups go?"}},
        {"type": "custom", "note": "not a message"},
        {
            "type": "message",
            "message": {"role": "assistant", "content": "To the box.\nNightly.\nVia restic."},
        },
        {"type": "message", "message": {"role": "user", "content": "How long are they kept?"}},
        {"type": "message", "message": {"role": "assistant", "content": "Thirty days of dailies."}},
    ]
    write(ws, "sessions/chat.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    s = Settings(provider="none", sources=["memory", "sessions"])
    s.sessions.globs = ["sessions/*.jsonl"]
    engine = _engine(ws, tmp_path, s)
    try:
        for query, jsonl_line in [("restic", 4), ("thirty dailies", 6), ("kept long", 5)]:
            hit = engine.search(query, sources=["sessions"]).results[0]
            assert (hit.path, hit.start_line, hit.end_line) == ("sessions/chat.jsonl", 2, 6)
            assert hit.best_line == jsonl_line, query
    finally:
        engine.close()


def test_every_hit_carries_a_best_line_inside_its_range(ws: Path, tmp_path: Path):
    engine = _engine(ws, tmp_path, Settings(provider="none"))
    try:
        for h in engine.search("rate limiting deploy rollbacks 东京").results:
            assert h.start_line <= h.best_line <= h.end_line  # type: ignore[operator]
    finally:
        engine.close()


def test_threads_highlight_at_once_each_on_its_own_table():
    """Each thread keeps one in-memory FTS5 table of lines and empties it per call: searches
    on several reader threads at once never see each other's lines, nor an earlier call's."""
    from concurrent.futures import ThreadPoolExecutor

    cases = [
        (f"deploy {w}", [(f"# Note {i}\n\nwe {w} the gateway\nthe {w}s went well", [1, 2, 3, 4])])
        for i, w in enumerate(["limit", "rotate", "throttle", "rollback", "migrate", "backup"])
    ]
    expected = [highlight(q, chunks) for q, chunks in cases]
    assert [h[0].matched_terms for h in expected][0] == ["limit"]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(20):
            got = list(pool.map(lambda c: highlight(*c), cases * 4))
            assert got == expected * 4
