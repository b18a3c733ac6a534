"""The memory checks in the editor: every memory file's findings (``hygiene/``) published as
diagnostics, open or not, and their code actions.

After a sync, an indexed edit or an embedding pass, a folder's check runs on the read pool
(never on the event loop), debounced and one at a time per folder: the engine's ``Checker``
re-reads only the files whose content changed, and the findings are compared, file by file,
with what was published, so only the files whose findings changed get a
``textDocument/publishDiagnostics`` (an empty one when they went away). ``Documents`` merges
them with the citation diagnostics of open documents.

Code actions (``textDocument/codeAction``) for a diagnostic of ours: open the other copy (the
``memory.open`` command: ``window/showDocument``), remove this copy, replace it with a citation
of the original (both a ``WorkspaceEdit`` the user applies: memory-ls never writes a memory
file itself); the other edits (supersede, move past a load cap, expires) are in ``fixes.py``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import from_fs_path
from pygls.workspace.position_codec import PositionCodec

from ..chunking import lsp_lines
from ..engine import MemoryEngine
from ..hygiene import CODES, Finding
from ..hygiene.findings import DUPLICATE
from ..workspace import Workspace
from . import fixes, protocol
from .folder import Folder, FolderUnavailable
from .folders import Folders

if TYPE_CHECKING:
    from .documents import Documents

log = logging.getLogger(__name__)

DELAY_MS = 250  # after a sync or an indexed edit: a burst of them is one check
SOURCE = "memory-ls"
SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}
_LIST = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?|^\s*")

Units = Callable[[str], int]
Published = dict[str, list[Finding]]  # a folder's files (workspace-relative) -> findings


def file_uri(ws: Workspace, rel: str) -> str:
    """A file's URI by its key: under the workspace, or under a root outside it (``memory:``,
    ``sessions:`` keys are no paths below the workspace)."""
    path = ws.outside_file(rel) or ws.root / rel
    return from_fs_path(str(path)) or path.as_uri()


def diagnostic(
    f: Finding, ws: Workspace, lines: list[str], codec: PositionCodec
) -> types.Diagnostic:
    end = f.end_line - 1
    width = codec.client_num_units(lines[end]) if end < len(lines) else 0
    related = [
        types.DiagnosticRelatedInformation(
            location=types.Location(
                uri=file_uri(ws, r.path), range=_lines_range(r.start_line, r.end_line)
            ),
            message="the earlier copy" if f.code == DUPLICATE else r.citation,
        )
        for r in f.related
    ]
    data = {"related": [r.to_json() | {"uri": file_uri(ws, r.path)} for r in f.related]}
    return types.Diagnostic(
        range=types.Range(
            start=types.Position(line=f.start_line - 1, character=0),
            end=types.Position(line=end, character=width),
        ),
        message=f.message,
        severity=SEVERITY.get(f.severity, types.DiagnosticSeverity.Warning),
        code=f.code,
        source=SOURCE,
        related_information=related or None,
        data=data,
    )


def _lines_range(first: int, last: int) -> types.Range:
    return types.Range(
        start=types.Position(line=first - 1, character=0),
        end=types.Position(line=last, character=0),
    )


def diagnose(
    engine: MemoryEngine, root: Path, old: Published, vectors: bool, codec: PositionCodec
) -> tuple[Published, dict[str, list[types.Diagnostic]]]:
    """(worker thread) The folder's findings by file, and the diagnostics of each file whose
    findings are not those of ``old`` (an empty list: none left). Past
    ``hygiene.editorMaxFiles`` files, none: the check would hold the interpreter too long."""
    limit = engine.settings.hygiene.editor_max_files
    files = engine.indexed_files() if limit else 0
    if not limit or files > limit:
        if limit and not old:
            why = "no diagnostics of the memory checks here; `memory-ls check` runs them"
            log.info("%s: %d files, over hygiene.editorMaxFiles (%d): %s", root, files, limit, why)
        return {}, {path: [] for path in old}
    found = engine.check(vectors=vectors)
    by: Published = {}
    for f in found:
        by.setdefault(f.path, []).append(f)
    out: dict[str, list[types.Diagnostic]] = {}
    for path in set(old) | set(by):
        mine = by.get(path, [])
        if old.get(path, []) == mine:
            continue
        lines = engine.checker.lines_of(path) or []
        out[path] = [diagnostic(f, engine.workspace, lines, codec) for f in mine]
    return by, out


class Health:
    def __init__(self, folders: Folders, documents: Documents, codec: PositionCodec):
        self.folders = folders
        self.documents = documents
        self.codec = codec
        self.published: dict[str, Published] = {}  # folder URI -> its files' findings
        self.workspaces: dict[str, Workspace] = {}  # folder URI -> where its keys' files are
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._running: dict[str, asyncio.Future[Any]] = {}
        self._again: set[str] = set()
        self._vectors: set[str] = set()

    def schedule(self, folder: Folder, vectors: bool = False, delay_ms: int = DELAY_MS) -> None:
        if vectors:
            self._vectors.add(folder.uri)
        old = self._timers.pop(folder.uri, None)
        if old:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._timers[folder.uri] = loop.call_later(delay_ms / 1000, self._fire, folder)

    def _fire(self, folder: Folder) -> None:
        self._timers.pop(folder.uri, None)
        running = self._running.get(folder.uri)
        if running is not None and not running.done():
            self._again.add(folder.uri)  # one check at a time: again when it is done
            return
        task = folder.spawn(self._refresh(folder))
        self._running[folder.uri] = task

    async def _refresh(self, folder: Folder) -> None:
        vectors = folder.uri in self._vectors
        self._vectors.discard(folder.uri)
        old = self.published.get(folder.uri, {})
        try:
            async with folder.use() as engine:
                engine.checker.pace = folder.requests.yield_to  # requests first
                by, changed = await folder.read_aside(
                    diagnose, engine, folder.root, old, vectors, self.codec
                )
        except FolderUnavailable:
            return
        finally:
            self._running.pop(folder.uri, None)
            if self._again and folder.uri in self._again:
                self._again.discard(folder.uri)
                self.schedule(folder, delay_ms=0)
        if folder.closed or folder.uri not in self.folders:
            return
        self.published[folder.uri] = by
        self.workspaces[folder.uri] = ws = engine.workspace
        for i, (rel, diags) in enumerate(sorted(changed.items())):
            self.documents.set_health(folder, rel, file_uri(ws, rel), diags)
            if i % 200 == 199:
                await asyncio.sleep(0)  # thousands of files: let requests in between

    def forget(self, folder: Folder) -> None:
        """A folder removed: its files' diagnostics go."""
        timer = self._timers.pop(folder.uri, None)
        if timer:
            timer.cancel()
        ws = self.workspaces.pop(folder.uri, None)
        published = self.published.pop(folder.uri, {})
        if ws is None:  # never checked: nothing was published
            return
        for rel in published:
            self.documents.set_health(folder, rel, file_uri(ws, rel), [])

    def cancel(self) -> None:
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()

    # -- code actions -----------------------------------------------------------------------
    def code_actions(
        self,
        params: types.CodeActionParams,
        text: str | None,
        caps: types.ClientCapabilities | None = None,
    ) -> list[types.CodeAction]:
        """Our diagnostics' actions (open, and the edits of ``fixes``), and "Add expires:" when
        it is asked for; ``text``: the open document's (None: no edits)."""
        uri = params.text_document.uri
        buf = self._buffer(uri, text)
        opts = self._options(uri, caps)
        out: list[types.CodeAction] = []
        for d in params.context.diagnostics:
            if d.source != SOURCE or d.code not in CODES:
                continue
            out += _open_actions(d)
            if buf is not None:
                out += _duplicate_edits(d, buf) + fixes.for_diagnostic(d, buf, opts)
        line = params.range.start.line
        if buf is not None and fixes.wants_add_expires(params.context.only, line, buf.lines):
            add = fixes.add_expires(buf, opts.today)
            out += [add] if add else []
        return out

    def _buffer(self, uri: str, text: str | None) -> fixes.Buffer | None:
        found = self.folders.locate(uri) if text is not None else None
        if found is None or text is None or not found[0].is_memory(found[1]):
            return None
        eol = "\r\n" if "\r\n" in text else "\n"
        lines = lsp_lines(text)
        return fixes.Buffer(uri, found[1], found[0].root, lines, eol, self.codec.client_num_units)

    def _options(self, uri: str, caps: types.ClientCapabilities | None) -> fixes.Options:
        found = self.folders.locate(uri)
        style = found[0].settings.hygiene.supersede if found else fixes.STRIKE_THROUGH
        return fixes.Options(style, fixes.can_create_files(caps), date.today())


