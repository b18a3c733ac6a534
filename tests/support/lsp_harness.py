"""The language-server harness: the real ``python -m memory_ls serve`` over stdio, driven by
pytest-lsp's client (the ``start`` fixture), a small workspace and the request helpers."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio
from lsprotocol import types
from pygls.protocol import JsonRPCRequestMessage, JsonRPCResponseMessage, default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import register_lsp_features

API_KEYS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "VOYAGE_API_KEY", "MISTRAL_API_KEY")


# -- harness --------------------------------------------------------------------------------
def _raw_converter():
    """The test client keeps custom results as plain JSON (pygls makes namedtuples)."""
    conv = default_converter()

    def keep(obj: dict[str, Any], cls: type) -> Any:
        obj.setdefault("result", None)
        return cls(**obj)

    conv.register_structure_hook(JsonRPCResponseMessage, keep)
    return conv


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=_raw_converter)
    register_lsp_features(client)
    client.registrations = []  # type: ignore[attr-defined]

    client.config_on_register = False  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)  # type: ignore[attr-defined]
        if client.config_on_register and any(  # type: ignore[attr-defined]
            r.method == types.WORKSPACE_DID_CHANGE_CONFIGURATION for r in params.registrations
        ):
            # As vscode-languageclient does: the section's settings at once, after the answer.
            asyncio.get_running_loop().call_soon(
                client.workspace_did_change_configuration,
                types.DidChangeConfigurationParams(settings=None),
            )

    @client.feature(types.CLIENT_UNREGISTER_CAPABILITY)
    def unregister(params: types.UnregistrationParams) -> None:
        return None

    return client


def capabilities(
    *, watch: bool = True, config: bool = True, progress: bool = True
) -> types.ClientCapabilities:
    return types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            configuration=config,
            workspace_folders=True,
            did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(
                dynamic_registration=watch, relative_pattern_support=True
            )
            if watch
            else None,
            symbol=types.WorkspaceSymbolClientCapabilities(),
            execute_command=types.ExecuteCommandClientCapabilities(),
        ),
        text_document=types.TextDocumentClientCapabilities(
            synchronization=types.TextDocumentSyncClientCapabilities(did_save=True),
            hover=types.HoverClientCapabilities(
                content_format=[types.MarkupKind.Markdown, types.MarkupKind.PlainText]
            ),
            definition=types.DefinitionClientCapabilities(),
            document_link=types.DocumentLinkClientCapabilities(tooltip_support=True),
            document_symbol=types.DocumentSymbolClientCapabilities(
                hierarchical_document_symbol_support=True
            ),
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(),
        ),
        window=types.WindowClientCapabilities(work_done_progress=progress),
    )


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def make_workspace(root: Path) -> Path:
    write(
        root,
        "MEMORY.md",
        "# Memory\n\nThe deploy key lives in the vault.\nPrefer pnpm over npm for this repo.\n",
    )
    write(
        root,
        "memory/2026-01-05.md",
        "# Standup\n\n## Decisions\n\nWe chose PostgreSQL "
        "for the ledger service.\nThe migration runs on Fridays.\n\n## Notes\n\n"
        "Alice owns the billing dashboard.\n",
    )
    write(
        root,
        "memory/projects/rate-limits.md",
        "# Rate limits\n\nThe gateway uses a token "
        "bucket with a burst of 200 requests.\nRetries back off from 500 ms to 8 s.\n",
    )
    write(root, "notes/README.md", "See memory/2026-01-05.md#L5-L6 and MEMORY.md#L3.\n")
    return root


def uri(p: Path) -> str:
    return p.resolve().as_uri()


Start = Callable[..., Awaitable[LanguageClient]]


@pytest_asyncio.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    clients: list[LanguageClient] = []

    async def _start(
        *folders: Path,
        init_options: Any = None,
        caps: types.ClientCapabilities | None = None,
        config: dict[str, Any] | None = None,
        wait: bool = True,
        config_on_register: bool = False,
    ) -> LanguageClient:
        env = {
            **os.environ,
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "PYTHONUNBUFFERED": "1",
        }
        for key in API_KEYS:
            env.pop(key, None)
        cfg = ClientServerConfig(
            server_command=[sys.executable, "-m", "memory_ls", "serve"],
            client_factory=make_client,
            server_env=env,
        )
        client = await cfg.start()
        clients.append(client)
        if config is not None:
            client.set_configuration(config)
        client.config_on_register = config_on_register  # type: ignore[attr-defined]
        await client.initialize_session(
            types.InitializeParams(
                capabilities=caps or capabilities(),
                workspace_folders=[types.WorkspaceFolder(uri=uri(f), name=f.name) for f in folders],
                initialization_options=init_options,
            )
        )
        if wait:
            await wait_idle(client)
        return client

    yield _start
    for client in clients:
        try:
            await asyncio.wait_for(client.shutdown_session(), 20)
        finally:
            await client.stop()


def change_folders(
    client: LanguageClient, added: dict[str, str], removed: dict[str, str] | None = None
) -> None:
    """didChangeWorkspaceFolders with these folders (URI -> name) added and removed."""
    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=u, name=n) for u, n in added.items()],
                removed=[types.WorkspaceFolder(uri=u, name=n) for u, n in (removed or {}).items()],
            )
        )
    )


async def request(client: LanguageClient, method: str, params: Any = None) -> Any:
    return await asyncio.wait_for(client.protocol.send_request_async(method, params), 30)


async def raw_request(client: LanguageClient, method: str, params: Any) -> Any:
    """A request sent as raw JSON, bypassing the client's typed params (to send bad ones)."""
    from concurrent.futures import Future

    msg_id = f"raw-{time.monotonic_ns()}"
    fut: Future[Any] = Future()
    client.protocol._request_futures[msg_id] = fut
    client.protocol._send_data(
        JsonRPCRequestMessage(id=msg_id, method=method, jsonrpc="2.0", params=params)
    )
    return await asyncio.wait_for(asyncio.wrap_future(fut), 30)


