"""The language server: pygls wiring only. Handlers parse (protocol.py), delegate to the
service (service.py) and convert (convert.py); engine work never runs on the event loop.

Run with ``memory-ls serve`` (stdio) or ``memory-ls serve --tcp HOST:PORT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from typing import Any

import cattrs
from lsprotocol import types
from pygls.exceptions import (
    FeatureRequestError,
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    LanguageServerProtocol,
    default_converter,
)

from .. import __version__
from . import protocol
from .service import MemoryService

log = logging.getLogger("memory_ls")

_LEVELS = {
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
}
_LSP_TYPES = [
    (logging.ERROR, types.MessageType.Error),
    (logging.WARNING, types.MessageType.Warning),
    (logging.INFO, types.MessageType.Info),
    (0, types.MessageType.Log),
]


def _converter() -> cattrs.Converter:
    """pygls' converter, but custom requests keep their params as plain JSON objects.

    (The default turns them into namedtuples, which cannot hold a field named ``from``.)"""
    conv = default_converter()

    def keep(obj: dict[str, Any], cls: type) -> Any:
        obj.setdefault("params", None)
        return cls(**obj)

    conv.register_structure_hook(JsonRPCRequestMessage, keep)
    conv.register_structure_hook(JsonRPCNotification, keep)
    return conv


def _describe(exc: BaseException | None) -> str:
    if isinstance(exc, cattrs.ClassValidationError):
        with contextlib.suppress(Exception):
            return "; ".join(cattrs.transform_error(exc))
    return str(exc) if exc else "malformed"


# Stands for a request that was already answered with an error while being parsed.
_ANSWERED = JsonRPCNotification(method="$/memory-ls/answered", jsonrpc="2.0", params=None)


class MemoryProtocol(LanguageServerProtocol):
    """pygls drops a request whose params do not parse (no response at all: the client waits
    forever). Answer it with InvalidParams naming the field instead."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if not (isinstance(data, dict) and "id" in data and "method" in data):
                raise
            err = JsonRpcInvalidParams(
                message=f"{data['method']}: invalid params: {_describe(exc.__cause__)}"
            )
            self._send_response(data["id"], None, err.to_response_error())
            return _ANSWERED

    def handle_message(self, message: Any) -> None:
        if message is not _ANSWERED:
            super().handle_message(message)


class LspLogHandler(logging.Handler):
    """Forwards ``memory_ls`` log records to the client as ``window/logMessage``, from any
    thread (the record is handed to the event loop)."""

    def __init__(self, server: MemoryLanguageServer, loop: asyncio.AbstractEventLoop):
        super().__init__()
        self.server = server
        self.loop = loop
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind = next(t for lv, t in _LSP_TYPES if record.levelno >= lv)
            params = types.LogMessageParams(type=kind, message=self.format(record))
            if not self.loop.is_closed():
                self.loop.call_soon_threadsafe(self._send, params)
        except Exception:  # logging must never raise
            self.handleError(record)

    def _send(self, params: types.LogMessageParams) -> None:
        with contextlib.suppress(Exception):  # the client is gone
            self.server.window_log_message(params)


class MemoryLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "memory-ls",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=MemoryProtocol,
            converter_factory=_converter,
        )
        self.service: MemoryService | None = None
        self.log_handler: LspLogHandler | None = None
        self._last_error_shown = 0.0

    def svc(self) -> MemoryService:
        if self.service is None:
            raise JsonRpcServerNotInitialized(message="the server is not initialized")
        return self.service

    def setup_logging(self, level: str) -> None:
        logger = logging.getLogger("memory_ls")
        if self.log_handler is None:
            self.log_handler = LspLogHandler(self, asyncio.get_running_loop())
            logger.addHandler(self.log_handler)
        lv = _LEVELS.get(level, logging.INFO)
        self.log_handler.setLevel(lv)
        # Lower than the client's level when the CLI asked for -v: stderr gets the details.
        logger.setLevel(min(lv, logging.getLogger().getEffectiveLevel()))

    def report_server_error(self, error: Exception, source: Any) -> None:
        # A failed request already carries its error; for anything else, log always but
        # pop up at most one message a minute: a broken handler must not flood the editor.
        if source is FeatureRequestError:
            return
        log.error("internal error (%s): %s", getattr(source, "__name__", source), error)
        now = time.monotonic()
        if now - self._last_error_shown > 60:
            self._last_error_shown = now
            with contextlib.suppress(Exception):  # reporting is best effort
                self.window_show_message(
                    types.ShowMessageParams(
                        type=types.MessageType.Error,
                        message=f"memory-ls: internal error: {error} (details in the log)",
                    )
                )

    def shutdown(self) -> None:
        # Reached on exit with or without a prior `shutdown` request.
        if self.service is not None:
            self.service.close_now()
            self.service = None
        if self.log_handler is not None:
            logging.getLogger("memory_ls").removeHandler(self.log_handler)
        super().shutdown()


