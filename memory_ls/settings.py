"""Typed settings: defaults, layered loading, validation that reports and ignores bad input.

Layers, later wins: defaults, ``~/.config/memory-ls/config.toml``,
``<workspace>/.memory-ls.toml``, then whatever the caller merges on top (LSP
``initializationOptions`` and ``workspace/configuration``).
Keys are camelCase in every layer (``query.maxResults``) and snake_case on the dataclasses.
An unknown key or a value of the wrong type is reported by name and ignored: never fatal.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

PROVIDERS = (
    "auto",
    "none",
    "local",
    "openai",
    "openai-compatible",
    "ollama",
    "gemini",
    "voyage",
    "mistral",
)


@dataclass
class HybridSettings:
    enabled: bool = True
    vector_weight: float = 0.7
    text_weight: float = 0.3
    candidate_multiplier: int = 4
    # The candidate pool never shrinks below this, so the top hit does not depend on maxResults.
    min_candidates: int = 50
    fusion: str = "weighted"  # "weighted" | "rrf"
    rrf_k: int = 60


@dataclass
class MmrSettings:
    enabled: bool = False
    lambda_: float = 0.7


@dataclass
class DecaySettings:
    enabled: bool = False
    half_life_days: float = 30.0


@dataclass
class QuerySettings:
    max_results: int = 6
    min_score: float = 0.35
    snippet_max_chars: int = 700
    hybrid: HybridSettings = field(default_factory=HybridSettings)
    mmr: MmrSettings = field(default_factory=MmrSettings)
    temporal_decay: DecaySettings = field(default_factory=DecaySettings)
    # Each source keeps at least this share of the results when several sources match.
    source_balance: bool = True
    # Keyword side: leave out query words found in more than this share of all chunks (their
    # IDF is near zero, and BM25 over them scans much of a large index); 1 keeps every word.
    common_term_fraction: float = 0.3


@dataclass
class ChunkingSettings:
    tokens: int = 400
    overlap: int = 80


@dataclass
class LocalSettings:
    model_path: str = ""
    threads: int = 0  # 0: llama.cpp decides
    batch_size: int = 32
    context_size: int = 512
    # A document longer than this many tokens is embedded as the mean of windows of at most
    # this size: all-MiniLM-L6-v2 was trained on 256-token inputs (0: one window, truncated).
    window_tokens: int = 256


@dataclass
class RemoteSettings:
    base_url: str = ""
    api_key: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    dimensions: int = 0  # 0: the model's default
    query_timeout_ms: int = 2000
    batch_timeout_ms: int = 60000
    batch_size: int = 64
    retries: int = 3
    backoff_min_ms: int = 500
    backoff_max_ms: int = 8000
    # Largest single input in tokens; 0: the provider's own limit (512 for Ollama and
    # OpenAI-compatible servers, whose models vary). Feeds the chunker's size limits.
    max_input_tokens: int = 0
    # Asynchronous batch API for large backfills (OpenAI, Gemini, Voyage; cheaper, slow).
    batch_api: bool = False
    batch_api_min_texts: int = 1000  # smaller backfills use the synchronous endpoint
    batch_api_concurrency: int = 2  # batch jobs in flight at once
    batch_api_poll_ms: int = 30000
    # Then cancel and embed the rest synchronously; 0: no limit (the provider's own window).
    batch_api_timeout_minutes: int = 24 * 60


@dataclass
class CacheSettings:
    enabled: bool = True
    max_entries: int = 100_000


@dataclass
class SessionsSyncSettings:
    delta_bytes: int = 100_000
    delta_messages: int = 50


@dataclass
class SyncSettings:
    watch: bool = True
    watch_debounce_ms: int = 1500
    edit_debounce_ms: int = 300
    interval_minutes: int = 0
    search_budget_ms: int = 250
    sessions: SessionsSyncSettings = field(default_factory=SessionsSyncSettings)


@dataclass
class SessionsSettings:
    globs: list[str] = field(default_factory=list)
    retention_days: int = 0  # 0: keep all


@dataclass
class SessionWriterSettings:
    # An OpenAI-compatible chat-completions endpoint that names saved sessions (the file slug);
    # with no base URL or model, slugs come from the conversation's keywords.
    base_url: str = ""  # e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1
    model: str = ""
    api_key: str = ""
    timeout_ms: int = 15000


@dataclass
class StoreSettings:
    path: str = ""  # "": $XDG_CACHE_HOME/memory-ls/<folder>-<hash>.sqlite
    vector_backend: str = "auto"  # "auto" | "numpy" | "sqlite-vec"


@dataclass
class Settings:
    provider: str = "auto"
    model: str = ""
    fallback: str = "none"
    sources: list[str] = field(default_factory=lambda: ["memory"])
    extra_paths: list[str] = field(default_factory=list)
    max_file_bytes: int = 5 * 1024 * 1024
    log_level: str = "info"
    query: QuerySettings = field(default_factory=QuerySettings)
    chunking: ChunkingSettings = field(default_factory=ChunkingSettings)
    local: LocalSettings = field(default_factory=LocalSettings)
    remote: RemoteSettings = field(default_factory=RemoteSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    sync: SyncSettings = field(default_factory=SyncSettings)
    sessions: SessionsSettings = field(default_factory=SessionsSettings)
    session_writer: SessionWriterSettings = field(default_factory=SessionWriterSettings)
    store: StoreSettings = field(default_factory=StoreSettings)


_CHOICES: dict[str, tuple[str, ...]] = {
    "provider": PROVIDERS,
    "fallback": PROVIDERS,
    "query.hybrid.fusion": ("weighted", "rrf"),
    "store.vectorBackend": ("auto", "numpy", "sqlite-vec"),
    "logLevel": ("error", "warning", "info", "debug"),
}
_SOURCES = ("memory", "sessions")


def camel(name: str) -> str:
    name = name.rstrip("_")
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def snake(name: str) -> str:
    out = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    return "lambda_" if out == "lambda" else out


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Return value converted to hint, or raise ValueError naming the key."""
    origin = get_origin(hint)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f"{where}: expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")
        return value
    if origin is list:
        (item,) = get_args(hint)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list, got {value!r}")
        return [_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ValueError(f"{where}: expected a table of strings, got {value!r}")
        return {str(k): v for k, v in value.items()}
    raise ValueError(f"{where}: unsupported setting type")  # pragma: no cover


def _check(key: str, value: Any) -> None:
    if key in _CHOICES and value not in _CHOICES[key]:
        raise ValueError(f"{key}: expected one of {', '.join(_CHOICES[key])}, got {value!r}")
    if key == "sources":
        bad = [s for s in value if s not in _SOURCES]
        if bad or not value:
            raise ValueError(f"sources: expected a non-empty list of {_SOURCES}, got {value!r}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{key}: must not be negative, got {value!r}")
        if key.endswith(("Weight", "minScore", "lambda")) and value > 1:
            raise ValueError(f"{key}: must be between 0 and 1, got {value!r}")
    if key in ("chunking.tokens", "query.maxResults") and value < 1:
        raise ValueError(f"{key}: must be at least 1, got {value!r}")


def apply(target: Any, data: dict[str, Any], prefix: str = "") -> list[str]:
    """Merge a camelCase mapping into a settings dataclass in place; return problems found."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return [f"{prefix or 'settings'}: expected a table, got {data!r}"]
    hints = get_type_hints(type(target))
    for raw_key, value in data.items():
        key = f"{prefix}{raw_key}"
        attr = snake(str(raw_key))
        if attr not in hints:
            problems.append(f"{key}: unknown setting, ignored")
            continue
        hint = hints[attr]
        if dataclasses.is_dataclass(hint):
            problems += apply(getattr(target, attr), value, f"{key}.")
            continue
        try:
            coerced = _coerce(value, hint, key)
            _check(key, coerced)
        except ValueError as exc:
            problems.append(f"{exc}; ignored")
            continue
        setattr(target, attr, coerced)
    if prefix == "" and isinstance(target, Settings):
        problems += _check_chunking(target)
    return problems


def _check_chunking(s: Settings) -> list[str]:
    if s.chunking.overlap >= s.chunking.tokens:
        s.chunking.overlap = s.chunking.tokens // 5
        return [f"chunking.overlap must be below chunking.tokens; using {s.chunking.overlap}"]
    return []


def to_dict(s: Any) -> dict[str, Any]:
    """The camelCase mapping of a settings dataclass (secrets included: never log it)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(s):
        v = getattr(s, f.name)
        out[camel(f.name)] = to_dict(v) if dataclasses.is_dataclass(v) else copy.deepcopy(v)
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
        return {}, [f"{path}: cannot read settings ({exc}); ignored"]


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
