"""The team index (PostgreSQL + pgvector) first, the folder's own SQLite index as its
fallback (the seed's fallback manager).

PostgreSQL answers while it can. When it cannot (unreachable, too slow, bad credentials, a
schema this version does not know) the folder's local SQLite index, kept in step by every sync
(keyword-only), answers and every response says why; PostgreSQL is tried again after
``store.postgres.retryAfterS``. Nothing is queued: the local index knows what the folder holds,
and catching up compares that with what the team index holds (by content hash), so writes made
during an outage reach the team index once it is back, and nothing is pushed twice. What to push
is read from the disk, never from editor buffers: unsaved text stays on its machine.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import psycopg

from ...index.cache import CacheKey
from ...index.postgres import URL_ENV, PgDatabase, PgStore, PrimaryUnavailable, describe, redact
from ...index.postgres.sizing import SearchMemory, search_memory
from ...index.postgres.store import pusher as pg_pusher
from ...index.postgres.store import reader as pg_reader
from ...index.postgres.store import writer as pg_writer
from ...index.sync import (
    FILES_PER_TRANSACTION,
    IndexContext,
    Progress,
    SyncReport,
    index_document,
    remove_file,
    sync_keyword,
)
from ...index.writes import file_text
from ...settings import Settings
from ...sources import SourceError, render
from ...sources.markdown import content_hash, read_bytes
from ...workspace import PathError, Workspace
from ..calibration_passages import reference_vectors
from ..embed_target import EmbedTarget, index_context
from ..indexer import Indexer
from ..providers import ProviderPolicy
from . import removals

log = logging.getLogger(__name__)
TEAM_ERRORS = (psycopg.Error, PrimaryUnavailable)
T = TypeVar("T")
TEXT_CACHE_FILES = 16  # teammates' file texts kept, each while its file keeps its hash


class TeamIndex:
    def __init__(
        self,
        settings: Settings,
        workspace: Workspace,
        policy: ProviderPolicy,
        clock: Callable[[], float] = time.monotonic,
    ):
        pg = settings.store.postgres
        self.settings = settings
        self.workspace = workspace
        self.policy = policy
        self.url = pg.url or os.environ.get(URL_ENV, "")
        self.namespace = pg.namespace
        self.origin = f"{socket.gethostname()}:{workspace.root}"
        # Kept across reconnections: claims made before an outage are still this process's.
        self.claimant = f"{self.origin} {uuid.uuid4().hex[:12]}"
        self.clock = clock
        self.lock = threading.RLock()  # the writer connection and ``pushed``
        self.db: PgDatabase | None = None
        self.problem: str | None = None
        if not self.url:
            self.problem = "store.backend is postgres but no URL: set store.postgres.url or "
            self.problem += URL_ENV
        elif not self.namespace:
            self.problem = "store.postgres.namespace is empty"
        self.retry_at = 0.0
        # path -> content hash the team index holds, for the files this folder has or wrote;
        # None until compared after a (re)connect: then every difference is replayed.
        self.pushed: dict[str, str] | None = None
        self.last_push: SyncReport | None = None
        self.textless: set[str] = set()  # this folder's files whose team text is missing
        self._texts: dict[str, tuple[str, str]] = {}  # path -> (file hash, its text)
        self._reference: tuple[str, np.ndarray] | None = None
        # Open buffers that differ from their file (or have none yet): searched locally
        # beside the team index (``unsaved.py``), never pushed.
        self.unsaved: set[str] = set()

    # -- health -------------------------------------------------------------------------------
    def connect(self) -> PgDatabase | None:
        """The database when it can be used now; connects (again) once the cooldown is over."""
        db = self.db
        if db is not None:  # no lock: a long push holds it, and searches must not wait on it
            self._set_model(db)
            return db
        with self.lock:
            if self.db is None:
                if self.url == "" or not self.namespace or self.clock() < self.retry_at:
                    return None
                pg = self.settings.store.postgres
                try:
                    self.db = PgDatabase(
                        self.url,
                        self.namespace,
                        self.origin,
                        timeout_ms=pg.timeout_ms,
                        pool_size=pg.pool_size,
                        claimant=self.claimant,
                        pooler=pg.pooler,
                    )
                except TEAM_ERRORS as exc:
                    self._down(exc)
                    return None
                self.problem, self.pushed = None, None
                log.info("team index %s, namespace %s: connected", redact(self.url), self.namespace)
            self._set_model(self.db)
            return self.db

    def _set_model(self, db: PgDatabase) -> None:
        p = self.policy.current  # after a provider fallback: the fallback model's vectors
        db.model_key = "|".join((p.id, p.model, p.provider_key)) if p else ""

    def failed(self, exc: BaseException) -> None:
        """The team index failed mid-use: the local index answers until the cooldown is over."""
        with self.lock:
            self._down(exc)
            db, self.db, self.pushed = self.db, None, None
        if db is not None:
            db.close()

    def _down(self, exc: BaseException) -> None:
        self.problem = describe(exc, self.url)
        self.retry_at = self.clock() + self.settings.store.postgres.retry_after_s
        log.warning("%s; the local index answers meanwhile", self.problem)

    def fallback_reason(self) -> str:
        return (
            f"team index unavailable: {self.problem}; answered from this folder's local index "
            "(keyword only)"
        )

    # -- keeping the team index in step ---------------------------------------------------------
    def context(self) -> IndexContext:
        return index_context(self.settings, self.workspace, self.policy.current)

    def catch_up(
        self,
        indexer: Indexer,
        paths: set[str] | None = None,
        force: bool = False,
        wait_s: float = -1,
    ) -> SyncReport | None:
        """Push this folder's changes: the given paths, or (``None``, and after every
        reconnect) every file whose content differs between the local index and the team index.
        ``force`` re-indexes every file of this folder in one transaction under the
        namespace's rebuild lock (readers keep the old rows until it commits)."""
        db = self.connect()
        if db is None:
            return None
        report = SyncReport("team", full=force)
        if not self.lock.acquire(timeout=wait_s):
            return None  # another push is running; it or the next one takes these paths
        try:
            self._push(pg_pusher(db, wait_s), indexer, paths, force, report)
        except psycopg.errors.LockNotAvailable:  # a teammate's rebuild holds one of them
            self.pushed = None  # the next push compares every file again: they go then
            return None
        except TEAM_ERRORS as exc:
            self.failed(exc)
            return None
        finally:
            self.lock.release()
        self.last_push = report
        return report

    def _push(
        self,
        store: PgStore,
        indexer: Indexer,
        paths: set[str] | None,
        force: bool,
        report: SyncReport,
    ) -> None:
        full = paths is None or self.pushed is None or force
        local = removals.held(indexer, None if full else paths)
        if self.pushed is None:
            with store.transaction():  # a table locked for long: a waited-for push gives up
                ours = local.keys() | store.origin_paths(self.origin)
                self.pushed = {p: s.hash for p, s in store.file_states(ours).items()}
                # Pushed by a client that sends no texts: ``send_texts`` sends them.
                self.textless = store.files_without_text(local)
        gone = removals.to_push(store, indexer, local, self.pushed) if full else {}
        scope = local.keys() | self.pushed.keys() if full else set(paths or ())
        todo = scope if force else {p for p in scope if local.get(p) != self.pushed.get(p)}
        if not todo:
            removals.settle(indexer, gone)
            return
        # The disk decides (a file gone from it is deleted for everyone); the diff only picks
        # which files to look at.
        if force:
            self._reindex(store, sorted(todo), report)
        else:
            sync_keyword(store, self.context(), {}, report, None, todo)
        store.merge_keyword_postings()
        after = store.file_states(todo)
        for p in todo:
            if p in after:
                self.pushed[p] = after[p].hash
            else:
                self.pushed.pop(p, None)
        removals.settle(indexer, gone)

    def send_texts(self) -> int:
        """Send the texts the team index lacks for files this folder has with the same
        content (found when connecting): text rows only, a batch per transaction, in the
        background of a sync. A file whose content differs is the push's, not this."""
        db, todo = self.connect(), sorted(self.textless)
        if db is None or not todo:
            return 0
        sent = 0
        try:
            for i in range(0, len(todo), FILES_PER_TRANSACTION):
                with self.lock:  # the writer connection, a batch at a time
                    store = pg_writer(db)
                    with store.transaction():
                        for path in todo[i : i + FILES_PER_TRANSACTION]:
                            sent += self._send_text(store, path)
                self.textless.difference_update(todo[i : i + FILES_PER_TRANSACTION])
        except TEAM_ERRORS as exc:
            self.failed(exc)
        return sent

    def _send_text(self, store: PgStore, path: str) -> bool:
        mf = self.workspace.classify(path)
        if mf is None or not self.workspace.is_memory_file(mf):
            return False
        try:
            data = read_bytes(mf.abs_path, self.settings.max_file_bytes, mf.folders)
            text = file_text(render(mf, data))
        except (OSError, SourceError):
            return False
        return store.put_file_text(path, content_hash(data), text)

    def _reindex(self, store: PgStore, paths: list[str], report: SyncReport) -> None:
        ctx, ws = self.context(), self.workspace
        with store.transaction():
            store.lock_namespace()
            for path in paths:
                mf = ws.classify(path)
                try:
                    if mf is None or not ws.is_memory_file(mf):
                        raise FileNotFoundError(path)
                    mtime = mf.abs_path.stat().st_mtime
                    data = read_bytes(mf.abs_path, ctx.max_file_bytes, mf.folders)
                except (FileNotFoundError, SourceError):
                    remove_file(store, ctx, path)
                    report.removed += 1
                    continue
                index_document(store, ctx, mf, data, mtime, report)

    def ready(self, indexer: Indexer, changed: set[str]) -> PgDatabase | None:
        """Connected and caught up (an outage's writes replayed, ``changed`` pushed)."""
        db = self.connect()
        if db is not None and (self.pushed is None or changed):
            wait = max(1.0, self.settings.sync.search_budget_ms / 1000)
            self.catch_up(indexer, changed if self.pushed is not None else None, wait_s=wait)
        return self.db

    def read(self, fn: Callable[[PgStore], T], *, cooldown: bool = True) -> T | None:
        """``fn`` on a reader of the team index; None (and the cooldown) when it fails.
        ``cooldown=False``: a read that is an optimisation only logs its failure."""
        db = self.connect()
        if db is None:
            return None
        try:
            with pg_reader(db) as store:
                return fn(store)
        except TEAM_ERRORS as exc:
            if cooldown:
                self.failed(exc)
            else:
                log.warning("team index: an optional read failed: %s", describe(exc, self.url))
            return None

    def file_text(self, path: str) -> tuple[str, list[int] | None] | None:
        """The text of a file this machine does not have, from the team index; None when the
        index has no such file or cannot answer (the caller reports the local problem).
        Raises PathError when the file is there but its text is not."""
        # Diagnostics ask for every citation of an open document on each change: a text
        # already read is not fetched again while its file keeps the same hash.
        kept = self._texts.get(path)
        found = self.read(lambda s: s.file_text(path, kept[0] if kept else None))
        if found is None:
            return None
        if kept is not None and found.hash == kept[0]:
            return kept[1], found.line_map
        if found.text is None:
            raise PathError(
                f"{path}: not on this machine, and the team index has no current text of it "
                "(its last change came through a memory-ls that sends no texts, or a "
                "transcript's text was cut short: a machine that has the file sends it when it "
                "next connects and syncs, or reads the transcript whole)"
            )
        if len(self._texts) >= TEXT_CACHE_FILES:
            self._texts.clear()
        self._texts[path] = (found.hash, found.text)
        return found.text, found.line_map

    def buffer_changed(
        self,
        indexer: Indexer,
        path: str,
        text: str,
        on_saved: Callable[[str], None] | None = None,
    ) -> None:
        """An editor buffer changed: push the file when the buffer is what was saved (after
        ``on_saved(path)``, which may put vectors made here into the team's embedding cache
        for the push to find); until then its text is searched on this machine beside the
        team index."""
        try:
            mf = self.workspace.resolve(path)
        except PathError:
            return
        # Editors drop a UTF-8 byte order mark from the text they hold (as indexing does).
        bom = "\ufeff".encode()
        try:  # not by name: a FIFO there would block the edit for good
            on_disk = read_bytes(mf.abs_path, self.settings.max_file_bytes, mf.folders)
            saved = on_disk.removeprefix(bom) == text.removeprefix("\ufeff").encode(
                "utf-8", "surrogatepass"
            )
        except (OSError, SourceError):
            saved = False  # a note not written yet, or not one to read
        if not saved:
            self.unsaved.add(mf.path)
            return
        self.unsaved.discard(mf.path)
        if self.db is not None:
            if on_saved is not None:
                on_saved(mf.path)
            self.ready(indexer, {mf.path})

    def share_vectors(self, key: CacheKey, items: list[tuple[str, bytes]]) -> None:
        """Put vectors made on this machine into the team's embedding cache (by content
        hash): those of a note just saved, so that the team's push finds them."""
        db = self.db
        if not items or db is None or not self.settings.cache.enabled:
            return
        # Never waits for a push in progress: an editor's save is behind this.
        if not self.lock.acquire(blocking=False):
            return
        try:
            if self.db is db:  # not closed by a failure meanwhile
                pg_writer(db).cache.put(key, items)
        except TEAM_ERRORS as exc:  # an optimisation: the team embeds the note otherwise
            log.warning("team index: sharing vectors failed: %s", describe(exc, self.url))
        finally:
            self.lock.release()

    def embed(
        self,
        indexer: Indexer,
        progress: Progress | None,
        report: SyncReport | None,
        should_stop: Callable[[], bool] | None,
    ) -> int:
        """Embed the namespace's chunks that have no vector of this model, claiming each
        batch so that clients syncing at once never embed the same text twice."""
        db = self.connect()
        if db is None:
            return 0
        try:
            with self.lock:
                target = EmbedTarget(pg_writer(db), self.lock, self.context())
            n = indexer.embed_pending(progress, report, should_stop, target)
            if db.deferred_dims or db.stored_vectors:
                with self.lock:
                    pg_writer(db).build_indexes()
            return n
        except TEAM_ERRORS as exc:
            self.failed(exc)
            return 0

    def reference_vectors(self, db: PgDatabase) -> np.ndarray | None:
        if self._reference is not None and self._reference[0] == db.model_key:
            return self._reference[1]
        with self.lock:
            target = EmbedTarget(pg_writer(db), self.lock, self.context())
        ref = reference_vectors(self.policy.current, target)
        if ref is not None:
            self._reference = (db.model_key, ref)
        return ref

    # -- status -----------------------------------------------------------------------------------
    def status(self) -> tuple[dict[str, Any], dict[str, object] | None]:
        """(what status shows about the team index, its counts when it answered)."""
        counts = self.read(lambda store: store.counts())
        db = self.db
        out: dict[str, Any] = {
            "backend": "postgres",
            "url": redact(self.url) if self.url else None,
            "namespace": self.namespace,
            "pooler": self.settings.store.postgres.pooler,
            "origin": self.origin,
            "answering": "postgres" if db is not None else "sqlite",
            "problem": self.problem,
            "retryInS": None if db else round(max(0.0, self.retry_at - self.clock()), 1),
            "lastPush": self.last_push.to_json() if self.last_push else None,
        }
        if db is not None:
            out.update(pgvector=db.caps.pgvector, vectorType=db.caps.vtype, schema=db.caps.schema)
            memory = self._search_memory(db)
            if memory is not None:
                out["server"] = memory.to_json()
        return out, counts

    def _search_memory(self, db: PgDatabase) -> SearchMemory | None:
        """The server's buffer cache against the search indexes; None when it cannot be read
        (a diagnostic: never a reason to leave the team index)."""
        try:
            with pg_reader(db) as store:
                return search_memory(store)
        except TEAM_ERRORS as exc:
            log.info("could not read the server's buffer cache size: %s", describe(exc, self.url))
            return None

    def close(self) -> None:
        with self.lock:
            db, self.db = self.db, None
        if db is not None:
            db.close()