def _open_actions(d: types.Diagnostic) -> list[types.CodeAction]:
    """Open each place a diagnostic points at (``memory.open``)."""
    related = (d.data or {}).get("related") if isinstance(d.data, dict) else None
    out = []
    for r in related or []:
        what = "the earlier copy" if d.code == DUPLICATE else r["path"]
        out.append(
            types.CodeAction(
                title=f"Open {what} ({_citation(r)})",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[d],
                command=types.Command(
                    title=f"Open {_citation(r)}",
                    command=protocol.CMD_OPEN,
                    arguments=[r["uri"], r["startLine"], r["endLine"]],
                ),
            )
        )
    return out


def _duplicate_edits(d: types.Diagnostic, buf: fixes.Buffer) -> list[types.CodeAction]:
    """Remove the copy, or replace it with a citation of the earlier one."""
    related = (d.data or {}).get("related") if isinstance(d.data, dict) else None
    first, last = d.range.start.line, d.range.end.line
    if d.code != DUPLICATE or not related or last >= len(buf.lines):
        return []
    lines, units, uri = buf.lines, buf.units, buf.uri
    cite = f"See {_citation(related[0])}."
    return [
        _edit("Remove this copy", uri, d, remove_lines(lines, first, last, units)),
        _edit(
            f"Replace this copy with a citation: {cite}",
            uri,
            d,
            replace_lines(lines, first, last, cite, units),
        ),
    ]


