"""The language server: pygls wiring only. Handlers parse (``memory_ls.params``), delegate to
the service's parts (service.py) and map their errors to LSP errors (here, in one place);
engine work never runs on the event loop.

Run with ``memory-ls serve`` (stdio) or ``memory-ls serve --tcp HOST:PORT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, cast

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

from .. import __version__, params
from ..methods import METHODS, Method
from ..params import ParamError
from . import fixes, protocol, pull
from .documents import buffer_text
from .lanes import Supersede
from .lifeline import Lifeline
from .service import MemoryService
from .stdio import serve_stdio
from .text_document import use_fast_documents

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
# A request whose params did not parse, turned into one of ours that answers InvalidParams.
UNPARSED = "$/memory-ls/unparsedRequest"


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


@contextlib.contextmanager
def lsp_errors(method: str) -> Iterator[None]:
    """The one place our errors become LSP errors: InvalidParams naming method and field."""
    try:
        yield
    except ParamError as exc:
        raise JsonRpcInvalidParams(message=f"{method}: {exc}") from None


class MemoryProtocol(LanguageServerProtocol):
    """pygls drops a request whose params do not parse (no response at all: the client waits
    forever). Hand it to the ``UNPARSED`` handler instead, which answers InvalidParams naming
    the field.

    Once the client is gone (``drop_requests``), nothing is handled or sent any more."""

    closed = False

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if not (isinstance(data, dict) and "id" in data and "method" in data):
                raise
            return JsonRPCRequestMessage(
                id=data["id"],
                method=UNPARSED,
                jsonrpc="2.0",
                params=f"{data['method']}: invalid params: {_describe(exc.__cause__)}",
            )

    def handle_message(self, message: Any) -> None:
        if not self.closed:
            super().handle_message(message)

    def _send_data(self, data: Any) -> None:
        # Before serializing: thousands of cancelled requests answer as the loop winds down.
        if not self.closed:
            super()._send_data(data)

    def drop_requests(self) -> int:
        """Send nothing more and cancel every request still pending (queued or running: their
        answers would go nowhere); how many there were."""
        self.closed = True
        pending = [f for f in self._request_futures.values() if not f.done()]
        for future in pending:
            future.cancel()
        return len(pending)


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
        self.shutdown_requested = False  # the LSP exit code: 0 only after `shutdown`
        self.lifeline: Lifeline | None = None  # set by the transport, or at `initialize`
        self.client_gone = False
        self.searches = Supersede()  # one client per server: its searches take turns
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

    def watch_client(self, process_id: int | None) -> None:
        """Exit when the client's process is gone (``processId`` of ``initialize``)."""
        if self.lifeline is None:  # over TCP: no transport made one
            self.lifeline = Lifeline(asyncio.get_running_loop(), self.client_lost)
        self.lifeline.watch(process_id)

    def client_lost(self, why: str, unread: int = 0) -> None:
        """The client is gone (``why``): answer nothing more, drop every pending request and
        end the message loop, with one log line (``unread``: messages the transport dropped)."""
        if self.client_gone:
            return
        self.client_gone = True
        dropped = cast(MemoryProtocol, self.protocol).drop_requests()
        level = logging.INFO if self.shutdown_requested else logging.WARNING
        log.log(
            level,
            "the client is gone (%s): exiting; %d request(s) dropped, %d message(s) unread",
            why,
            dropped,
            unread,
        )
        if self._stop_event is not None:
            self._stop_event.set()
        writer = self.protocol.writer
        if isinstance(writer, asyncio.StreamWriter):
            # Over TCP: the connection's message loop ends at the end of its input, and pygls
            # stops the server then (stopping it first cancels that loop mid-read: a traceback).
            writer.close()

    def shutdown(self) -> None:
        # Reached on exit with or without a prior `shutdown` request.
        if self.service is not None:
            self.service.close_now()
            self.service = None
        if self.log_handler is not None:
            logging.getLogger("memory_ls").removeHandler(self.log_handler)
        super().shutdown()


def _request(server: MemoryLanguageServer, m: Method) -> None:
    """Register a declared custom request (methods.py): its params parsed into its type (bad
    params are answered at once, never queued), then its handler on ``Requests``."""

    @server.feature(m.lsp)
    async def handler(raw: Any) -> Any:
        with lsp_errors(m.lsp):
            p: Any = params.parse(m.params, raw)
            answer = getattr(server.svc().requests, m.handler)
            if not m.latest_wins:
                return await answer(p)
            async with server.searches.turn():
                return await answer(p)


