"""The code actions that fix a memory check's finding by editing the file: mark the older of
two conflicting passages superseded, move what is past a load cap into a topic file, set or add
``expires:``. Each is a ``WorkspaceEdit`` the user applies: memory-ls never writes a memory
file itself, and an edit never overwrites a file (a new topic file is created with
``overwrite: false, ignoreIfExists: false``, so the editor refuses it if the file appeared).

The duplicate's actions (remove, cite) and the ``memory.open`` ones are in ``health.py``.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path

from .. import roots
from ..hygiene.checks import LOAD_CAPS
from ..hygiene.conflicts import SUPERSEDED_BY
from ..hygiene.findings import CONFLICT, EXPIRED, FRONT_MATTER, LOAD_CAP
from ..sources.frontmatter import EXPIRY_KEYS, front_matter_end, key_line
from ..workspace import MEMORY_DIR, ROOT_FILES

Units = Callable[[str], int]

EXPIRES_DAYS = 90  # what "Add expires:" proposes: a season, then the note is looked at again
ADD_EXPIRES = "source.addExpires"  # the source action's kind (VS Code: Source Action...)
TOP_LINES = 64  # a request this far down may still be in the front matter (else not asked)
STRIKE_THROUGH, FRONT_MATTER_KEY = "strikeThrough", "frontMatter"
# A line's marks that stay outside a strike-through: indentation, quotes, a list marker, a box.
_MARKS = re.compile(r"^(\s*(?:>\s*)*(?:(?:[-*+]|\d{1,3}[.)])\s+)?(?:\[[ xX]\]\s+)?)(.*?)(\s*)$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_PLAIN = re.compile(r"[\w][\w./\-]*#L\d+(?:-L\d+)?")  # a citation YAML reads as it is
_KEY = re.compile(r"^(\s*['\"]?(?:expires|valid_until)['\"]?\s*:)(.*)$")


@dataclass(frozen=True)
class Buffer:
    """An open memory file: where it is and its lines as LSP counts them."""

    uri: str
    rel: str  # workspace-relative
    root: Path
    lines: list[str]
    eol: str
    units: Units

    def end(self, line: int) -> types.Position:
        return types.Position(line=line, character=self.units(self.lines[line]))


@dataclass(frozen=True)
class Options:
    supersede: str = STRIKE_THROUGH  # hygiene.supersede
    create_files: bool = False  # the client applies CreateFile in a documentChanges edit
    today: date = date.min


def wanted(params: types.CodeActionParams) -> bool:
    """Whether a code action request may get any of ours: a diagnostic of ours is in it, or
    "Add expires:" is asked for (source actions) or may be (line 1, the front matter)."""
    if any(d.source == "memory-ls" for d in params.context.diagnostics):
        return True
    return params.context.only is not None or params.range.start.line < TOP_LINES


def can_create_files(caps: types.ClientCapabilities | None) -> bool:
    """Whether the client applies a ``WorkspaceEdit`` that creates a file
    (``workspace.workspaceEdit``: ``documentChanges`` and ``resourceOperations`` ``create``)."""
    edit = caps.workspace.workspace_edit if caps and caps.workspace else None
    if edit is None or not edit.document_changes:
        return False
    return types.ResourceOperationKind.Create in (edit.resource_operations or ())


def for_diagnostic(d: types.Diagnostic, buf: Buffer, opts: Options) -> list[types.CodeAction]:
    """The editing fixes of one of our diagnostics in ``buf``."""
    related = (d.data or {}).get("related") if isinstance(d.data, dict) else None
    if d.range.end.line >= len(buf.lines):
        return []
    got: types.CodeAction | None = None
    if d.code == CONFLICT and related:
        got = supersede(d, buf, related[0], opts.supersede)
    elif d.code == LOAD_CAP and opts.create_files:
        got = move_past_cap(d, buf)
    elif d.code in (FRONT_MATTER, EXPIRED):
        got = set_expires(d, buf, opts.today)
    return [got] if got else []


def _fix(title: str, d: types.Diagnostic | None, edit: types.WorkspaceEdit) -> types.CodeAction:
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix if d else ADD_EXPIRES,
        diagnostics=[d] if d else None,
        edit=edit,
    )


def _changes(buf: Buffer, edit: types.TextEdit) -> types.WorkspaceEdit:
    return types.WorkspaceEdit(changes={buf.uri: [edit]})


def _insert(line: int, text: str) -> types.TextEdit:
    at = types.Position(line=line, character=0)
    return types.TextEdit(range=types.Range(start=at, end=at), new_text=text)


# -- conflict: mark the older passage superseded ----------------------------------------------
def supersede(
    d: types.Diagnostic, buf: Buffer, newer: dict[str, Any], style: str
) -> types.CodeAction | None:
    a, b = newer["startLine"], newer["endLine"]
    cite = f"{newer['path']}#L{a}" if a == b else f"{newer['path']}#L{a}-L{b}"
    if style == FRONT_MATTER_KEY:
        edit = add_key(buf, SUPERSEDED_BY, cite if _PLAIN.fullmatch(cite) else json.dumps(cite))
        how = f"{SUPERSEDED_BY}: {cite} in the front matter"
    else:
        edit = strike(buf, d.range.start.line, d.range.end.line)
        how = "struck through"
    if edit is None:
        return None
    return _fix(f"Mark this passage superseded by {cite} ({how})", d, _changes(buf, edit))


def strike(buf: Buffer, first: int, last: int) -> types.TextEdit | None:
    """Lines ``first``..``last`` struck through (``- ~~text~~``), each on its own: Markdown's
    ``~~`` does not span a list item's or a paragraph's lines. None for a table's row, which
    tildes around it would break."""
    out = []
    for line in buf.lines[first : last + 1]:
        if line.lstrip().startswith("|"):
            return None
        m = _MARKS.match(line)
        lead, body, tail = m.groups() if m else ("", line, "")
        struck = body.startswith("~~") and body.endswith("~~") and len(body) > 3
        out.append(line if not body or struck else f"{lead}~~{body}~~{tail}")
    if out == buf.lines[first : last + 1]:
        return None
    return types.TextEdit(
        range=types.Range(start=types.Position(line=first, character=0), end=buf.end(last)),
        new_text=buf.eol.join(out),
    )


def add_key(buf: Buffer, key: str, value: str) -> types.TextEdit | None:
    """``key: value`` added as the front matter's last key (a front matter block made when the
    file has none); None when the key is there already. The other keys' text is left as is."""
    end = front_matter_end(buf.lines)
    if end and key_line(buf.lines, end, key):
        return None
    if end:
        return _insert(end - 1, f"{key}: {value}{buf.eol}")
    return _insert(0, f"---{buf.eol}{key}: {value}{buf.eol}---{buf.eol}")


