"""Typed settings: declared once, loaded in layers, validated by name.

Layers, later wins: defaults, ``~/.config/memory-ls/config.toml``,
``<workspace>/.memory-ls.toml``, then whatever the caller merges on top (LSP
``initializationOptions`` and ``workspace/configuration``).
Keys are camelCase in every layer (``query.maxResults``) and snake_case on the dataclasses.
An unknown key or a bad value is reported by name and ignored: never fatal.

``schema`` declares every setting (type, default, bounds, choices, description) with
``spec.setting()``; ``loading`` validates and layers them; ``docs`` writes the manual's tables
(``python -m memory_ls.docgen``).
"""

from .loading import UNREADABLE, apply, cache_dir, load, read_toml, to_dict, user_config_path
from .query import (
    RERANK_PROVIDERS,
    DecaySettings,
    HybridSettings,
    MmrSettings,
    QuerySettings,
    RerankSettings,
)
from .schema import (
    PROVIDERS,
    CacheSettings,
    ChunkingSettings,
    LocalSettings,
    MemoryRoot,
    MemorySettings,
    PostgresSettings,
    RemoteSettings,
    SessionRoot,
    SessionsSettings,
    SessionsSyncSettings,
    SessionWriterSettings,
    Settings,
    StoreSettings,
    SyncSettings,
)
from .spec import Leaf, Spec, camel, leaves, setting, snake

__all__ = [
    "PROVIDERS",
    "RERANK_PROVIDERS",
    "UNREADABLE",
    "CacheSettings",
    "ChunkingSettings",
    "DecaySettings",
    "HybridSettings",
    "Leaf",
    "LocalSettings",
    "MemoryRoot",
    "MemorySettings",
    "MmrSettings",
    "PostgresSettings",
    "QuerySettings",
    "RemoteSettings",
    "RerankSettings",
    "SessionRoot",
    "SessionWriterSettings",
    "SessionsSettings",
    "SessionsSyncSettings",
    "Settings",
    "Spec",
    "StoreSettings",
    "SyncSettings",
    "apply",
    "cache_dir",
    "camel",
    "leaves",
    "load",
    "read_toml",
    "setting",
    "snake",
    "to_dict",
    "user_config_path",
]
