"""Line-based chunking with overlap that keeps exact 1-based line ranges.

Sizes are in estimated tokens (about 4 characters of Latin text, one CJK character each), so a
Chinese note does not blow past a model's input limit the way a character budget would.
A line longer than the budget is split into pieces that all carry that line's number.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

from .text import CJK_CHAR, CJK_RANGES


@dataclass(frozen=True)
class Chunk:
    start_line: int  # 1-based, inclusive, in the original file
    end_line: int
    text: str
    hash: str


@dataclass(frozen=True)
class ChunkLimits:
    tokens: int = 400
    overlap: int = 80
    max_bytes: int = 0  # 0: no byte limit besides the token budget

    @staticmethod
    def for_model(
        tokens: int, overlap: int, max_tokens: int = 0, max_bytes: int = 0
    ) -> ChunkLimits:
        """The settings' budget, shrunk to what the embedding model accepts."""
        if max_tokens and tokens > max_tokens:
            overlap = min(overlap, max_tokens // 5)
            tokens = max_tokens
        return ChunkLimits(tokens, min(overlap, tokens // 2), max_bytes)


def estimate_tokens(text: str) -> int:
    cjk = len(CJK_CHAR.findall(text)) if not text.isascii() else 0
    return cjk + (len(text) - cjk + 3) // 4


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _split_long(line: str, limits: ChunkLimits) -> list[str]:
    """Cut one over-long line into pieces within the budget (at spaces where possible)."""
    pieces: list[str] = []
    pos, end = 0, len(line)
    # No piece can hold more than ~4 characters per token, which bounds each search (and
    # each slice: a multi-megabyte line is never copied whole per piece).
    span = limits.tokens * 4 + 4
    while pos < end:
        window = line[pos : pos + span]
        lo = _longest_fitting_prefix(window, limits)
        cut = lo
        if pos + cut < end:
            space = window.rfind(" ", cut // 2, cut)
            if space > 0:
                cut = space + 1
        pieces.append(window[:cut])
        pos += cut
    return pieces


def _longest_fitting_prefix(text: str, limits: ChunkLimits) -> int:
    """Length of the longest prefix of ``text`` within the budget (at least 1), from prefix
    sums of CJK characters and UTF-8 bytes: one pass, however many characters are CJK."""
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    cjk = np.zeros(len(cps), dtype=bool)
    for a, b in CJK_RANGES:
        cjk |= (cps >= a) & (cps <= b)
    n = np.arange(1, len(cps) + 1)
    ncjk = np.cumsum(cjk)
    tokens = ncjk + (n - ncjk + 3) // 4
    ok = tokens <= limits.tokens
    if limits.max_bytes:
        size = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
        ok &= np.cumsum(size) <= limits.max_bytes
    # Both sums only grow, so the prefixes that fit are exactly a leading run.
    fitting = int(np.argmin(ok)) if not ok.all() else len(cps)
    return max(1, fitting)


def _fits(text: str, limits: ChunkLimits) -> bool:
    if limits.max_bytes and len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes:
        return False
    return estimate_tokens(text) <= limits.tokens


def chunk_lines(
    lines: list[str], limits: ChunkLimits, line_numbers: list[int] | None = None
) -> list[Chunk]:
    """Chunks over ``lines`` (no trailing newlines); ``line_numbers`` maps to original lines."""
    numbers = line_numbers or list(range(1, len(lines) + 1))
    units: list[tuple[int, str, int, int]] = []  # (line number, text, tokens, bytes)
    for num, line in zip(numbers, lines, strict=True):
        parts = [line] if _fits(line, limits) else _split_long(line, limits)
        units += [
            (num, p, estimate_tokens(p) + 1, len(p.encode("utf-8", "surrogatepass")) + 1)
            for p in parts
        ]
    max_bytes = limits.max_bytes + 1 if limits.max_bytes else 1 << 62  # +1: no final newline

    chunks: list[Chunk] = []
    window: list[tuple[int, str, int, int]] = []
    size = nbytes = 0

    def emit() -> None:
        text = "\n".join(u[1] for u in window)
        if text.strip():
            chunks.append(Chunk(window[0][0], window[-1][0], text, text_hash(text)))

    for unit in units:
        if window and (size + unit[2] > limits.tokens or nbytes + unit[3] > max_bytes):
            emit()
            # Carry the tail of the window (up to the overlap budget) into the next chunk.
            carry: list[tuple[int, str, int, int]] = []
            carried = carried_bytes = 0
            for u in reversed(window):
                if (
                    carried + u[2] > limits.overlap
                    or carried + u[2] + unit[2] > limits.tokens
                    or carried_bytes + u[3] + unit[3] > max_bytes
                ):
                    break
                carry.insert(0, u)
                carried += u[2]
                carried_bytes += u[3]
            window, size, nbytes = carry, carried, carried_bytes
        window.append(unit)
        size += unit[2]
        nbytes += unit[3]
    if window:
        emit()
    return chunks


_LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


def lsp_splitlines(text: str) -> list[str]:
    """``text.splitlines(True)`` by LSP's rule: lines broken by "\n", "\r\n" and "\r" only."""
    lines = text.splitlines(True)
    # splitlines breaks at these and more (U+2028, a form feed, ...): where it made no more
    # lines than these breaks do, its lines are LSP's (counting is fast; a regex is not).
    cr = text.count("\r")
    breaks = text.count("\n") + cr - (text.count("\r\n") if cr else 0)
    if len(lines) == breaks + (text[-1:] not in ("", "\n", "\r")):
        return lines
    return _LSP_LINE.findall(text)


def lsp_lines(text: str) -> list[str]:
    """Lines as LSP positions count them, without their breaks: broken by "\n", "\r\n" and a
    lone "\r" only (never by U+2028, a form feed or the others ``str.splitlines`` breaks at).
    A final break starts an empty last line, where a cursor can be."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def split_lines(text: str) -> list[str]:
    """Lines as editors number them (``lsp_lines``), but a final break ends the last line, it
    does not start a new one."""
    lines = lsp_lines(text)
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def chunk_text(
    text: str, limits: ChunkLimits, line_numbers: list[int] | None = None
) -> list[Chunk]:
    lines = split_lines(text)
    if line_numbers is not None:
        line_numbers = line_numbers[: len(lines)]
    return chunk_lines(lines, limits, line_numbers)