def _command(
    server: MemoryLanguageServer, name: str
) -> Callable[[Callable[[tuple[Any, ...]], Awaitable[Any]]], None]:
    """Register a command handler ``fn(arguments)`` (the arguments stay raw JSON)."""

    def register(fn: Callable[[tuple[Any, ...]], Awaitable[Any]]) -> None:
        @server.command(name)
        async def handler(*args: Any) -> Any:
            with lsp_errors(name):
                return await fn(args)

    return register


def build_server() -> MemoryLanguageServer:
    server = MemoryLanguageServer()

    # -- lifecycle --------------------------------------------------------------------------
    @server.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        server.watch_client(params.process_id)
        use_fast_documents(server.workspace)
        service = server.service = MemoryService(server, params.initialization_options)
        server.setup_logging(str(service.config.init_overrides.get("logLevel", "info")))
        service.add_initial_folders(params.workspace_folders, params.root_uri)
        pull.register(server, lambda: server.svc().documents.pull)  # declared when it pulls
        if service.documents.pull is not None:
            log.info("diagnostics: pulled by the client (workspace/diagnostic), not published")

    @server.feature(types.INITIALIZED)
    async def initialized(params: types.InitializedParams) -> None:
        await server.svc().start()

    @server.feature(types.SHUTDOWN)
    async def shutdown(params: None) -> None:
        server.shutdown_requested = True
        if server.service is not None:
            await server.service.shutdown()

    @server.feature(types.EXIT)
    def exit_(params: None) -> None:
        # Over TCP, pygls would keep listening after `exit`: stop accepting connections.
        server.shutdown()

    @server.feature(UNPARSED)
    def unparsed(message: str) -> None:
        raise JsonRpcInvalidParams(message=message)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        await server.svc().configuration_changed(params.settings)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_folders(params: types.DidChangeWorkspaceFoldersParams) -> None:
        await server.svc().folders_changed(params.event.added, params.event.removed)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(params: types.DidChangeWatchedFilesParams) -> None:
        server.svc().documents.watched_files_changed(params.changes)

    # -- document sync (pygls has already applied the change to its copy) -------------------
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        server.svc().documents.did_open(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        server.svc().documents.did_change(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=True))
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        server.svc().documents.did_save(params.text_document.uri, params.text)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        server.svc().documents.did_close(params.text_document.uri)

    # -- custom requests and commands -------------------------------------------------------
    for method in METHODS:
        _request(server, method)

    @_command(server, protocol.CMD_REINDEX)
    async def cmd_reindex(args: tuple[Any, ...]) -> dict[str, Any]:
        p = params.parse_sync(args)
        return await server.svc().requests.sync_command(p.force, p.folder)

    @_command(server, protocol.CMD_SYNC)
    async def cmd_sync(args: tuple[Any, ...]) -> dict[str, Any]:
        return await server.svc().requests.sync_command(False, params.parse_sync(args).folder)

    @_command(server, protocol.CMD_STATUS)
    async def cmd_status(args: tuple[Any, ...]) -> dict[str, Any]:
        return await server.svc().requests.status(params.parse_status(args[0] if args else None))

    @_command(server, protocol.CMD_SAVE_SESSION)
    async def cmd_save_session(args: tuple[Any, ...]) -> dict[str, Any]:
        return await server.svc().requests.save_session(params.parse_save_session(args))

    @_command(server, protocol.CMD_OPEN)
    async def cmd_open(args: tuple[Any, ...]) -> bool:
        return await server.svc().open_location(args)

    # -- standard requests ------------------------------------------------------------------
    @server.feature(types.WORKSPACE_SYMBOL)
    async def workspace_symbol(params: types.WorkspaceSymbolParams) -> list[types.WorkspaceSymbol]:
        return await server.svc().requests.workspace_symbols(params.query)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    async def definition(params: types.DefinitionParams) -> list[types.Location] | None:
        return await server.svc().citations.definition(params.text_document.uri, params.position)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(params: types.HoverParams) -> types.Hover | None:
        return await server.svc().citations.hover(params.text_document.uri, params.position)

    @server.feature(
        types.TEXT_DOCUMENT_DOCUMENT_LINK, types.DocumentLinkOptions(resolve_provider=False)
    )
    async def document_link(params: types.DocumentLinkParams) -> list[types.DocumentLink]:
        return await server.svc().citations.links(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbol(params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        return await server.svc().documents.symbols(params.text_document.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, fixes.ADD_EXPIRES]
        ),
    )
    async def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
        health = server.svc().health
        if not fixes.wanted(params):
            return []
        text = buffer_text(server, params.text_document.uri)
        caps = server.client_capabilities
        # Off the loop: the edits need the document's lines (megabytes take milliseconds).
        return await asyncio.to_thread(health.code_actions, params, text, caps)

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
        serve_stdio(server)
    # The LSP exit code: 0 after `shutdown`, 1 otherwise (pygls swallows its SystemExit).
    return 0 if server.shutdown_requested else 1