def _citation(r: dict[str, Any]) -> str:
    a, b = r["startLine"], r["endLine"]
    return f"{r['path']}#L{a}" if a == b else f"{r['path']}#L{a}-L{b}"


def _edit(title: str, uri: str, d: types.Diagnostic, edit: types.TextEdit) -> types.CodeAction:
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[d],
        edit=types.WorkspaceEdit(changes={uri: [edit]}),
    )


def remove_lines(lines: list[str], first: int, last: int, units: Units = len) -> types.TextEdit:
    """Delete lines ``first``..``last`` (0-based, ``lines`` as LSP counts them) whole;
    ``units``: a string's length in the client's position units."""
    if last + 1 < len(lines):
        start, end = (
            types.Position(line=first, character=0),
            types.Position(line=last + 1, character=0),
        )
    elif first > 0:  # the last line: the line break before it goes
        prev = lines[first - 1].rstrip("\r\n")
        start = types.Position(line=first - 1, character=units(prev))
        end = types.Position(line=last, character=units(lines[last].rstrip("\r\n")))
    else:
        start, end = types.Position(line=0, character=0), types.Position(line=last + 1, character=0)
    return types.TextEdit(range=types.Range(start=start, end=end), new_text="")


def replace_lines(
    lines: list[str], first: int, last: int, text: str, units: Units = len
) -> types.TextEdit:
    """Replace lines ``first``..``last`` with ``text``, keeping the first one's list marker
    and indentation (``- See MEMORY.md#L4.``)."""
    marker = _LIST.match(lines[first])
    prefix = marker.group(0) if marker else ""
    tail = lines[last].rstrip("\r\n")
    end = types.Position(line=last, character=units(tail))
    return types.TextEdit(
        range=types.Range(start=types.Position(line=first, character=0), end=end),
        new_text=prefix + text,
    )
