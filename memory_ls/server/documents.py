"""Documents: open buffers go to their folder's index (debounced), their citations get
diagnostics, and files changed on disk (seen by the client or by our watcher) go to their
folder's sync. pygls keeps the buffer text; this module decides what to do with it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path

from ..chunking import lsp_lines
from . import convert, pull
from .citations import Citations
from .folder import Folder, FolderUnavailable
from .folders import Folders
from .text_document import learn_lines
from .watch import SETTINGS_FILE

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

DIAGNOSTICS_DELAY_MS = 300  # after an edit in a document outside every folder
REFRESH_DELAY_MS = 500  # other documents, after an edit or a sync that may fix their citations
NEW_FOLDER_RESYNC_S = 2.0  # a folder the client reports as made is synced again after this


def buffer_text(ls: LanguageServer, uri: str) -> str | None:
    """The text of an open document, None when it is not open."""
    doc = ls.workspace.text_documents.get(uri)
    return doc.source if doc is not None else None


def _heading_symbols(text: str, codec: Any) -> list[types.DocumentSymbol]:
    return convert.heading_symbols(lsp_lines(text), codec)


def _markdown(language_id: str | None, uri: str) -> bool:
    """A Markdown document: by its name, or by the client's language id. The name wins because
    clients name the language after their own mode: Emacs's eglot sends "text" or "gfm" for a
    note opened in text-mode or gfm-mode."""
    return uri.lower().endswith((".md", ".markdown")) or language_id == "markdown"


class Documents:
    def __init__(
        self,
        ls: LanguageServer,
        folders: Folders,
        citations: Citations,
        *,
        settings_changed: Callable[[Folder], None],
        spawn: Callable[[Any], asyncio.Future[Any]],
    ):
        self.ls = ls
        self.folders = folders
        self.citations = citations
        self._settings_changed = settings_changed  # a folder's .memory-ls.toml changed
        self._spawn = spawn
        self._diag_timers: dict[str, asyncio.TimerHandle] = {}
        self._published: set[str] = set()
        # What each URI's diagnostics are made of: its citations' (open documents) and the
        # memory checks' (every memory file, health.py); one publish sends both.
        self._cites: dict[str, list[types.Diagnostic]] = {}
        self._health: dict[str, list[types.Diagnostic]] = {}
        self._health_uri: dict[tuple[str, str], str] = {}  # (folder URI, path) -> URI used
        # A client that pulls diagnostics (pull.py) asks for them: nothing is published to it.
        self.pull = pull.Pull(ls, spawn) if pull.wanted(ls.client_capabilities) else None

    def _open_uris(self) -> list[str]:
        return list(self.ls.workspace.text_documents)

    def _memory(self, uri: str) -> tuple[Folder, str] | None:
        """(folder, relative path) of a document that is a memory file of its folder."""
        hit = self.folders.locate(uri)
        return hit if hit and hit[0].is_memory(hit[1]) else None

    # -- document sync (pygls has already applied the change to its copy) -------------------
    def did_open(self, uri: str) -> None:
        if doc := self.ls.workspace.text_documents.get(uri):
            self._spawn(learn_lines(doc))
        if hit := self._memory(uri):
            hit[0].doc_changed(uri, hit[1], delay_ms=0)
        self.schedule_diagnostics(uri, 0)

    def did_change(self, uri: str) -> None:
        hit = self.folders.locate(uri)
        delay = None
        if hit:
            delay = hit[0].settings.sync.edit_debounce_ms
            if hit[0].is_memory(hit[1]):
                hit[0].doc_changed(uri, hit[1])
        self.schedule_diagnostics(uri, delay)

    def did_save(self, uri: str, text: str | None) -> None:
        if hit := self._memory(uri):
            hit[0].doc_saved(uri, hit[1], text)

    def did_close(self, uri: str) -> None:
        if hit := self._memory(uri):
            hit[0].doc_closed(uri, hit[1])
        timer = self._diag_timers.pop(uri, None)
        if timer:
            timer.cancel()
        # A closed document keeps the memory checks' diagnostics, not its citations'.
        if self._cites.pop(uri, None) is not None or uri in self._published:
            self._send(uri, None)

    def reapply(self, folder: Folder) -> None:
        """A new engine starts without the open buffers: give them back before anything reads."""
        for uri in self._open_uris():
            hit = self._memory(uri)
            if hit and hit[0] is folder:
                folder.doc_changed(uri, hit[1], delay_ms=0)

    def folder_added(self, folder: Folder) -> None:
        """Documents opened before their folder joined the workspace."""
        for uri in self._open_uris():
            if (hit := self.folders.locate(uri)) and hit[0] is folder:
                self.did_open(uri)

    async def symbols(self, uri: str) -> list[types.DocumentSymbol]:
        doc = self.ls.workspace.text_documents.get(uri)
        if doc is None or not _markdown(doc.language_id, uri):
            return []  # a code file's "# comment" lines are no headings (citations work anywhere)
        text = buffer_text(self.ls, uri)
        if not text:
            return []
        # Off the event loop: 100,000 headings take seconds to turn into symbols.
        codec = self.ls.workspace.position_codec
        return await asyncio.to_thread(_heading_symbols, text, codec)

    # -- files changed outside the editor ---------------------------------------------------
    def watched_files_changed(self, changes: Sequence[types.FileEvent]) -> None:
        for change in changes:
            fs = to_fs_path(change.uri)
            if not fs:
                continue
            path = Path(fs)
            gone = change.type == types.FileChangeType.Deleted
            is_dir = not gone and path.is_dir()
            self.fs_changed(path, is_dir, gone=gone)
            if is_dir and change.type == types.FileChangeType.Created:
                # A note written into a folder the moment it is made (`mkdir -p` then a write,
                # as agents do) comes before the client watches the folder: no event for it.
                asyncio.get_running_loop().call_later(
                    NEW_FOLDER_RESYNC_S, self.fs_changed, path, True
                )

    def fs_changed(self, path: Path, is_dir: bool, gone: bool = False) -> None:
        """A file (or folder) changed on disk, seen by the client or by our watcher;
        ``gone``: deleted (then whether it was a folder cannot be asked any more)."""
        hit = self.folders.locate_path(path)
        if not hit:
            return
        folder, rel = hit
        if rel == SETTINGS_FILE:
            self._settings_changed(folder)
        elif is_dir:
            folder.spawn(folder.sync("watch"))
        elif folder.is_memory(rel):
            folder.files_changed([rel])
        elif gone:
            # A client reports a deleted folder by one event for the folder, none for the files
            # in it, which would stay in the index; an editor's scratch files (vim's `4913`,
            # `a.md~`) come and go on every save and hold nothing.
            folder.spawn(self._sync_if_held(folder, rel))

    async def _sync_if_held(self, folder: Folder, rel: str) -> None:
        try:
            async with folder.use() as engine:
                held = await folder.read(engine.holds_below, rel)
        except FolderUnavailable:
            return
        if held:
            await folder.sync("watch")

    # -- diagnostics ------------------------------------------------------------------------
    def schedule_diagnostics(self, uri: str, delay_ms: int | None) -> None:
        if uri.endswith(".jsonl"):
            return
        old = self._diag_timers.pop(uri, None)
        if old:
            old.cancel()
        delay = (delay_ms if delay_ms is not None else DIAGNOSTICS_DELAY_MS) / 1000
        self._diag_timers[uri] = asyncio.get_running_loop().call_later(
            delay, lambda: self._spawn(self.publish_diagnostics(uri))
        )

    def refresh_diagnostics(self, folder: Folder, exclude: str | None = None) -> None:
        """An indexed edit or a sync may fix or break citations in other open documents."""
        for uri in self._open_uris():
            if uri != exclude and (uri in self._cites or "#L" in (buffer_text(self.ls, uri) or "")):
                self.schedule_diagnostics(uri, REFRESH_DELAY_MS)

    async def publish_diagnostics(self, uri: str) -> None:
        self._diag_timers.pop(uri, None)
        doc = self.ls.workspace.text_documents.get(uri)
        if doc is None:
            return
        version = doc.version
        diags = await self.citations.diagnostics(uri, doc.source)
        cur = self.ls.workspace.text_documents.get(uri)
        if cur is None or cur.version != version:
            return  # edited meanwhile: a newer run is scheduled
        if diags:
            self._cites[uri] = diags
        else:
            self._cites.pop(uri, None)
        self._send(uri, version)

    def set_health(self, folder: Folder, rel: str, file_uri: str, diags: list[Any]) -> None:
        """The memory checks' diagnostics of a file (``health.py``), under the URI the client
        opened it by when it is open (merged with its citations'), else ``file_uri``."""
        key = (folder.uri, rel)
        uri = next(
            (u for u in self._open_uris() if self.folders.locate(u) == (folder, rel)),
            self._health_uri.get(key, file_uri),
        )
        old = self._health_uri.get(key)
        if old is not None and old != uri and self._health.pop(old, None) is not None:
            self._send(old, None)  # opened (or closed) under another spelling of its URI
        if diags:
            self._health[uri], self._health_uri[key] = diags, uri
        else:
            self._health.pop(uri, None)
            self._health_uri.pop(key, None)
        self._send(uri, None)

    def _send(self, uri: str, version: int | None) -> None:
        """Publish a URI's diagnostics (citations and memory checks), an empty list once
        when the last of them went away; to a client that pulls, hand them to ``pull``."""
        diags = self._cites.get(uri, []) + self._health.get(uri, [])
        if self.pull is not None:
            self.pull.set(uri, diags)
            return
        if not diags and uri not in self._published:
            return
        self.ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version)
        )
        if diags:
            self._published.add(uri)
        else:
            self._published.discard(uri)

    def cancel(self) -> None:
        for t in self._diag_timers.values():
            t.cancel()
        self._diag_timers.clear()
        if self.pull is not None:
            self.pull.cancel()