# -- expires ------------------------------------------------------------------------------
def _in(today: date) -> str:
    return (today + timedelta(days=EXPIRES_DAYS)).isoformat()


def set_expires(d: types.Diagnostic, buf: Buffer, today: date) -> types.CodeAction | None:
    """An ``expires`` (or ``valid_until``) that is past or not a date, set to today + 90 days."""
    end = front_matter_end(buf.lines)
    if d.code == EXPIRED:
        key = next((k for k in EXPIRY_KEYS if f"({k})" in d.message), None)
        at = key_line(buf.lines, end, key) if key and end else None
        line = at - 1 if at else None
    else:
        key = next((k for k in EXPIRY_KEYS if d.message.startswith(f"{k}: ")), None)
        line = d.range.start.line if key else None
    if line is None or not 0 < line < end - 1:
        return None
    m = _KEY.match(buf.lines[line])
    following = buf.lines[line + 1] if line + 1 < end - 1 else ""
    if m is None or following[:1].isspace():  # a value on more lines than one: left alone
        return None
    when = _in(today)
    edit = types.TextEdit(
        range=types.Range(
            start=types.Position(line=line, character=buf.units(m[1])), end=buf.end(line)
        ),
        new_text=f" {when}",
    )
    return _fix(f"Set {key}: {when} ({EXPIRES_DAYS} days from today)", d, _changes(buf, edit))


def wants_add_expires(only: Sequence[str] | None, line: int, lines: list[str]) -> bool:
    """Whether to offer "Add expires:": asked for source actions (VS Code's *Source
    Action...*, Neovim's ``only = {"source"}``), or asked for every action with the cursor on
    line 1 or in the front matter (Neovim's ``code_action()`` there)."""
    if only is not None:
        kinds = [str(getattr(k, "value", k)) for k in only]  # a CodeActionKind, or its string
        return any(k == ADD_EXPIRES or ADD_EXPIRES.startswith(f"{k}.") for k in kinds)
    return line == 0 or (line < TOP_LINES and line < front_matter_end(lines))


