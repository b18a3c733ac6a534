"""Pull diagnostics (LSP 3.17) for a client that asks for them: ``textDocument/diagnostic``,
``workspace/diagnostic`` and ``workspace/diagnostic/refresh``, in place of publishing.

A client pulls when its capabilities say it can (``textDocument.diagnostic``) and that it
handles ``workspace/diagnostic/refresh``: without the refresh, an open document would keep
its findings after an edit in another file changed them. vscode-languageclient 9 says both
(and asks ``workspace/diagnostic`` again 2 s after each answer, and pulls its open documents
on a refresh); Neovim 0.11 says neither refresh nor workspace pulls, and is published to.
The capability is declared to such a client only (``app.py``, at ``initialize``), so a
client never gets the same finding both ways.

What is answered is what ``Documents`` last merged for a URI (its citations and its memory
checks' findings): nothing is computed in a handler. Each URI's diagnostics have a result id
that changes when they do, so a pull with the id the client holds answers ``unchanged``.
URIs are compared by their file path: a client may spell a URI otherwise than we do.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcMethodNotFound
from pygls.uris import to_fs_path

log = logging.getLogger(__name__)

IDENTIFIER = "memory-ls"
REFRESH_DELAY_MS = 100  # a burst of changes (a check's files, an edit's citations): one refresh
REFRESH_TIMEOUT_S = 10  # a client that never answers a refresh does not stop the next ones

Report = types.RelatedFullDocumentDiagnosticReport | types.RelatedUnchangedDocumentDiagnosticReport
WorkspaceItem = (
    types.WorkspaceFullDocumentDiagnosticReport | types.WorkspaceUnchangedDocumentDiagnosticReport
)


def wanted(caps: types.ClientCapabilities | None) -> bool:
    """The client pulls diagnostics and handles ``workspace/diagnostic/refresh``."""
    td = caps.text_document if caps else None
    ws = caps.workspace if caps else None
    refresh = ws.diagnostics.refresh_support if ws and ws.diagnostics else None
    return bool(td and td.diagnostic is not None and refresh)


def options() -> types.DiagnosticOptions:
    return types.DiagnosticOptions(
        identifier=IDENTIFIER, inter_file_dependencies=False, workspace_diagnostics=True
    )


@functools.lru_cache(maxsize=65536)
def _key(uri: str) -> str:
    """A URI's file path (or the URI): each workspace pull names every file the client knows."""
    return to_fs_path(uri) or uri


class Pull:
    def __init__(self, ls: Any, spawn: Callable[[Any], asyncio.Future[Any]]):
        self.ls = ls
        self._spawn = spawn
        self._prefix = secrets.token_hex(4)  # ids of an earlier server never match ours
        self._serial = 0
        self._uri: dict[str, str] = {}  # key -> the URI its diagnostics were set under
        self._diags: dict[str, list[types.Diagnostic]] = {}  # key -> diagnostics (not empty)
        self._ids: dict[str, str] = {}  # key -> result id (every key that ever had any)
        self._timer: asyncio.TimerHandle | None = None
        self._refreshing = False
        self._again = False

    def _id(self, key: str) -> str:
        return self._ids.get(key, f"{self._prefix}-0")

    def set(self, uri: str, diags: list[types.Diagnostic]) -> None:
        """A URI's diagnostics now (``[]``: none); a refresh follows a change."""
        key = _key(uri)
        if self._diags.get(key, []) == diags:
            return
        self._serial += 1
        self._ids[key] = f"{self._prefix}-{self._serial}"
        if diags:
            self._diags[key], self._uri[key] = diags, uri
        else:
            self._diags.pop(key, None)
            self._uri.setdefault(key, uri)
        self._schedule_refresh()

    # -- requests ---------------------------------------------------------------------------
    def document(self, params: types.DocumentDiagnosticParams) -> Report:
        key = _key(params.text_document.uri)
        rid = self._id(key)
        if params.previous_result_id == rid:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=rid)
        return types.RelatedFullDocumentDiagnosticReport(
            items=list(self._diags.get(key, [])), result_id=rid
        )

    def workspace(self, params: types.WorkspaceDiagnosticParams) -> types.WorkspaceDiagnosticReport:
        """Every URI with diagnostics, and every one the client holds a result id for:
        ``unchanged`` when that id is the current one, else in full (``[]``: they went)."""
        known: dict[str, tuple[str, str]] = {
            _key(p.uri): (p.uri, p.value) for p in params.previous_result_ids
        }
        items: list[WorkspaceItem] = []
        for key in sorted(set(self._diags) | set(known)):
            rid = self._id(key)
            uri = self._uri.get(key) or known[key][0]
            if key in known and known[key][1] == rid:
                items.append(
                    types.WorkspaceUnchangedDocumentDiagnosticReport(
                        uri=uri, version=None, result_id=rid
                    )
                )
            else:
                full = types.WorkspaceFullDocumentDiagnosticReport(
                    uri=uri, version=None, items=list(self._diags.get(key, [])), result_id=rid
                )
                items.append(full)
        return types.WorkspaceDiagnosticReport(items=items)

    # -- refresh ----------------------------------------------------------------------------
    def _schedule_refresh(self) -> None:
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(REFRESH_DELAY_MS / 1000, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self._refreshing:
            self._again = True  # one refresh at a time: another when it is answered
            return
        self._refreshing = True
        self._spawn(self._refresh())

    async def _refresh(self) -> None:
        try:
            await asyncio.wait_for(
                self.ls.workspace_diagnostic_refresh_async(None), REFRESH_TIMEOUT_S
            )
        except Exception as exc:  # refused, unanswered, or the client is gone
            log.debug("workspace/diagnostic/refresh: %r", exc)
        finally:
            self._refreshing = False
            if self._again:
                self._again = False
                self._schedule_refresh()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def register(server: Any, current: Callable[[], Pull | None]) -> None:
    """``textDocument/diagnostic`` and ``workspace/diagnostic``, answered by the ``Pull`` of
    ``current()``, declared to this client when it pulls, else not: called by the
    ``initialize`` handler, before pygls reads the features it declares in its answer."""
    features, options_of = server.protocol.fm.features, server.protocol.fm.feature_options
    if current() is None:
        for method in (types.TEXT_DOCUMENT_DIAGNOSTIC, types.WORKSPACE_DIAGNOSTIC):
            features.pop(method, None)  # an earlier client's, over the same TCP server
            options_of.pop(method, None)
        return
    if types.TEXT_DOCUMENT_DIAGNOSTIC in features:
        return

    def answers() -> Pull:
        found = current()
        if found is None:
            raise JsonRpcMethodNotFound(message="diagnostics are published to this client")
        return found

    @server.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, options())
    def document_diagnostic(params: types.DocumentDiagnosticParams) -> Report:
        return answers().document(params)

    @server.feature(types.WORKSPACE_DIAGNOSTIC)
    def workspace_diagnostic(
        params: types.WorkspaceDiagnosticParams,
    ) -> types.WorkspaceDiagnosticReport:
        return answers().workspace(params)
