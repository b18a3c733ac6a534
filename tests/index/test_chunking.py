"""Chunking: exact line ranges, overlap, long lines, and the model's token and byte limits."""

from __future__ import annotations

from memory_ls.chunking import ChunkLimits, chunk_text, estimate_tokens, split_lines


def test_ranges_cover_every_line_with_overlap():
    text = "\n".join(f"line {i} " + "word " * 30 for i in range(1, 101))
    chunks = chunk_text(text, ChunkLimits(400, 80))
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 100
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.start_line <= a.end_line  # overlap: the next chunk starts inside this one
    for c in chunks:
        assert c.text.split("\n")[0].startswith(f"line {c.start_line} ")
        assert estimate_tokens(c.text) <= 400


def test_long_lines_are_split_but_keep_their_line_number():
    text = "short\n" + "x" * 50_000 + "\nend"
    chunks = chunk_text(text, ChunkLimits(400, 80))
    middle = [c for c in chunks if c.start_line == c.end_line == 2]
    assert len(middle) >= 30
    assert "".join(c.text for c in middle).count("x") >= 50_000 - 1600


def test_cjk_counts_one_token_per_character():
    chunks = chunk_text("令牌桶限流" * 400, ChunkLimits(400, 80))
    assert [len(c.text) for c in chunks] == [400] * 5


def test_byte_limit_is_enforced_per_chunk():
    limits = ChunkLimits(400, 80, max_bytes=500)
    for text in ("é" * 3000, "\n".join(["é" * 100] * 50), "漢字" * 2000):
        for c in chunk_text(text, limits):
            assert len(c.text.encode()) <= 500


def test_for_model_shrinks_the_budget():
    limits = ChunkLimits.for_model(400, 80, max_tokens=256)
    assert limits.tokens == 256 and limits.overlap <= 51


def test_split_lines_counts_like_an_editor():
    assert split_lines("a\nb\n") == ["a", "b"]
    assert split_lines("a\r\nb") == ["a", "b"]
    assert split_lines("") == [""]
    # LSP's breaks (a lone "\r" too), and only those: not U+2028, \x0c, \x85 (str.splitlines).
    assert split_lines("a\rb\r\r\nc\r") == ["a", "b", "", "c"]
    assert split_lines("a\u2028b\x0cc\x85d\n") == ["a\u2028b\x0cc\x85d"]
