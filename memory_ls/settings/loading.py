"""Layered loading and validation that reports and ignores bad input, driven by ``schema.py``.

An unknown key or a value of the wrong type, out of bounds or not among the choices is
reported by its camelCase name and ignored (the previous layer's value stays): never fatal.
cattrs is not used here: it structures a whole object or fails, while a settings layer must keep
every good key and name each bad one.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from .schema import Settings
from .spec import Spec, camel, snake, spec_of

INT_LIMIT = 2**63 - 1
# A problem shows at most this much of the bad value: it goes to the status, the log and a
# message window each time the settings load, and a 1 MB string would be 1 MB in each.
SHOWN_CHARS = 200

Show = Callable[[Any], str]
# The problem of a settings file that does not parse (the server keeps the settings it has).
UNREADABLE = "cannot read settings"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"


def _kind(value: Any) -> str:
    """A secret setting's bad value by its kind only: the value may be the key itself (an API
    key in a list, a header table with one number in it)."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    names: dict[type, str] = {str: "a string", list: "a list", dict: "a table"}
    return names.get(type(value), f"a {type(value).__name__}")


def _coerce(value: Any, hint: Any, where: str, show: Show = _shown) -> Any:
    """Return value converted to hint, or raise ValueError naming the key."""
    origin = get_origin(hint)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f"{where}: expected true or false, got {show(value)}")
    if hint is int:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value != int(value)
        ):
            raise ValueError(f"{where}: expected an integer, got {show(value)}")
        if abs(value) > INT_LIMIT:  # SQLite's integers are 64-bit: a search would overflow
            raise ValueError(f"{where}: expected an integer up to {INT_LIMIT}, got {show(value)}")
        return int(value)
    if hint is float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ValueError(f"{where}: expected a number, got {show(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {show(value)}")
        return value
    if origin is list:
        (item,) = get_args(hint)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list, got {show(value)}")
        return [_coerce(v, item, f"{where}[{i}]", show) for i, v in enumerate(value)]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a table of settings
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a table, got {show(value)}")
        table = hint()
        problems = apply(table, value, f"{where}.")
        if problems:
            raise ValueError("; ".join(p.removesuffix("; ignored") for p in problems))
        return table
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ValueError(f"{where}: expected a table of strings, got {show(value)}")
        return {str(k): v for k, v in value.items()}
    raise ValueError(f"{where}: unsupported setting type")  # pragma: no cover


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


def bounds_text(spec: Spec) -> str:
    """The allowed range in words ("between 0 and 1", "at least 1"), "" when unbounded."""
    lo, hi = spec.minimum, spec.maximum
    if lo is not None and hi is not None:
        return f"between {_number(lo)} and {_number(hi)}"
    if lo is not None:
        return "not negative" if lo == 0 else f"at least {_number(lo)}"
    return f"at most {_number(hi)}" if hi is not None else ""


def list_text(spec: Spec) -> str:
    """What a list setting accepts in words ("non-empty list of memory, sessions")."""
    n = spec.min_items
    size = "non-empty list" if n == 1 else f"list of at least {n} items" if n else "list"
    return size + (f" of {', '.join(spec.choices)}" if spec.choices else "")


