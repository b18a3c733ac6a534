"""Transcripts grow: index what was appended, not the whole file again."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..chunking import Chunk, chunk_lines
from ..sources import SourceError
from ..sources.dates import file_date
from ..sources.markdown import content_hash, open_regular
from ..sources.sessions import ANCHOR_BYTES, anchor, anchor_windows, render_segment
from ..workspace import MemoryFile
from .backend import IndexBackend
from .rows import ChunkState, FileRecord, FileText
from .writes import (
    IndexContext,
    SyncReport,
    known_vectors,
    remove_file,
    vectors_changed,
)

log = logging.getLogger(__name__)

# A transcript only grows. After indexing one, its files row keeps a tail state: the byte
# offset just past the last complete line, that line's number, a fingerprint of the bytes
# before the offset, and the open chunk (the chunker's last window, which text appended later
# may still extend). The next sync, if the file grew and the fingerprint still matches, reads
# the bytes from the offset only, renders those lines, and chunks them after the open chunk's
# lines: the chunks come out exactly as chunking the whole file would make them, every chunk
# before the open one keeps its row, id and vector, and the open one keeps them too unless the
# new text extends it. A file that shrank, was rewritten, or whose index row does not match
# its tail state is indexed whole, which also writes a fresh tail state.

TAIL_FORMAT = 1


@dataclass
class TailState:
    offset: int = 0  # bytes of complete lines indexed: the next sync reads from here
    line: int = 1  # the number of the line starting at ``offset``
    anchor: str = ""  # sessions.anchor() of the bytes before ``offset``
    carry: list[tuple[int, str]] = field(default_factory=list)  # open chunk: (line, unit)
    open_id: int | None = None  # first chunk row a later sync may replace; before it: final
    open_hash: str | None = None  # its hash, to check the row is still the one described
    pending: list[int] = field(default_factory=list)  # line map of an unterminated last line

    def to_json(self) -> dict[str, object]:
        return {
            "v": TAIL_FORMAT,
            "offset": self.offset,
            "line": self.line,
            "anchor": self.anchor,
            "carry": [[n, t] for n, t in self.carry],
            "open": self.open_id,
            "openHash": self.open_hash,
            "pending": self.pending,
        }

    @classmethod
    def from_json(cls, d: dict) -> TailState | None:
        try:
            if d.get("v") != TAIL_FORMAT:
                return None
            return cls(
                int(d["offset"]),
                int(d["line"]),
                str(d["anchor"]),
                [(int(n), str(t)) for n, t in d["carry"]],
                None if d["open"] is None else int(d["open"]),
                d["openHash"],
                [int(n) for n in d["pending"]],
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Span:
    """Bytes of a transcript to index: ``data``, the file's bytes from ``base.offset`` on,
    chunked after ``base``'s open chunk; ``rows`` are the chunk rows this may replace. A whole
    read starts from an empty state and may replace all of the file's rows."""

    data: bytes
    mtime: float
    file_hash: str | None = None  # the whole file's content hash; None for a tail
    base: TailState = field(default_factory=TailState)
    rows: list[ChunkState] = field(default_factory=list)  # the rows it may replace
    windows: tuple[bytes, bytes] = (b"", b"")  # the anchor windows before ``base.offset``
    lines_before: int = 0  # the file's lines before ``base.offset`` (its pending ones not)


def _open(path, folders=0):  # a seam for tests that count the bytes a sync reads
    return open_regular(path, folders)  # never through a symlink put there since the walk


def sync_transcript(store, ctx, mf: MemoryFile, st, state, report: SyncReport) -> None:
    """Index a changed transcript: its tail when it grew, else (or if in doubt) the whole."""
    try:
        if st.st_size > ctx.max_file_bytes:
            over = f"{st.st_size} bytes is over maxFileBytes ({ctx.max_file_bytes})"
            raise SourceError(mf.path, over)
        with _open(mf.abs_path, mf.folders) as fh:
            if state and st.st_size > state.size and _index_tail(store, ctx, mf, fh, st, report):
                return
            fh.seek(0)
            data = fh.read(st.st_size)
            file_hash = content_hash(data)
            if state and state.hash == file_hash:
                store.touch_file(mf.path, st.st_mtime, st.st_size)
                report.unchanged += 1
                return
            whole = Span(data, st.st_mtime, file_hash, rows=store.chunk_rows(mf.path))
            _index_transcript(store, ctx, mf, whole, report)
    except FileNotFoundError:  # deleted while we looked
        return
    except (OSError, SourceError) as exc:
        why = exc.reason if isinstance(exc, SourceError) else f"cannot read ({exc.strerror or exc})"
        report.skip(mf.path, why)
        if state:
            remove_file(store, ctx, mf.path)


