"""Custom requests and commands: parsing and validating their params.

Every error is ``InvalidParams`` with a message that names the method and the field, so a
client (or an agent reading the error) knows what to fix. Unknown fields are ignored: newer
clients may send more than this server knows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from ..search.request import MAX_QUERY_CHARS, MAX_RESULTS_CAP, MODES, SOURCES, SearchRequest

SEARCH = "memory/search"
GET = "memory/get"
STATUS = "memory/status"

CMD_REINDEX = "memory.reindex"
CMD_SYNC = "memory.sync"
CMD_STATUS = "memory.status"
CMD_SAVE_SESSION = "memory.saveSession"
COMMANDS = (CMD_REINDEX, CMD_SYNC, CMD_STATUS, CMD_SAVE_SESSION)


def invalid(method: str, field: str, message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message=f"{method}: {field}: {message}")


@dataclass(frozen=True)
class GetParams:
    target: str  # a path or a citation
    start: int | None = None
    lines: int | None = None
    folder: str | None = None


@dataclass(frozen=True)
class SyncParams:
    force: bool = False
    folder: str | None = None


@dataclass(frozen=True)
class SaveSessionParams:
    transcript: str  # a path (relative to the folder) or a file URI
    messages: int = 15
    source: str | None = None
    folder: str | None = None


def parse_save_session(arguments: Any) -> SaveSessionParams:
    """``memory.saveSession`` arguments: ``[{transcript, messages?, source?, folder?}]``."""
    method = CMD_SAVE_SESSION
    args = list(arguments or [])
    data = _object(method, args[0] if len(args) == 1 else args)
    transcript = _opt_str(method, data, "transcript")
    if not transcript:
        raise invalid(method, "transcript", "required: the path of a JSONL transcript")
    return SaveSessionParams(
        transcript=transcript,
        messages=_opt_int(method, data, "messages", 1, 1000) or 15,
        source=_opt_str(method, data, "source"),
        folder=_opt_str(method, data, "folder"),
    )


def _object(method: str, params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if isinstance(params, dict):
        return params
    # Positional params ([{...}]) are legal JSON-RPC; accept a single object in a list.
    if isinstance(params, list) and len(params) == 1 and isinstance(params[0], dict):
        return params[0]
    raise invalid(method, "params", f"expected an object, got {type(params).__name__}")


def _opt_str(method: str, data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(method, key, f"expected a string, got {value!r}")
    return value


def _opt_int(
    method: str, data: dict[str, Any], key: str, minimum: int = 1, maximum: int | None = None
) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise invalid(method, key, f"expected an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise invalid(method, key, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise invalid(method, key, f"must be at most {maximum}, got {value}")
    return value


def _opt_bool(method: str, data: dict[str, Any], key: str) -> bool | None:
    value = data.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise invalid(method, key, f"expected true or false, got {value!r}")


def parse_search(params: Any, method: str = SEARCH) -> SearchRequest:
    data = _object(method, params)
    query = data.get("query")
    if query is None:
        raise invalid(method, "query", "is required")
    if not isinstance(query, str):
        raise invalid(method, "query", f"expected a string, got {query!r}")
    if len(query) > MAX_QUERY_CHARS:
        raise invalid(method, "query", f"longer than {MAX_QUERY_CHARS} characters")
    min_score = data.get("minScore")
    if min_score is not None:
        if (
            isinstance(min_score, bool)
            or not isinstance(min_score, int | float)
            or not math.isfinite(min_score)
        ):
            raise invalid(method, "minScore", f"expected a number, got {min_score!r}")
        if not 0 <= min_score <= 1:
            raise invalid(method, "minScore", f"must be between 0 and 1, got {min_score}")
        min_score = float(min_score)
    sources = data.get("sources")
    if sources is not None:
        if isinstance(sources, str):
            sources = [sources]
        if not isinstance(sources, list) or not sources:
            raise invalid(method, "sources", f"expected a non-empty list, got {sources!r}")
        bad = [s for s in sources if s not in SOURCES]
        if bad:
            raise invalid(method, "sources", f"unknown source {bad[0]!r}; expected {SOURCES}")
    mode = _opt_str(method, data, "mode") or "auto"
    if mode not in MODES:
        raise invalid(method, "mode", f"expected one of {', '.join(MODES)}, got {mode!r}")
    return SearchRequest(
        query=query,
        max_results=_opt_int(method, data, "maxResults", 1, MAX_RESULTS_CAP),
        min_score=min_score,
        sources=tuple(sources) if sources else None,
        path_prefix=_opt_str(method, data, "pathPrefix") or None,
        mode=mode,
        folder=_opt_str(method, data, "folder"),
    )


def parse_get(params: Any, method: str = GET) -> GetParams:
    data = _object(method, params)
    path = _opt_str(method, data, "path")
    citation = _opt_str(method, data, "citation")
    if not path and not citation:
        raise invalid(method, "path", "path or citation is required")
    return GetParams(
        target=(citation or path or "").strip(),
        # "from" is a Python keyword, hence start; the wire name stays the spec's.
        start=_opt_int(method, data, "from", 1),
        lines=_opt_int(method, data, "lines", 1),
        folder=_opt_str(method, data, "folder"),
    )


def parse_status(params: Any, method: str = STATUS) -> str | None:
    return _opt_str(method, _object(method, params), "folder")


def parse_sync(arguments: Any, method: str) -> SyncParams:
    """``workspace/executeCommand`` arguments: none, ``[{force?, folder?}]`` or ``[true]``."""
    args = list(arguments or [])
    if not args or args[0] is None:
        return SyncParams()
    if len(args) == 1 and isinstance(args[0], bool):
        return SyncParams(force=args[0])
    data = _object(method, args[0] if len(args) == 1 else args)
    return SyncParams(
        force=bool(_opt_bool(method, data, "force")),
        folder=_opt_str(method, data, "folder"),
    )
