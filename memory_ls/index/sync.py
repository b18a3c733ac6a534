"""Keeping the store in step with the files: the keyword phase and the vector phase.

The keyword phase (chunk, FTS5, vectors reused from the file's old chunks and from the cache)
is fast and makes the text searchable at once. The vector phase embeds whatever is still
pending in batches, one committed transaction a batch, so it can be interrupted anywhere
(a kill -9, an edit, a shutdown) and resumed without losing what was paid for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..chunking import Chunk, ChunkLimits, chunk_lines, chunk_text, split_lines
from ..embeddings.base import EmbeddingProvider
from ..sources import SourceError, render
from ..sources.dates import file_date
from ..sources.markdown import content_hash, read_bytes
from ..sources.sessions import ANCHOR_BYTES, anchor, anchor_windows, render_segment
from ..sources.sessions import sync_action as session_sync_action
from ..workspace import MemoryFile, Workspace
from .store import CacheKey, ChunkState, Store, from_blob, to_blob

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]  # (done, total, message)
VectorUpdate = Callable[[Sequence[int], Sequence[tuple[int, np.ndarray]]], None]
FILES_PER_TRANSACTION = 200


@dataclass
class SyncReport:
    reason: str
    full: bool = False
    started_at: float = field(default_factory=time.time)
    duration_ms: float = 0.0
    files: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    embedded: int = 0
    cache_hits: int = 0
    appended: int = 0  # transcripts indexed from where the last sync stopped (of ``indexed``)
    skipped: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "reason": self.reason,
            "full": self.full,
            "startedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "durationMs": round(self.duration_ms, 1),
            "files": self.files,
            "indexed": self.indexed,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "embedded": self.embedded,
            "cacheHits": self.cache_hits,
            "appended": self.appended,
            "skipped": self.skipped,
        }


@dataclass
class IndexContext:
    workspace: Workspace
    limits: ChunkLimits
    cache_key: CacheKey | None  # None: no provider, keyword-only
    cache_enabled: bool
    max_file_bytes: int
    on_vectors: VectorUpdate | None = None


def index_text(
    store: Store, ctx: IndexContext, mf: MemoryFile, data: bytes, mtime: float, report: SyncReport
) -> None:
    """Index one file's bytes (from disk or an editor buffer); call inside a transaction."""
    try:
        src = render(mf, data)
    except SourceError as exc:
        log.warning("%s", exc)
        report.skipped.append(str(exc))
        _drop(store, ctx, mf.path)
        return
    lines = split_lines(src.text)
    chunks = chunk_text(src.text, ctx.limits, list(src.line_map) if src.line_map else None)
    known = known_vectors(store, ctx, chunks, store.chunk_embeddings(mf.path), report)
    model = ctx.cache_key[1] if ctx.cache_key else ""
    removed, added = store.replace_chunks(mf.path, mf.source, chunks, known, model)
    d = file_date(mf.path, mtime)
    store.upsert_file(
        mf.path,
        mf.source,
        content_hash(data),
        mtime,
        len(data),
        d.isoformat() if d else None,
        len(lines),
        src.line_map,
    )
    report.indexed += 1
    _vectors_changed(store, ctx, removed, [(cid, b) for cid, b in added if b is not None])


def known_vectors(
    store: Store,
    ctx: IndexContext,
    chunks: Sequence[Chunk],
    reused: dict[str, bytes],
    report: SyncReport,
) -> dict[str, bytes]:
    """hash -> vector already paid for: the file's previous chunks, then the embedding cache.
    Keyword-only (no provider): none, so no chunk claims a vector of another model."""
    if not ctx.cache_key:
        return {}
    known = dict(reused)
    if ctx.cache_enabled:
        wanted = [c.hash for c in chunks if c.hash not in known]
        if wanted:
            hits = store.cache_get(ctx.cache_key, wanted)
            report.cache_hits += len(hits)
            known.update(hits)
    return known


def _vectors_changed(
    store: Store, ctx: IndexContext, removed: Sequence[int], added: Sequence[tuple[int, bytes]]
) -> None:
    """Tell the in-memory vector index, once the transaction holding the change commits."""
    on_vectors = ctx.on_vectors
    if on_vectors and (removed or added):
        vecs = [(cid, from_blob(b)) for cid, b in added]
        store.after_commit(lambda: on_vectors(removed, vecs))


