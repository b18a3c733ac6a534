"""The workspace folders: which folder a URI or a path belongs to, and each folder's settings.

``Folders`` is the registry and the routing; it knows nothing of LSP, so the citation module
(and its tests) use it without a server. ``Configuration`` loads a folder's settings (defaults,
config files, ``initializationOptions``, then the client's ``workspace/configuration`` section
``memory``) and keeps the client's part up to date.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.uris import to_fs_path

from ..params import ParamError
from ..settings import Settings
from ..settings import load as load_settings
from .folder import Folder

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

SECTION = "memory"  # the settings section clients send and answer for
CONFIG_REGISTRATION = "memory-ls-config"
CLIENT_TIMEOUT_S = 5  # a client request (configuration, registration) that takes longer failed
URI_CACHE_SIZE = 10_000


def settings_section(data: Any, where: str) -> tuple[dict[str, Any] | None, list[str]]:
    """Our settings from initializationOptions / didChangeConfiguration / a
    ``workspace/configuration`` answer: either the ``memory`` section of a larger object or the
    section itself, with the problem of anything else; None when there is none (null is no
    settings, not a problem)."""
    if data is None:
        return None, []
    inner = data.get(SECTION) if isinstance(data, dict) else data
    if isinstance(inner, dict):
        return inner, []
    if isinstance(data, dict) and SECTION not in data:
        return data, []
    if inner is None:
        return None, []
    name = f"{where}: {SECTION}" if inner is not data else where
    return None, [f"{name}: expected an object of settings, got {type(inner).__name__}; ignored"]


class Folders:
    """The open workspace folders by URI, in the order they were added."""

    def __init__(self) -> None:
        self._by_uri: dict[str, Folder] = {}
        self._uri_cache: dict[str, tuple[Folder, str] | None] = {}

    def __iter__(self) -> Iterator[Folder]:
        return iter(list(self._by_uri.values()))

    def __len__(self) -> int:
        return len(self._by_uri)

    def __contains__(self, uri: str) -> bool:
        return uri in self._by_uri

    def add(self, folder: Folder) -> None:
        self._by_uri[folder.uri] = folder
        self._uri_cache.clear()

    def pop(self, uri: str) -> Folder | None:
        self._uri_cache.clear()
        return self._by_uri.pop(uri, None)

    def clear(self) -> list[Folder]:
        folders = list(self._by_uri.values())
        self._by_uri.clear()
        self._uri_cache.clear()
        return folders

    def first(self) -> Folder | None:
        return next(iter(self._by_uri.values()), None)

    def locate(self, uri: str) -> tuple[Folder, str] | None:
        """(folder, index key: workspace-relative path, or sessions:<root>/... for a transcript
        under sessions.roots) of a file URI, innermost folder first."""
        if uri in self._uri_cache:
            return self._uri_cache[uri]
        fs = to_fs_path(uri) if uri.startswith("file:") else None
        found = self.locate_path(Path(fs)) if fs else None
        if len(self._uri_cache) > URI_CACHE_SIZE:
            self._uri_cache.clear()
        self._uri_cache[uri] = found
        return found

    def locate_path(self, path: Path) -> tuple[Folder, str] | None:
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError, ValueError):  # a NUL byte (file:///a%00.md): no file
            return None
        for p in (path, resolved):
            best: tuple[Folder, str] | None = None
            for folder in self._by_uri.values():
                try:
                    rel = p.relative_to(folder.root).as_posix()
                except ValueError:
                    continue
                if best is None or len(folder.root.parts) > len(best[0].root.parts):
                    best = (folder, rel)
            if best:
                return best
        for folder in self._by_uri.values():  # a transcript under one folder's sessions.roots
            key = folder.workspace.key_of(path)
            if key is not None:
                return folder, key
        return None

    def select(self, ref: str | None) -> list[Folder]:
        """Every folder, or the one ``ref`` names (its URI or its path)."""
        folders = list(self._by_uri.values())
        if ref is None:
            return folders
        for f in folders:
            if ref in (f.uri, str(f.root)) or ref.rstrip("/") == f.uri.rstrip("/"):
                return [f]
        raise ParamError("folder", f"not a workspace folder: {ref!r}")

    def home_first(self, home: Folder | None) -> list[Folder]:
        """Every folder, ``home`` first (where a document's citations are looked up)."""
        return ([home] if home else []) + [f for f in self._by_uri.values() if f is not home]


class Configuration:
    """Each folder's settings: the files, then what the client says for the folder (pulled
    with ``workspace/configuration``, or pushed with ``didChangeConfiguration`` by clients
    that cannot be asked), else its initializationOptions.

    The client's section replaces initializationOptions rather than adding to them: VS Code
    and the Neovim plugin send the same settings both ways, and stacked, a setting once sent
    at start could never be reset in the editor (removing ``maxResults: 1`` kept it)."""

    def __init__(self, ls: LanguageServer, init_options: Any):
        self.ls = ls
        init, self.init_problems = settings_section(init_options, "initializationOptions")
        self.init_overrides: dict[str, Any] = init or {}
        # folder URI -> its section; None: the client had none for it (initializationOptions)
        self.client_config: dict[str, dict[str, Any] | None] = {}
        self.client_problems: dict[str, list[str]] = {}  # folder URI -> its section's shape

    def _client_can(self, capability: str) -> bool:
        return bool(get_capability(self.ls.client_capabilities, capability, False))

    def settings_for(self, uri: str, root: Path) -> tuple[Settings, list[str]]:
        client = self.client_config.get(uri)
        if client is None:
            settings, problems = load_settings(root, self.init_overrides)
            return settings, self.init_problems + self.client_problems.get(uri, []) + problems
        settings, problems = load_settings(root, client)
        return settings, self.client_problems.get(uri, []) + problems

    async def pull(self, folders: Sequence[Folder]) -> None:
        """Ask the client for the ``memory`` section of each folder (if it can be asked)."""
        if not folders or not self._client_can("workspace.configuration"):
            return
        items = [types.ConfigurationItem(scope_uri=f.uri, section=SECTION) for f in folders]
        try:
            result = await asyncio.wait_for(
                self.ls.workspace_configuration_async(types.ConfigurationParams(items=items)),
                CLIENT_TIMEOUT_S,
            )
        except Exception as exc:  # a client that claims support but fails: keep going
            log.warning("workspace/configuration failed: %s", exc)
            return
        for folder, value in zip(folders, result or [], strict=False):
            self.client_config[folder.uri], self.client_problems[folder.uri] = settings_section(
                value, "workspace/configuration"
            )

    async def changed(self, settings: Any, folders: Sequence[Folder]) -> None:
        """``workspace/didChangeConfiguration``: pull the new settings, or take the pushed ones."""
        if self._client_can("workspace.configuration"):
            await self.pull(folders)
            return
        section, problems = settings_section(settings, "didChangeConfiguration")
        for folder in folders:
            self.client_config[folder.uri], self.client_problems[folder.uri] = section, problems

    async def register(self) -> None:
        """Ask for ``didChangeConfiguration`` (clients that register it dynamically send it
        only then)."""
        if not self._client_can("workspace.did_change_configuration.dynamic_registration"):
            return
        reg = types.Registration(
            id=CONFIG_REGISTRATION,
            method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
            register_options=types.DidChangeConfigurationRegistrationOptions(section=SECTION),
        )
        try:
            await asyncio.wait_for(
                self.ls.client_register_capability_async(
                    types.RegistrationParams(registrations=[reg])
                ),
                CLIENT_TIMEOUT_S,
            )
        except Exception as exc:
            log.info("client refused didChangeConfiguration registration: %s", exc)
