"""Wire parameters of the language server's custom requests and commands and of the MCP tools,
parsed one way for both.

cattrs builds each parser from a dataclass: wire names are the dataclass fields in camelCase
(``from`` for ``start``), unknown fields are ignored (newer clients may send more), and the
hooks below check types and bounds strictly (``"5"`` is not a number, ``true`` is not 1). Every
error is a ``ParamError`` naming the wire field, so a client (or an agent reading the error)
knows what to fix. A single object in a list (positional params, ``[{...}]``) is accepted.

What differs between the two wires (the MCP tools' tighter limits, no ``folder`` or ``mode``
there: one workspace, and the tool schemas do not offer them) is a ``Dialect``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import cattrs
from cattrs.errors import AttributeValidationNote, ClassValidationError
from cattrs.gen import make_dict_structure_fn, override

from .search.request import MAX_QUERY_CHARS, MAX_RESULTS_CAP, MODES, SOURCES, SearchRequest

T = TypeVar("T")
Hook = Callable[[Any, Any], Any]

SAVE_SESSION_MESSAGES = 15
MAX_SAVE_SESSION_MESSAGES = 1000


class ParamError(ValueError):
    """A parameter the caller should fix: ``field`` is its wire name."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Dialect:
    """What differs between the language server's params and the MCP tools' arguments."""

    max_results: int  # upper bound of maxResults
    max_lines: int | None  # upper bound of memory/get's lines (None: none)
    lsp_fields: bool  # the language server's own fields: folder (multi-root) and mode


LSP = Dialect(max_results=MAX_RESULTS_CAP, max_lines=None, lsp_fields=True)
MCP = Dialect(max_results=50, max_lines=2000, lsp_fields=False)


MAX_LINE = 2**31 - 1  # ``from`` past it is no line of any file (and past what JSON clients keep)


@dataclass(frozen=True)
class GetParams:
    path: str | None = None
    citation: str | None = None
    start: int | None = None  # "from" on the wire (a Python keyword)
    lines: int | None = None
    folder: str | None = None

    @property
    def target(self) -> str:
        """The citation if given, else the path."""
        return (self.citation or self.path or "").strip()


@dataclass(frozen=True)
class FolderParams:
    """``memory/status`` and ``memory.status``: optionally one workspace folder."""

    folder: str | None = None


MAX_DRAFT_CHARS = 1_000_000  # a note, not a dump: past it the caller is told so


@dataclass(frozen=True)
class CheckParams:
    """``memory/check`` and ``memory_check``: a draft note, and where it would be written."""

    text: str
    path: str | None = None  # workspace-relative; default: a dated note of today
    folder: str | None = None


@dataclass(frozen=True)
class SyncParams:
    force: bool = False
    folder: str | None = None


@dataclass(frozen=True)
class SaveSessionParams:
    transcript: str  # a path (relative to the folder) or a file URI
    messages: int = SAVE_SESSION_MESSAGES
    source: str | None = None
    folder: str | None = None
    skip_known: bool = False  # leave out the messages memory already holds (sessions/known.py)


# -- entry points ----------------------------------------------------------------------------
def parse_search(params: Any, dialect: Dialect = LSP) -> SearchRequest:
    """``memory/search`` params / ``memory_search`` arguments."""
    return _structure(params, SearchRequest, dialect)


def parse_get(params: Any, dialect: Dialect = LSP) -> GetParams:
    """``memory/get`` params / ``memory_get`` arguments: a path or a citation is required."""
    p = _structure(params, GetParams, dialect)
    if not p.target:
        raise ParamError("path", "path or citation is required")
    return p


def wire_names(cls: type, dialect: Dialect = LSP) -> dict[str, str]:
    """The fields of ``cls`` a wire takes: attribute -> wire name (the TypeScript types and the
    tool schemas are held to them)."""
    return dict(_converter(dialect)[1][cls])


def parse_status(params: Any, dialect: Dialect = LSP) -> FolderParams:
    return _structure(params, FolderParams, dialect)


def parse_check(params: Any, dialect: Dialect = LSP) -> CheckParams:
    return _structure(params, CheckParams, dialect)


# The parser of each declared method's params type (methods.py).
PARSERS: dict[type, Callable[[Any, Dialect], Any]] = {
    SearchRequest: parse_search,
    GetParams: parse_get,
    FolderParams: parse_status,
    CheckParams: parse_check,
}


def parse(cls: type[T], params: Any, dialect: Dialect = LSP) -> T:
    """``params`` parsed into ``cls``, one of the declared methods' params types."""
    parsed: T = PARSERS[cls](params, dialect)
    return parsed


def parse_sync(arguments: Sequence[Any]) -> SyncParams:
    """``memory.reindex`` / ``memory.sync`` arguments: none, ``[{force?, folder?}]`` or
    ``[true]`` (force)."""
    if len(arguments) == 1 and isinstance(arguments[0], bool):
        return SyncParams(force=arguments[0])
    return _structure(_command_object(arguments), SyncParams, LSP)


def parse_save_session(arguments: Sequence[Any]) -> SaveSessionParams:
    """``memory.saveSession`` arguments: ``[{transcript, messages?, source?, folder?,
    skipKnown?}]``."""
    p = _structure(_command_object(arguments), SaveSessionParams, LSP)
    if not p.transcript.strip():
        raise ParamError("transcript", "required: the path of a JSONL transcript")
    return p