def add_expires(buf: Buffer, today: date) -> types.CodeAction | None:
    """``expires: <today + 90 days>`` added to a memory file's front matter (made when it has
    none); not for an always-loaded index file, nor a file that has an expiry already."""
    if posixpath.basename(buf.rel) in ROOT_FILES or not buf.rel.lower().endswith(".md"):
        return None
    end = front_matter_end(buf.lines)
    if end and any(key_line(buf.lines, end, k) for k in EXPIRY_KEYS):
        return None
    when = _in(today)
    edit = add_key(buf, "expires", when)
    if edit is None:
        return None
    return _fix(f"Add expires: {when} ({EXPIRES_DAYS} days from today)", None, _changes(buf, edit))


# -- load-cap: move what is past the cap into a topic file ---------------------------------------
def move_past_cap(d: types.Diagnostic, buf: Buffer) -> types.CodeAction | None:
    """The lines from the first one past the cap to the end moved into a new topic file under
    ``memory/``, and a link to it in their place, within the cap (a line or more before it,
    as many as the link's bytes need). The topic file is named after the first heading past
    the cap (``memory/deploy-notes.md``), else ``memory/<index>-overflow.md``. Never for a
    file under a root (``memory.roots`` are read-only: no file is made there)."""
    if roots.split(buf.rel):
        return None
    lines, first = buf.lines, d.range.start.line
    top = front_matter_end(lines)
    moved = _content(lines[first:])
    if not moved:
        return None
    title = next((m[1] for line in moved if (m := _HEADING.match(line))), None)
    stem = posixpath.splitext(posixpath.basename(buf.rel))[0]
    rel = free_name(buf.root, _slug(title or "") or f"{stem}-overflow")
    target = posixpath.relpath(rel, posixpath.dirname(buf.rel) or ".")
    name = (title or rel).replace("[", "").replace("]", "")
    link = f"- [{name}]({target})"
    cut = _room(lines, first, len(link.encode("utf-8", "surrogatepass")) + 1, buf.rel)
    if cut < top or cut < 1:
        return None
    moved = _content(lines[cut:])
    ending = buf.eol if lines[-1] == "" else ""
    new_uri = from_fs_path(str(buf.root / rel)) or (buf.root / rel).as_uri()
    index = types.TextEdit(
        range=types.Range(start=types.Position(line=cut, character=0), end=buf.end(len(lines) - 1)),
        new_text=link + ending,
    )
    edit = types.WorkspaceEdit(
        document_changes=[
            types.CreateFile(
                uri=new_uri,
                options=types.CreateFileOptions(overwrite=False, ignore_if_exists=False),
            ),
            _document(new_uri, _insert(0, buf.eol.join(moved) + buf.eol)),
            _document(buf.uri, index),
        ]
    )
    title_text = f"Move lines {cut + 1}-{len(lines) - (1 if ending else 0)} into {rel}"
    return _fix(f"{title_text}, linked from {buf.rel}", d, edit)


def _document(uri: str, edit: types.TextEdit) -> types.TextDocumentEdit:
    return types.TextDocumentEdit(
        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None),
        edits=[edit],
    )


def _content(lines: list[str]) -> list[str]:
    """Lines without the blank ones they start and end with."""
    a, b = 0, len(lines)
    while a < b and not lines[a].strip():
        a += 1
    while b > a and not lines[b - 1].strip():
        b -= 1
    return lines[a:b]


def _room(lines: list[str], first: int, need: int, rel: str) -> int:
    """Where the link (``need`` bytes with its break) goes: the last line at which the lines
    before it and the link are within every cap of the file; -1: nowhere."""
    caps = [c for c in LOAD_CAPS if rel in c.files]
    cut = first - 1  # the link takes a line: at most the line before the first one past
    for c in caps:
        cut = min(cut, c.max_lines - 1) if c.max_lines is not None else cut
    before = sum(len(line.encode("utf-8", "surrogatepass")) + 1 for line in lines[:cut])
    while cut >= 0:
        if all(c.max_bytes is None or before + need <= c.max_bytes for c in caps):
            return cut
        cut -= 1
        before -= len(lines[cut].encode("utf-8", "surrogatepass")) + 1 if cut >= 0 else 0
    return -1


def _slug(title: str) -> str:
    words = re.findall(r"[^\W_]+", title.lower())
    return "-".join(words)[:60].strip("-")


def free_name(root: Path, slug: str) -> str:
    """``memory/<slug>.md``, or ``memory/<slug>-2.md`` and on, the first that does not exist."""
    n = 1
    while True:
        rel = f"{MEMORY_DIR}/{slug}{'' if n == 1 else f'-{n}'}.md"
        if not (root / rel).exists():
            return rel
        n += 1
