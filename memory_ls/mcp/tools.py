"""The tools over one engine, and keeping its index fresh without a file watcher.

A keyword sync runs before a search (throttled), and embeddings are filled in the background
so a search never waits for the model. Every method here blocks (SQLite, the embedding
model): the server runs each in a worker thread.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Any

from ..engine import MemoryEngine
from ..engine.route import retry_pause
from ..index.schema import DatabaseError
from ..params import MCP, ParamError, parse_check, parse_get, parse_search
from ..search.citations import citation_problem, parse_citation
from ..workspace import PathError
from .schemas import MAX_LINES

log = logging.getLogger(__name__)

# At most one disk walk per this many seconds of searching: short enough that a note an
# agent just wrote is found by its next search, long enough that a burst of searches (or
# several agents sharing one HTTP server) does not walk the disk each time.
REFRESH_SECONDS = 1.0
READY_TIMEOUT_SECONDS = 30.0  # memory_check waits this long for the first keyword sync
# A search waits this long for the first keyword sync, then answers from what it has indexed so
# far (committed every 200 files), saying so: a big workspace's first sync takes longer than an
# agent's tool budget (OpenClaw's is 15 s for a whole memory_search).
FIRST_SYNC_WAIT_SECONDS = 3.0  # as the language server waits (server/requests.py FIRST_SYNC_WAIT_S)
INDEXING = (
    "the first sync of this workspace is still running: results come from the files indexed "
    "so far; search again in a moment"
)


class MemoryTools:
    """memory_search, memory_get, memory_status and memory_check over one engine."""

    def __init__(self, engine: MemoryEngine, refresh_seconds: float = REFRESH_SECONDS):
        self.engine = engine
        self.refresh_seconds = refresh_seconds
        self.ready = threading.Event()
        self._refreshed = 0.0
        self._refresh_lock = threading.Lock()
        self._embedding = threading.Lock()
        self._closed = False
        self._stop = threading.Event()

    # -- keeping the index fresh ----------------------------------------------------------------
    def start(self) -> None:
        """First sync in the background: keyword index now, vectors after."""
        threading.Thread(target=self._first_sync, name="memory-ls-mcp-sync", daemon=True).start()
        if self.engine.settings.store.backend == "postgres":
            threading.Thread(target=self._keep_team, name="memory-ls-mcp-team", daemon=True).start()

    def _first_sync(self) -> None:
        try:
            report = self.engine.sync("mcp-start", embed=False)
            log.info("indexed %d of %d files", report.indexed, report.files)
        except Exception:  # a broken index must not take the tools down: search degrades
            log.exception("first sync failed")
        finally:
            self._refreshed = time.monotonic()
            self.ready.set()
        self._embed()

    def _embed(self) -> None:
        if self.engine.provider is None or not self._embedding.acquire(blocking=False):
            return
        try:
            self.engine.embed_pending(should_stop=lambda: self._closed)
        except Exception:
            log.exception("embedding failed; keyword search still works")
        finally:
            self._embedding.release()

    def _keep_team(self) -> None:
        """While the team index cools down after a failure: try it again once the cooldown
        is over and, when it answers, push what this folder changed meanwhile, without
        waiting for the next search (the language server's timer, ``Folder.keep_team``)."""
        self.ready.wait()
        while not self._stop.wait(retry_pause(self.engine.team_retry_in())):
            if self.engine.team_retry_in() != 0:
                continue
            try:
                self.engine.retry_team()
            except Exception:  # the next search tries again too
                log.exception("trying the team index again failed")
                continue
            if self.engine.team_retry_in() is None and self.engine.provider is not None:
                threading.Thread(
                    target=self._embed, name="memory-ls-mcp-embed", daemon=True
                ).start()

    def refresh(self, wait: float = READY_TIMEOUT_SECONDS) -> None:
        """Pick up files changed since the last look (agents write memory mid-session)."""
        self.ready.wait(wait)
        if not self.ready.is_set():
            return
        with self._refresh_lock:
            recent = time.monotonic() - self._refreshed < self.refresh_seconds
            if recent and not self.engine.indexer.index_replaced():  # deleted: index it now
                return
            try:
                report = self.engine.sync("mcp", embed=False)
            except (DatabaseError, OSError) as exc:
                # Another process's write lock held past the busy timeout, a full disk: the
                # search answers from the index as it is, as the CLI's and the editor's do (it
                # failed with a bare "OperationalError", after waiting the same 30 s).
                log.warning("changed files not indexed (%s); searching the index as it is", exc)
                return
            finally:
                self._refreshed = time.monotonic()
        if report.indexed and self.engine.provider is not None:
            threading.Thread(target=self._embed, name="memory-ls-mcp-embed", daemon=True).start()

    # -- tools --------------------------------------------------------------------------------
    def search(self, args: dict[str, Any]) -> dict[str, Any]:
        req = parse_search(args, MCP)
        if not req.query.strip():
            raise ParamError("query", "must not be empty")
        self.refresh(FIRST_SYNC_WAIT_SECONDS)
        indexing = not self.ready.is_set()
        answer = self.engine.search(req)
        if not indexing:
            return answer.to_json(self.engine.root)
        # The first sync is still running: what it indexed so far, and why it may be incomplete
        # (fallbackReason, as the language server says it), with a flag a client can test.
        why = "; ".join(filter(None, (answer.fallback_reason, INDEXING)))
        out = replace(answer, fallback_reason=why).to_json(self.engine.root)
        out["indexing"] = True
        return out

    def get(self, args: dict[str, Any]) -> dict[str, Any]:
        p = parse_get(args, MCP)
        start, lines = p.start, p.lines
        if lines is None and start is None and "#" not in p.target:
            lines = MAX_LINES  # a whole huge file is not what an agent's context needs
            start = 1
        try:
            excerpt = self.engine.get(p.target, start=start, lines=lines)
        except (PathError, ValueError) as exc:
            # A citation of bad line numbers parses as none: it was named "path" to the agent.
            cited = p.citation or parse_citation(p.target) or citation_problem(p.target)
            field = "citation" if cited else "path"
            raise ParamError(field, str(exc)) from None
        return excerpt.to_json(self.engine.root)

    def check(self, args: dict[str, Any]) -> dict[str, Any]:
        p = parse_check(args, MCP)
        self.refresh()
        try:
            path, found = self.engine.check_draft(p.text, p.path)
        except PathError as exc:
            raise ParamError("path", str(exc)) from None
        return {"path": path, "findings": [f.to_json() for f in found]}

    def status(self, args: dict[str, Any]) -> dict[str, Any]:
        if args:
            raise ParamError(next(iter(args)), "memory_status takes no arguments")
        return self.engine.status()

    def close(self) -> None:
        self._closed = True
        self._stop.set()