def _index_tail(store: IndexBackend, ctx, mf: MemoryFile, fh, st, report: SyncReport) -> bool:
    """Index only what was appended since the last sync; False: index the whole file."""
    saved = store.file_tail(mf.path)
    tail = TailState.from_json(saved[1]) if saved else None
    if saved is None or tail is None or tail.offset > st.st_size:
        return False
    windows = anchor_windows(fh, tail.offset)
    if anchor(*windows) != tail.anchor:
        log.info("%s: changed before the end of what was indexed; indexing it whole", mf.path)
        return False
    rows: list[ChunkState] = []
    if tail.open_id is not None:
        rows = store.chunk_rows(mf.path, tail.open_id)
        if not rows or rows[0].hash != tail.open_hash:
            log.info("%s: index does not match its tail state; indexing it whole", mf.path)
            return False
    fh.seek(tail.offset)
    data = fh.read(st.st_size - tail.offset)
    lines_before = saved[0] - len(tail.pending)
    span = Span(data, st.st_mtime, None, tail, rows, windows, lines_before)
    _index_transcript(store, ctx, mf, span, report)
    report.appended += 1
    return True


def _index_transcript(
    store: IndexBackend, ctx: IndexContext, mf: MemoryFile, span: Span, report: SyncReport
) -> None:
    """Index ``span``: a whole read, or the tail appended after what the index holds."""
    data, base, rows = span.data, span.base, span.rows
    seg = render_segment(data, base.line, mf.path)
    lines = [t for _, t in base.carry] + seg.lines
    numbers = [n for n, _ in base.carry] + seg.numbers
    settled = chunk_lines(lines, ctx.limits, numbers)
    chunks = settled
    if seg.pending:  # an unterminated last line: indexed now, read again next time
        chunks = chunk_lines(lines + seg.pending, ctx.limits, numbers + seg.pending_numbers)
    # Chunking is a single pass: the chunks before the last settled one are final whatever
    # follows, and that last one is the window the next tail is chunked after.
    final = max(len(settled) - 1, 0)
    carry = _open_window(settled[-1], lines, numbers) if settled else []

    keep = 0  # leading rows the chunking reproduced keep their ids and vectors
    for row, c in zip(rows, chunks, strict=False):
        if (row.hash, row.start_line, row.end_line) != (c.hash, c.start_line, c.end_line):
            break
        keep += 1
    reused = {r.hash: r.embedding for r in rows if r.embedding is not None}
    known = known_vectors(store, ctx, chunks[keep:], reused, report)
    model = ctx.cache_key[1] if ctx.cache_key else ""
    gone = [r.id for r in rows[keep:]]
    removed, added = store.update_chunks(mf.path, mf.source, gone, chunks[keep:], known, model)
    ids = [r.id for r in rows[:keep]] + [cid for cid, _ in added]

    offset = base.offset + seg.consumed
    head, before = span.windows
    head = (head + data[:ANCHOR_BYTES])[: min(ANCHOR_BYTES, offset)]
    before = (before + data[max(0, seg.consumed - ANCHOR_BYTES) : seg.consumed])[-ANCHOR_BYTES:]
    state = TailState(
        offset,
        seg.next_line,
        anchor(head, before),
        carry or [],
        ids[final] if final < len(ids) else None,
        chunks[final].hash if final < len(chunks) else None,
        seg.pending_numbers,
    )
    tail = state.to_json() if carry is not None else None  # None: read it whole next time
    size = base.offset + len(data)
    d = file_date(mf.path, span.mtime)
    day = d.isoformat() if d else None
    n_lines = span.lines_before + len(seg.numbers) + len(seg.pending)
    # Without a tail state the line map leaves the pending lines out: so does the text.
    text = FileText.of_lines(seg.lines, seg.pending if tail is not None else ())
    # A tail's hash is no content hash (that would mean reading the whole file): it can never
    # equal one, so a same-size rewrite is still caught by the whole-file check.
    mark = span.file_hash if span.file_hash is not None else f"tail:{state.anchor}:{size}"
    record = FileRecord(
        mf.path, mf.source, mark, span.mtime, size, day, n_lines, seg.numbers, tail, text
    )
    if span.file_hash is not None:
        store.upsert_file(record)
    else:
        store.extend_file(record)  # the line map and the text: what was appended
    report.indexed += 1
    vectors_changed(store, ctx, removed, [(cid, b) for cid, b in added if b is not None])


def _open_window(
    chunk: Chunk, lines: list[str], numbers: list[int]
) -> list[tuple[int, str]] | None:
    """The units (line number, text) of ``chunk``, the last chunk of ``lines``: its text is
    its units joined by newlines, each a line or a piece of a long line cut by the chunker,
    so they are matched from the end. None if they do not match (then no tail state)."""
    out: list[tuple[int, str]] = []
    j, acc = len(lines) - 1, ""
    for unit in reversed(chunk.text.split("\n")):
        piece = unit + acc
        if j < 0 or not lines[j].endswith(piece):
            return None
        out.append((numbers[j], unit))
        if piece == lines[j]:
            j, acc = j - 1, ""
        else:
            acc = piece
    out.reverse()
    if not out or out[0][0] != chunk.start_line or out[-1][0] != chunk.end_line:
        return None
    return out
