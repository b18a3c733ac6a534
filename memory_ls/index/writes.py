"""Writing one file's chunks: the shared steps of every sync (disk, editor buffer, transcript).

Call these inside a store transaction; the in-memory vector index hears of a change only once
that transaction commits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..chunking import Chunk, ChunkLimits, chunk_lines, split_lines
from ..sources import SourceError, SourceText, render
from ..sources.dates import file_date
from ..sources.frontmatter import FileMeta, file_meta
from ..sources.markdown import content_hash
from ..workspace import MemoryFile, Workspace, shown
from .backend import IndexBackend
from .cache import CacheKey
from .rows import FileRecord, FileText, from_blob

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]  # (done, total, message)
VectorUpdate = Callable[[Sequence[int], Sequence[tuple[int, np.ndarray]]], None]


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
    # "path: why", the path workspace-relative (or sessions:<root>/...): what the walk passed
    # over (a symlink, a FIFO, a name not UTF-8) and the files that could not be read.
    skipped: list[str] = field(default_factory=list)

    def skip(self, path: str, why: str) -> None:
        """A file found but not indexed (too large, binary, unreadable), logged as it goes."""
        entry = f"{shown(path)}: {why}"
        log.warning("skipping %s", entry)
        self.skipped.append(entry)

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


def index_document(
    store: IndexBackend,
    ctx: IndexContext,
    mf: MemoryFile,
    data: bytes,
    mtime: float,
    report: SyncReport,
    stamp: float | None = None,
) -> None:
    """Index one file's bytes (from disk or an editor buffer); call inside a transaction.
    ``stamp``: what the next sync compares to tell a change (``mtime`` if not given)."""
    try:
        src = render(mf, data)
    except SourceError as exc:
        report.skip(mf.path, exc.reason)
        remove_file(store, ctx, mf.path)
        return
    lines = split_lines(src.text)
    meta = file_meta(lines) if src.line_map is None else None
    chunks = body_chunks(lines, ctx.limits, src.line_map, meta)
    known = known_vectors(store, ctx, chunks, store.chunk_embeddings(mf.path), report)
    model = ctx.cache_key[1] if ctx.cache_key else ""
    removed, added = store.replace_chunks(mf.path, mf.source, chunks, known, model)
    d = file_date(mf.path, mtime, meta.date if meta else None)
    store.upsert_file(
        FileRecord(
            mf.path,
            mf.source,
            content_hash(data),
            recorded_mtime(mtime if stamp is None else stamp),
            len(data),
            d.isoformat() if d else None,
            len(lines),
            src.line_map,
            text=file_text(src),
            meta=meta.to_json() if meta else None,
        )
    )
    report.indexed += 1
    vectors_changed(store, ctx, removed, [(cid, b) for cid, b in added if b is not None])


def body_chunks(
    lines: list[str], limits: ChunkLimits, line_map: Sequence[int] | None, meta: FileMeta | None
) -> list[Chunk]:
    """The chunks search reads: a Markdown file's lines after its front matter (which the
    file row keeps, ``meta``), a transcript's rendered lines with their original numbers."""
    numbers = list(line_map)[: len(lines)] if line_map else list(range(1, len(lines) + 1))
    skip = meta.end if meta else 0
    return chunk_lines(lines[skip:], limits, numbers[skip:])


# A file changed this recently may change again within the same tick of its mtime (a few
# milliseconds on ext4, a second or two on some file systems) with the same size: then its
# mtime and size would match what was read, and the change would never be indexed.
RACY_S = 2.0


def recorded_mtime(mtime: float) -> float:
    """The mtime to keep for a file just read: a change that recent is kept as one that
    cannot match (its negation), so the next sync reads the file again (its hash spares the
    re-indexing when nothing changed), as git does with racily clean entries."""
    return mtime if time.time() - mtime >= RACY_S else -mtime


def file_text(src: SourceText) -> FileText:
    """A whole rendered file as a team index keeps it: a transcript's lines each end with a
    newline, as its tails' do, so a later tail appends cleanly."""
    return FileText(src.text + "\n" if src.line_map and src.text else src.text)


def known_vectors(
    store: IndexBackend,
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
            hits = store.cache.get(ctx.cache_key, wanted)
            report.cache_hits += len(hits)
            known.update(hits)
    return known


def vectors_changed(
    store: IndexBackend,
    ctx: IndexContext,
    removed: Sequence[int],
    added: Sequence[tuple[int, bytes]],
) -> None:
    """Tell the in-memory vector index, once the transaction holding the change commits."""
    on_vectors = ctx.on_vectors
    if on_vectors and (removed or added):
        vecs = [(cid, from_blob(b)) for cid, b in added]
        store.after_commit(lambda: on_vectors(removed, vecs))


def remove_file(store: IndexBackend, ctx: IndexContext, path: str) -> None:
    vectors_changed(store, ctx, store.delete_file(path), [])