def _drop(store: Store, ctx: IndexContext, path: str) -> None:
    _vectors_changed(store, ctx, store.delete_file(path), [])


def remove_file(store: Store, ctx: IndexContext, path: str) -> None:
    _drop(store, ctx, path)


def sync_keyword(
    store: Store,
    ctx: IndexContext,
    overlays: dict[str, str],
    report: SyncReport,
    progress: Progress | None = None,
    only: set[str] | None = None,
) -> None:
    """Bring files, chunks and FTS in line with the disk (and open buffers)."""
    ws = ctx.workspace
    if only is None:
        found = {mf.path: mf for mf in ws.discover()}
        candidates = overlays.keys() - found.keys()
    else:
        found, candidates = {}, set(only)  # a few known paths: no need to walk the tree
    for path in candidates:
        mf = ws.classify(path)
        if mf and (path in overlays or ws.is_memory_file(mf)):
            found[path] = mf
    states = store.file_states(only)
    report.files = len(found)
    todo = sorted(found)
    done = 0
    for i in range(0, len(todo), FILES_PER_TRANSACTION):
        with store.transaction():
            for path in todo[i : i + FILES_PER_TRANSACTION]:
                _sync_one(store, ctx, found[path], states.get(path), overlays.get(path), report)
                done += 1
        if progress:
            progress(done, len(todo), "indexing")
    gone = [p for p in states if p not in found]
    if gone:
        with store.transaction():
            for path in gone:
                _drop(store, ctx, path)
                report.removed += 1


def _sync_one(store, ctx, mf: MemoryFile, state, overlay: str | None, report: SyncReport) -> None:
    if overlay is not None:
        data = overlay.encode("utf-8", "surrogatepass")
        if state and state.hash == content_hash(data):
            report.unchanged += 1
            return
        index_text(store, ctx, mf, data, time.time(), report)
        return
    try:
        st = mf.abs_path.stat()
    except FileNotFoundError:  # deleted while we looked
        if state:
            _drop(store, ctx, mf.path)
            report.removed += 1
        return
    if mf.source == "sessions":
        s = ctx.workspace.settings
        action = session_sync_action(
            mf.abs_path,
            st.st_size,
            st.st_mtime,
            state.size if state else None,
            s.sync.sessions.delta_bytes,
            s.sync.sessions.delta_messages,
            s.sessions.retention_days,
        )
        if action == "drop":  # past sessions.retentionDays: out of the index, not off disk
            if state:
                _drop(store, ctx, mf.path)
                report.removed += 1
            return
        if action == "wait":  # a live transcript below both delta thresholds
            report.unchanged += 1
            return
    if state and state.mtime == st.st_mtime and state.size == st.st_size:
        report.unchanged += 1
        return
    if mf.source == "sessions":
        _sync_transcript(store, ctx, mf, st, state, report)
        return
    try:
        data = read_bytes(mf.abs_path, ctx.max_file_bytes)
    except FileNotFoundError:
        return
    except SourceError as exc:
        log.warning("%s", exc)
        report.skipped.append(str(exc))
        if state:
            _drop(store, ctx, mf.path)
        return
    if state and state.hash == content_hash(data):
        store.touch_file(mf.path, st.st_mtime, st.st_size)
        report.unchanged += 1
        return
    index_text(store, ctx, mf, data, st.st_mtime, report)


# -- transcripts: index what was appended, not the whole file again ------------------------------
#
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


def _open(path):  # a seam for tests that count the bytes a sync reads
    return path.open("rb")


def _sync_transcript(store, ctx, mf: MemoryFile, st, state, report: SyncReport) -> None:
    """Index a changed transcript: its tail when it grew, else (or if in doubt) the whole."""
    try:
        if st.st_size > ctx.max_file_bytes:
            raise SourceError(
                f"{mf.abs_path.name}: {st.st_size} bytes is over maxFileBytes "
                f"({ctx.max_file_bytes})"
            )
        with _open(mf.abs_path) as fh:
            if state and st.st_size > state.size and _index_tail(store, ctx, mf, fh, st, report):
                return
            fh.seek(0)
            data = fh.read(st.st_size)
            file_hash = content_hash(data)
            if state and state.hash == file_hash:
                store.touch_file(mf.path, st.st_mtime, st.st_size)
                report.unchanged += 1
                return
            rows = store.chunk_rows(mf.path)
            whole = TailState()
            _index_transcript(
                store, ctx, mf, data, whole, rows, (b"", b""), 0, file_hash, st.st_mtime, report
            )
    except FileNotFoundError:  # deleted while we looked
        return
    except (OSError, SourceError) as exc:
        msg = str(exc)
        if not isinstance(exc, SourceError):
            msg = f"{mf.abs_path.name}: cannot read ({getattr(exc, 'strerror', None) or exc})"
        log.warning("%s", msg)
        report.skipped.append(msg)
        if state:
            _drop(store, ctx, mf.path)


