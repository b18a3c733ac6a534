"""Work-done progress (``$/progress``) for syncs: begin, files done / total, end."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.capabilities import get_capability

from ..index.sync import SyncReport
from .folder import Folder, FolderUnavailable

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.1
CREATE_TIMEOUT_S = 5


class Progress:
    """Work-done progress for one sync: begin, report (files done / total), end.

    The engine calls ``callback`` from a worker thread; reports are throttled and handed to
    the event loop, which sends them in order. Without a token (the client cannot show
    progress, or refused it) every call is a no-op.
    """

    def __init__(self, ls: LanguageServer, token: str | None):
        self.ls = ls
        self.token = token
        self.loop = asyncio.get_running_loop()
        self._last = 0.0
        self._last_pct = 0
        self._ending = False

    @classmethod
    async def start(cls, ls: LanguageServer, title: str) -> Progress:
        token: str | None = None
        if get_capability(ls.client_capabilities, "window.work_done_progress", False):
            token = f"memory-ls-{uuid.uuid4().hex[:12]}"
            try:
                await asyncio.wait_for(ls.work_done_progress.create_async(token), CREATE_TIMEOUT_S)
            except Exception as exc:
                log.info("client refused work done progress: %s", exc)
                token = None
        self = cls(ls, token)
        if token:
            ls.work_done_progress.begin(
                token,
                types.WorkDoneProgressBegin(
                    title=title, cancellable=False, percentage=0, message="starting"
                ),
            )
        return self

    def callback(self, done: int, total: int, what: str) -> None:
        if self.token is None or self._ending:
            return
        now = time.monotonic()
        if done < total and now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now
        self.loop.call_soon_threadsafe(self._report, done, total, what)

    def _report(self, done: int, total: int, what: str) -> None:
        if self.token is None:
            return
        pct = int(100 * done / total) if total else 100
        # Percentages may not go backwards; the embedding phase reports as its own 0-100
        # in the message only.
        self._last_pct = max(self._last_pct, pct if what == "indexing" else self._last_pct)
        self.ls.work_done_progress.report(
            self.token,
            types.WorkDoneProgressReport(
                message=f"{what} {done}/{total}", percentage=max(0, self._last_pct)
            ),
        )

    def end(self, message: str) -> None:
        if self.token is None or self._ending:
            return
        self._ending = True
        # Reports the worker thread queued before run first: the loop keeps FIFO order.
        self.loop.call_soon(self._end, message)

    def _end(self, message: str) -> None:
        token, self.token = self.token, None
        if token is not None:
            self.ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))


@dataclass
class SyncOutcome:
    report: SyncReport | None
    error: str | None = None  # why there is no report: the folder is unavailable, the sync failed

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"report": self.report.to_json() if self.report else None}
        if self.error is not None:
            out["error"] = self.error
        return out


async def sync_with_progress(
    ls: LanguageServer, folder: Folder, reason: str, force: bool
) -> SyncOutcome:
    """Sync (or rebuild) a folder, then embed what is new, reporting progress; the report, or
    why there is none (logged, and said in the progress)."""
    reporter = await Progress.start(ls, f"memory-ls: indexing {folder.name}")
    t0 = time.perf_counter()
    try:
        report = await folder.sync(reason, force, reporter.callback)
        embedded = await folder.embed(reporter.callback)
    except FolderUnavailable as exc:
        reporter.end(str(exc))
        return SyncOutcome(None, str(exc))
    except asyncio.CancelledError:
        reporter.end("cancelled")
        raise
    except Exception as exc:
        log.error("%s: sync failed: %s", folder.name, exc, exc_info=exc)
        reporter.end(f"sync failed: {exc}")
        return SyncOutcome(None, f"sync failed: {exc}")
    summary = "up to date"
    if report is not None:
        summary = (
            f"{report.files} files: {report.indexed} indexed, {report.removed} "
            f"removed, {embedded} embedded in {time.perf_counter() - t0:.1f}s"
        )
    reporter.end(summary)
    return SyncOutcome(report)
