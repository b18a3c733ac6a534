"""What the user is told in a popup (``window/showMessage``): settings problems, an index that
cannot open, and degradations (no model, a provider fallback, no sqlite-vec), each said once
per server, not on every request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from .folder import Folder, FolderUnavailable

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer


class Messages:
    def __init__(self, ls: LanguageServer):
        self.ls = ls
        self.shown: set[str] = set()

    def show_once(self, message: str, kind: types.MessageType) -> None:
        if message in self.shown:
            return
        self.shown.add(message)
        self.ls.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def folder_opened(self, folder: Folder) -> None:
        """The folder's settings problems, or why its index could not be opened."""
        if folder.problems:
            self.show_once(
                f"memory-ls: settings of {folder.name}: " + "; ".join(folder.problems),
                types.MessageType.Warning,
            )
        if folder.error:
            self.show_once(f"memory-ls: {folder.error}", types.MessageType.Error)

    async def degradations(self, folder: Folder) -> None:
        """No model, a fallback, no sqlite-vec."""
        try:
            async with folder.use() as engine:
                st = await folder.read(engine.status)
        except FolderUnavailable:
            return
        if st.get("provider") is None:
            if folder.settings.provider != "none" and st.get("providerReason"):
                self.show_once(
                    f"memory-ls: keyword-only search: {st['providerReason']}",
                    types.MessageType.Info,
                )
        elif st.get("sqliteVec") not in (None, "loaded"):
            self.show_once(f"memory-ls: {st['sqliteVec']}", types.MessageType.Info)
        if st.get("fallbackReason"):
            self.show_once(f"memory-ls: {st['fallbackReason']}", types.MessageType.Warning)

    def embedding_degraded(self, folder: Folder) -> None:
        """After each embedding run: cheap (an attribute), so it can run after every edit."""
        reason = folder.engine.fallback_reason if folder.engine is not None else None
        if reason:
            self.show_once(f"memory-ls: {reason}", types.MessageType.Warning)