def _command_object(arguments: Sequence[Any]) -> Any:
    """``workspace/executeCommand`` arguments: nothing, or one object (or null)."""
    if not arguments:
        return None
    return arguments[0] if len(arguments) == 1 else list(arguments)


def _object(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if isinstance(params, dict):
        return params
    # Positional params ([{...}]) are legal JSON-RPC; accept a single object in a list.
    if isinstance(params, list) and len(params) == 1 and isinstance(params[0], dict):
        return params[0]
    raise ParamError("params", f"expected an object, got {type(params).__name__}")


def _structure(params: Any, cls: type[T], dialect: Dialect) -> T:
    conv, wire = _converter(dialect)
    try:
        return conv.structure(_object(params), cls)
    except ClassValidationError as exc:
        raise _first_error(exc, wire[cls]) from None


def _first_error(exc: ClassValidationError, wire: dict[str, str]) -> ParamError:
    """The error of the first bad field (in field order), named as on the wire."""
    inner = exc.exceptions[0]
    notes = [n for n in getattr(inner, "__notes__", ()) if isinstance(n, AttributeValidationNote)]
    name = wire.get(notes[0].name, notes[0].name) if notes else "params"
    return ParamError(name, "is required" if isinstance(inner, KeyError) else str(inner))


# -- hooks: each raises ValueError(message); the field name comes from cattrs' notes ----------
def _string(value: Any, _: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _integer(low: int, high: int | None = None, default: int | None = None) -> Hook:
    def hook(value: Any, _: Any) -> int | None:
        if value is None:
            return default
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)  # int(NaN) and int(inf) raise with Python's words
            or value != int(value)
        ):
            raise ValueError(f"expected an integer, got {value!r}")
        given, value = value, int(value)  # the error says 1e+308 as sent, not in 309 digits
        if value < low:
            raise ValueError(f"must be at least {low}, got {given!r}")
        if high is not None and value > high:
            raise ValueError(f"must be at most {high}, got {given!r}")
        return value

    return hook


def _number(low: float, high: float) -> Hook:
    def hook(value: Any, _: Any) -> float | None:
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ValueError(f"expected a number, got {value!r}")
        if not low <= value <= high:
            raise ValueError(f"must be between {low:g} and {high:g}, got {value}")
        return float(value)

    return hook


def _draft(value: Any, _: Any) -> str:
    text = _string(value, _)
    if len(text) > MAX_DRAFT_CHARS:
        raise ValueError(f"at most {MAX_DRAFT_CHARS:,} characters, got {len(text):,}")
    return text


def _flag(value: Any, _: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _query(value: Any, _: Any) -> str:
    text = _string(value, None)
    if len(text) > MAX_QUERY_CHARS:
        raise ValueError(f"longer than {MAX_QUERY_CHARS} characters")
    return text


def _mode(value: Any, _: Any) -> str:
    if value is None:
        return "auto"
    if value not in MODES:
        raise ValueError(f"expected one of {', '.join(MODES)}, got {value!r}")
    return str(value)


def _sources(value: Any, _: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ValueError(f"expected a non-empty list, got {value!r}")
    bad = [s for s in value if s not in SOURCES]
    if bad:
        raise ValueError(f"unknown source {bad[0]!r}; expected {', '.join(SOURCES)}")
    return tuple(value)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


@functools.cache
def _converter(d: Dialect) -> tuple[cattrs.Converter, dict[type, dict[str, str]]]:
    """The converter of one dialect, and each class's field -> wire name map."""
    conv = cattrs.Converter(detailed_validation=True, forbid_extra_keys=False)
    conv.register_structure_hook(str, _string)
    wire: dict[type, dict[str, str]] = {}

    def register(
        cls: type, omit: Sequence[str] = (), renames: dict[str, str] | None = None, **hooks: Hook
    ) -> None:
        names = {
            f.name: (renames or {}).get(f.name, _camel(f.name)) for f in dataclasses.fields(cls)
        }
        overrides: dict[str, Any] = {
            attr: override(rename=name, struct_hook=hooks.get(attr), omit=attr in omit)
            for attr, name in names.items()
        }
        conv.register_structure_hook(
            cls, make_dict_structure_fn(cls, conv, _cattrs_detailed_validation=True, **overrides)
        )
        wire[cls] = {attr: name for attr, name in names.items() if attr not in omit}

    lines = _integer(1, d.max_lines)
    register(
        SearchRequest,
        omit=("parsed_query",) if d.lsp_fields else ("parsed_query", "mode", "folder"),
        query=_query,
        max_results=_integer(1, d.max_results),
        min_score=_number(0, 1),
        sources=_sources,
        mode=_mode,
        explain=_flag,
    )
    register(
        GetParams,
        omit=() if d.lsp_fields else ("folder",),
        renames={"start": "from"},
        start=_integer(1, MAX_LINE),
        lines=lines,
    )
    register(FolderParams)
    register(CheckParams, omit=() if d.lsp_fields else ("folder",), text=_draft)
    register(SyncParams, force=_flag)
    register(
        SaveSessionParams, messages=_integer(1, MAX_SAVE_SESSION_MESSAGES, SAVE_SESSION_MESSAGES)
    )
    return conv, wire
