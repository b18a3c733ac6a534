"""Keeping the store in step with the files: the keyword phase.

The keyword phase (chunk, FTS5, vectors reused from the file's old chunks and from the cache)
is fast and makes the text searchable at once. The vector phase (``embed.py``) embeds whatever
is still pending in batches, one committed transaction a batch, so it can be interrupted
anywhere (a kill -9, an edit, a shutdown) and resumed without losing what was paid for.
"""

from __future__ import annotations

import logging
import stat
import time

from ..sources import SourceError
from ..sources.markdown import content_hash, read_bytes
from ..sources.sessions import sync_action as session_sync_action
from ..workspace import MemoryFile
from .backend import IndexBackend
from .transcripts import sync_transcript
from .writes import (
    IndexContext,
    Progress,
    SyncReport,
    index_document,
    recorded_mtime,
    remove_file,
)

__all__ = [
    "IndexContext",
    "Progress",
    "SyncReport",
    "index_document",
    "remove_file",
    "sync_keyword",
]

log = logging.getLogger(__name__)
FILES_PER_TRANSACTION = 200


def sync_keyword(
    store: IndexBackend,
    ctx: IndexContext,
    overlays: dict[str, str],
    report: SyncReport,
    progress: Progress | None = None,
    only: set[str] | None = None,
) -> None:
    """Bring files, chunks and FTS in line with the disk (and open buffers)."""
    ws = ctx.workspace
    if only is None:
        listed = ws.discover()
        report.skipped += listed.skipped  # symlinks, FIFOs, names not UTF-8: never opened
        found = {mf.path: mf for mf in listed}
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
                remove_file(store, ctx, path)
                report.removed += 1
    report.skipped.sort()


def _sync_one(store, ctx, mf: MemoryFile, state, overlay: str | None, report: SyncReport) -> None:
    if overlay is not None:
        data = overlay.encode("utf-8", "surrogatepass")
        if state and state.hash == content_hash(data):
            report.unchanged += 1
            return
        index_document(store, ctx, mf, data, time.time(), report)
        return
    try:
        st = mf.abs_path.lstat()
    except FileNotFoundError:  # deleted while we looked
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        # Gone, or replaced since the walk by what is not memory (a symlink, a folder).
        if state:
            remove_file(store, ctx, mf.path)
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
                remove_file(store, ctx, mf.path)
                report.removed += 1
            return
        if action == "wait":  # a live transcript below both delta thresholds
            report.unchanged += 1
            return
    # A note's ctime too: an edit of the same size whose mtime was set back (`touch -d`,
    # `cp -p`, a restore) kept mtime and size as they were read and was never indexed. A
    # transcript keeps its mtime: its tail is read from the size it had.
    stamp = st.st_mtime if mf.source == "sessions" else max(st.st_mtime, st.st_ctime)
    if state and state.mtime == stamp and state.size == st.st_size:
        report.unchanged += 1
        return
    if mf.source == "sessions":
        sync_transcript(store, ctx, mf, st, state, report)
        return
    try:
        data = read_bytes(mf.abs_path, ctx.max_file_bytes, mf.folders)
    except FileNotFoundError:
        return
    except SourceError as exc:
        report.skip(mf.path, exc.reason)
        if state:
            remove_file(store, ctx, mf.path)
        return
    if state and state.hash == content_hash(data):
        store.touch_file(mf.path, recorded_mtime(stamp), st.st_size)
        report.unchanged += 1
        return
    index_document(store, ctx, mf, data, st.st_mtime, report, stamp)


def reindex_buffers(store, ctx: IndexContext, buffers: dict[str, str], wait_ms: int) -> None:
    """Index the open buffers again after another process's sync wrote their files' disk text
    over them: only those whose text the index does not hold, waiting at most ``wait_ms`` for
    another process's write lock (a search waits on this; raises DatabaseError past it)."""
    states = store.file_states(list(buffers))
    stale = {
        path: text
        for path, text in buffers.items()
        if (s := states.get(path)) is None
        or s.hash != content_hash(text.encode("utf-8", "surrogatepass"))
    }
    if not stale:
        return
    conn = store.conn
    (old,) = conn.execute("PRAGMA busy_timeout").fetchone()
    conn.execute(f"PRAGMA busy_timeout={max(0, int(wait_ms))}")
    try:
        sync_keyword(store, ctx, stale, SyncReport("edit"), None, set(stale))
    finally:
        conn.execute(f"PRAGMA busy_timeout={int(old)}")