async def search(client: LanguageClient, query: str, **kw: Any) -> dict[str, Any]:
    return await request(client, "memory/search", {"query": query, **kw})


async def status(client: LanguageClient) -> dict[str, Any]:
    return await request(client, "memory/status", {})


async def wait_idle(client: LanguageClient, timeout: float = 30) -> dict[str, Any]:
    """Until every folder's first sync is done and nothing is pending (a folder whose index
    cannot be opened never syncs)."""
    deadline = time.monotonic() + timeout
    while True:
        st = await status(client)
        folders = st.get("folders", [])
        if folders and all(
            (f.get("lastSync") or f.get("error"))
            and not f.get("syncing")
            and not f.get("pendingEdits")
            for f in folders
        ):
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"server never idle: {st}")
        await asyncio.sleep(0.05)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 8) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


def paths(res: dict[str, Any]) -> list[str]:
    return [r["path"] for r in res["results"]]


def open_doc(
    client: LanguageClient,
    path: Path,
    text: str | None = None,
    version: int = 1,
    language: str = "markdown",
) -> str:
    u = uri(path)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=u,
                language_id=language,
                version=version,
                text=path.read_text() if text is None else text,
            )
        )
    )
    return u


def watched_patterns(client: LanguageClient) -> list[Any]:
    """The glob patterns the server registered with the client's file watcher."""
    regs = [r for r in client.registrations if r.method == "workspace/didChangeWatchedFiles"]
    return [w["globPattern"] for w in regs[0].register_options["watchers"]]


def file_created(client: LanguageClient, path: Path) -> None:
    """The client's file watcher reports ``path`` made."""
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri(path), type=types.FileChangeType.Created)]
        )
    )


async def definition_and_hover(
    client: LanguageClient, path: Path, line: int, needle: str, offset: int = 0
) -> tuple[Any, Any]:
    """Go to definition and hover in the open document ``path`` on ``line`` (0-based), ``offset``
    characters into the first ``needle`` on it."""
    td = types.TextDocumentIdentifier(uri=uri(path))
    text = path.read_text().split("\n")[line]
    pos = types.Position(line=line, character=text.index(needle) + offset)
    locs = await client.text_document_definition_async(
        types.DefinitionParams(text_document=td, position=pos)
    )
    hov = await client.text_document_hover_async(types.HoverParams(text_document=td, position=pos))
    return locs, hov


def replace_all(client: LanguageClient, u: str, old: str, new: str, version: int) -> None:
    """An incremental change replacing the whole of ``old`` with ``new``."""
    lines = old.split("\n")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=u, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=0, character=0),
                        end=types.Position(line=len(lines) - 1, character=len(lines[-1])),
                    ),
                    text=new,
                )
            ],
        )
    )