def build_server() -> MemoryLanguageServer:
    server = MemoryLanguageServer()

    # -- lifecycle --------------------------------------------------------------------------
    @server.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        service = server.service = MemoryService(server, params.initialization_options)
        server.setup_logging(str(service.init_overrides.get("logLevel", "info")))
        service.add_initial_folders(params.workspace_folders, params.root_uri)

    @server.feature(types.INITIALIZED)
    async def initialized(params: types.InitializedParams) -> None:
        await server.svc().start()

    @server.feature(types.SHUTDOWN)
    async def shutdown(params: None) -> None:
        if server.service is not None:
            await server.service.shutdown()

    @server.feature(types.EXIT)
    def exit_(params: None) -> None:
        # Over TCP, pygls would keep listening after `exit`: stop accepting connections.
        if server._server is not None:
            server._server.close()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        await server.svc().configuration_changed(params.settings)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_folders(params: types.DidChangeWorkspaceFoldersParams) -> None:
        await server.svc().folders_changed(params.event.added, params.event.removed)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(params: types.DidChangeWatchedFilesParams) -> None:
        server.svc().watched_files_changed(params.changes)

    # -- document sync (pygls has already applied the change to its copy) -------------------
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        server.svc().did_open(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        server.svc().did_change(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=True))
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        server.svc().did_save(params.text_document.uri, params.text)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        server.svc().did_close(params.text_document.uri)

    # -- custom requests --------------------------------------------------------------------
    @server.feature(protocol.SEARCH)
    async def memory_search(params: Any) -> dict[str, Any]:
        return await server.svc().search(protocol.parse_search(params), protocol.SEARCH)

    @server.feature(protocol.GET)
    async def memory_get(params: Any) -> dict[str, Any]:
        return await server.svc().get(protocol.parse_get(params), protocol.GET)

    @server.feature(protocol.STATUS)
    async def memory_status(params: Any) -> dict[str, Any]:
        return await server.svc().status(protocol.parse_status(params), protocol.STATUS)

    # -- commands (arguments stay raw JSON: *args) -----------------------------------------
    @server.command(protocol.CMD_REINDEX)
    async def cmd_reindex(*args: Any) -> Any:
        p = protocol.parse_sync(args, protocol.CMD_REINDEX)
        return await server.svc().sync_command(p.force, p.folder, protocol.CMD_REINDEX)

    @server.command(protocol.CMD_SYNC)
    async def cmd_sync(*args: Any) -> Any:
        p = protocol.parse_sync(args, protocol.CMD_SYNC)
        return await server.svc().sync_command(False, p.folder, protocol.CMD_SYNC)

    @server.command(protocol.CMD_STATUS)
    async def cmd_status(*args: Any) -> Any:
        folder = protocol.parse_status(args[0] if args else None, protocol.CMD_STATUS)
        return await server.svc().status(folder, protocol.CMD_STATUS)

    @server.command(protocol.CMD_SAVE_SESSION)
    async def cmd_save_session(*args: Any) -> Any:
        return await server.svc().save_session(protocol.parse_save_session(args))

    # -- standard requests ------------------------------------------------------------------
    @server.feature(types.WORKSPACE_SYMBOL)
    async def workspace_symbol(params: types.WorkspaceSymbolParams) -> list[types.WorkspaceSymbol]:
        return await server.svc().workspace_symbols(params.query)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    async def definition(params: types.DefinitionParams) -> list[types.Location] | None:
        return await server.svc().definition(params.text_document.uri, params.position)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(params: types.HoverParams) -> types.Hover | None:
        return await server.svc().hover(params.text_document.uri, params.position)

    @server.feature(
        types.TEXT_DOCUMENT_DOCUMENT_LINK, types.DocumentLinkOptions(resolve_provider=False)
    )
    async def document_link(params: types.DocumentLinkParams) -> list[types.DocumentLink]:
        return await server.svc().document_links(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def document_symbol(params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        return server.svc().document_symbols(params.text_document.uri)

    return server


def run_server(tcp: str | None = None) -> int:
    # Syncs and embedding batches are CPU-bound Python in worker threads; a shorter GIL
    # switch interval (default 5 ms) lets the event loop and searches in between.
    sys.setswitchinterval(0.001)
    server = build_server()
    if tcp:
        host, _, port = tcp.rpartition(":")
        if not port.isdigit():
            raise SystemExit(f"memory-ls: --tcp expects HOST:PORT, got {tcp!r}")
        server.start_tcp(host or "127.0.0.1", int(port))
        server.shutdown()  # pygls skips it when `exit` ends the connection
    else:
        server.start_io()
    # The LSP exit code: 0 after `shutdown`, 1 otherwise (pygls swallows its SystemExit).
    return 0 if server.protocol._shutdown else 1