def _check(key: str, value: Any, spec: Spec, show: Show = _shown) -> None:
    """Raise ValueError naming ``key`` when ``value`` breaks its declared choices or bounds."""
    if isinstance(value, list):
        bad = [v for v in value if spec.choices and v not in spec.choices]
        if bad or len(value) < spec.min_items:
            raise ValueError(f"{key}: expected a {list_text(spec)}, got {show(value)}")
    elif spec.choices and value not in spec.choices:
        raise ValueError(f"{key}: expected one of {', '.join(spec.choices)}, got {show(value)}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        low = spec.minimum is not None and value < spec.minimum
        high = spec.maximum is not None and value > spec.maximum
        if low or high:
            rule = bounds_text(spec)
            must = "must not be negative" if rule == "not negative" else f"must be {rule}"
            raise ValueError(f"{key}: {must}, got {show(value)}")


def apply(target: Any, data: dict[str, Any], prefix: str = "") -> list[str]:
    """Merge a camelCase mapping into a settings dataclass in place; return problems found."""
    problems: list[str] = []
    if not isinstance(data, dict):
        # By kind only: a section may hold a secret (`store.postgres = "postgresql://u:pw@…"`).
        return [f"{prefix.rstrip('.') or 'settings'}: expected a table, got {_kind(data)}"]
    hints = get_type_hints(type(target))
    fields = {f.name: f for f in dataclasses.fields(target)}
    for raw_key, value in data.items():
        key = f"{prefix}{raw_key}"
        attr = snake(str(raw_key))
        if attr not in fields:
            problems.append(f"{key}: unknown setting, ignored")
            continue
        spec = spec_of(fields[attr])
        if spec is None:  # a section
            problems += apply(getattr(target, attr), value, f"{key}.")
            continue
        show = _kind if spec.secret else _shown
        if isinstance(value, list) and _table_list(hints[attr]):
            good, bad = _good_tables(value, hints[attr], key, show)
            problems += bad
            if bad and not good:
                continue  # nothing right in it: what a lower layer said stays
            value = good
        try:
            coerced = _coerce(value, hints[attr], key, show)
            _check(key, coerced, spec, show)
        except ValueError as exc:
            problems.append(f"{exc}; ignored")
            continue
        setattr(target, attr, coerced)
    if prefix == "" and isinstance(target, Settings):
        problems += _check_together(target)
    return problems


def _table_list(hint: Any) -> bool:
    args = get_args(hint)
    return get_origin(hint) is list and len(args) == 1 and dataclasses.is_dataclass(args[0])


def _good_tables(value: list[Any], hint: Any, key: str, show: Show) -> tuple[list[Any], list[str]]:
    """The entries of a list of tables that are right, and a problem for each other one: one
    bad entry of `sessions.roots` used to drop every agent's folder."""
    good, problems = [], []
    for i, item in enumerate(value):
        try:
            _coerce([item], hint, f"{key}[{i}]", show)
        except ValueError as exc:
            message = str(exc).replace(f"{key}[{i}][0]", f"{key}[{i}]")
            problems.append(f"{message.removesuffix(', ignored')}; ignored")
            continue
        good.append(item)
    return good, problems


def _check_together(s: Settings) -> list[str]:
    """Rules between settings, which a single key's bounds cannot say."""
    problems: list[str] = []
    if s.chunking.overlap >= s.chunking.tokens:
        s.chunking.overlap = s.chunking.tokens // 5
        problems.append(
            f"chunking.overlap must be below chunking.tokens; using {s.chunking.overlap}"
        )
    hy = s.query.hybrid
    if hy.vector_weight + hy.text_weight == 0:  # weighted fusion divides by their sum
        default = type(hy)()
        hy.vector_weight, hy.text_weight = default.vector_weight, default.text_weight
        problems.append(
            "query.hybrid.vectorWeight and textWeight must not both be 0; "
            f"using {hy.vector_weight} and {hy.text_weight}"
        )
    for section in (s.sessions, s.memory):
        if any(not r.path for r in section.roots):
            section.roots = [r for r in section.roots if r.path]  # type: ignore[assignment]
            kind = "sessions" if section is s.sessions else "memory"
            problems.append(f"{kind}.roots: an entry without a path; ignored")
    return problems


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v):
        return to_dict(v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return copy.deepcopy(v)


def to_dict(s: Any) -> dict[str, Any]:
    """The camelCase mapping of a settings dataclass (secrets included: never log it)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(s):
        v = getattr(s, f.name)
        out[camel(f.name)] = _plain(v)
    return out


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "memory-ls" / "config.toml"


def read_toml(path: Path) -> tuple[dict[str, Any], list[str]]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh), []
    except FileNotFoundError:
        return {}, []
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return {}, [f"{path}: {UNREADABLE} ({exc}); ignored"]


def load(root: Path | None = None, *overrides: dict[str, Any]) -> tuple[Settings, list[str]]:
    """Settings for a workspace folder, with the list of problems met on the way."""
    settings = Settings()
    problems: list[str] = []
    layers: list[tuple[str, dict[str, Any]]] = []
    for path in [user_config_path()] + ([root / ".memory-ls.toml"] if root else []):
        data, errs = read_toml(path)
        problems += errs
        layers.append((str(path), data))
    layers += [("client", o) for o in overrides if o]
    for name, data in layers:
        problems += [f"{name}: {p}" for p in apply(settings, data)]
    return settings, problems


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memory-ls"