def _index_tail(store: Store, ctx, mf: MemoryFile, fh, st, report: SyncReport) -> bool:
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
    _index_transcript(
        store, ctx, mf, data, tail, rows, windows, lines_before, None, st.st_mtime, report
    )
    report.appended += 1
    return True


def _index_transcript(
    store: Store,
    ctx: IndexContext,
    mf: MemoryFile,
    data: bytes,
    base: TailState,
    rows: list[ChunkState],
    windows: tuple[bytes, bytes],
    lines_before: int,
    file_hash: str | None,
    mtime: float,
    report: SyncReport,
) -> None:
    """Index ``data``, the file's bytes from ``base.offset`` on, after ``base``'s open chunk.

    ``rows`` are the chunk rows this may replace (all of the file's for a whole read), and
    ``windows`` the anchor windows before ``base.offset``. ``file_hash`` is None for a tail.
    """
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
    head, before = windows
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
    d = file_date(mf.path, mtime)
    day = d.isoformat() if d else None
    n_lines = lines_before + len(seg.numbers) + len(seg.pending)
    if file_hash is not None:
        store.upsert_file(
            mf.path, mf.source, file_hash, mtime, size, day, n_lines, seg.numbers, tail
        )
    else:
        # Not a content hash (that would mean reading the whole file): it can never equal
        # one, so a same-size rewrite is still caught by the whole-file check.
        mark = f"tail:{state.anchor}:{size}"
        store.extend_file(mf.path, mark, mtime, size, day, n_lines, seg.numbers, tail)
    report.indexed += 1
    _vectors_changed(store, ctx, removed, [(cid, b) for cid, b in added if b is not None])


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


def embed_pending(
    store: Store,
    provider: EmbeddingProvider,
    ctx: IndexContext,
    lock,
    report: SyncReport,
    progress: Progress | None = None,
    batch_size: int = 64,
    should_stop: Callable[[], bool] | None = None,
) -> None:
    """Embed every chunk without a vector. The model runs outside ``lock``; writes inside it."""
    assert ctx.cache_key is not None
    with lock:
        total = store.count_pending()
    done = 0
    while not (should_stop and should_stop()):
        with lock:
            rows = store.pending_chunks(batch_size)
        if not rows:
            break
        texts = {h: t for _, h, t in rows}
        with lock:
            # A batch-API backfill (or another process) may have paid for these already.
            by_hash = store.cache_get(ctx.cache_key, list(texts))
        report.cache_hits += len(by_hash)
        todo = [h for h in texts if h not in by_hash]
        dims = 0
        if todo:
            vecs = provider.embed_documents([texts[h] for h in todo])
            if vecs.shape[0] != len(todo):
                raise ValueError("provider returned the wrong number of vectors")
            fresh = {h: to_blob(v) for h, v in zip(todo, vecs, strict=True)}
            by_hash.update(fresh)
            dims = int(vecs.shape[1])
        else:
            fresh = {}
            dims = len(from_blob(next(iter(by_hash.values()))))
        with lock, store.transaction():
            store.ensure_vec_table(dims)
            if ctx.cache_enabled and fresh:
                store.cache_put(ctx.cache_key, list(fresh.items()))
            live = store.still_pending([(cid, h) for cid, h, _ in rows])
            items = [(cid, by_hash[h]) for cid, h, _ in rows if cid in live]
            store.set_embeddings(items, ctx.cache_key[1])
        _vectors_changed(store, ctx, [], [(cid, b) for cid, b in items])
        report.embedded += len(items)
        done += len(rows)
        if progress:
            progress(min(done, total), max(total, done), "embedding")
