"""Provider policy: which embedding provider answers, and what happens when it fails.

Indexing failures switch to ``settings.fallback`` once (the indexer then rebuilds safely);
a failed query embedding answers with keywords and is not retried for a cooldown, so a dead
endpoint does not cost every search its timeout. Query vectors are kept in a small LRU: a
repeated query (a retried search, an agent asking again, ``workspace/symbol`` after
``memory/search``) skips the model, which is most of a small workspace's hybrid search.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from ..embeddings.base import EmbeddingError, EmbeddingProvider
from ..embeddings.factory import create_fallback, create_provider
from ..settings import Settings

log = logging.getLogger(__name__)
AUTO: Any = object()  # "pick the provider from the settings"
QUERY_FAILURE_COOLDOWN_S = 30.0
# Above this share of [UNK] tokens a query's vector is noise (an English model, a Chinese query).
MAX_UNKNOWN_QUERY_TOKENS = 0.25
# Query vectors remembered (384 floats each for MiniLM: 256 of them are 400 KB).
QUERY_CACHE_SIZE = 256


class ProviderPolicy:
    def __init__(
        self,
        settings: Settings,
        provider: EmbeddingProvider | None = AUTO,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._settings = settings
        self._clock = clock
        if provider is AUTO:
            provider, self.reason = create_provider(settings)
        else:
            self.reason = None if provider else "no embedding provider: keyword-only"
        self.current: EmbeddingProvider | None = provider
        self.fallback_reason: str | None = None  # why the fallback provider answers
        self._on_fallback = False
        self._query_retry_at = 0.0
        self._query_failure: str | None = None
        # (provider id, model, provider key, query) -> vector; read-only arrays, shared.
        self._query_cache: OrderedDict[tuple[str, str, str, str], np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()

    def switch_to_fallback(self, exc: Exception) -> bool:
        """Make ``settings.fallback`` the provider after the current one failed (once)."""
        if self._on_fallback:
            return False
        fallback = create_fallback(self._settings, self.current)
        if fallback is None:
            return False
        old = self.current
        self.fallback_reason = (
            f"{old.id if old else 'primary'} failed ({exc}); switched to fallback {fallback.id}"
        )
        log.warning("%s", self.fallback_reason)
        self.current = fallback
        self._on_fallback = True
        if old is not None:
            with contextlib.suppress(Exception):  # closing is best effort
                old.close()
        return True

    def embedding_failed(self, exc: Exception) -> None:
        """Indexing failed and there is no fallback: keyword search still works."""
        self.fallback_reason = f"embedding failed: {exc}"
        log.warning("%s; keyword search still works", self.fallback_reason)

    def cached_vector(self, query: str) -> np.ndarray | None:
        """The query's vector if a search embedded it recently with the current provider."""
        provider = self.current
        if provider is None:
            return None
        with self._cache_lock:
            return self._query_cache.get(self._cache_key(provider, query))

    @staticmethod
    def _cache_key(provider: EmbeddingProvider, query: str) -> tuple[str, str, str, str]:
        return (provider.id, provider.model, provider.provider_key, query)

    def query_vector(self, query: str) -> tuple[np.ndarray | None, str | None]:
        """(the query's vector or None, why there is none). Call only with a provider."""
        provider = self.current
        assert provider is not None
        key = self._cache_key(provider, query)
        with self._cache_lock:
            cached = self._query_cache.get(key)
            if cached is not None:
                self._query_cache.move_to_end(key)
                return cached, None
        unknown = unknown_ratio(provider, query)
        if unknown > MAX_UNKNOWN_QUERY_TOKENS:
            return None, (
                f"the embedding model does not know {unknown:.0%} of this query's tokens; "
                "keyword results only"
            )
        if self._clock() < self._query_retry_at:
            return None, self._query_failure
        try:
            vec = provider.embed_query(query)
        except EmbeddingError as exc:
            self._query_retry_at = self._clock() + QUERY_FAILURE_COOLDOWN_S
            self._query_failure = f"query embedding failed ({exc}); keyword results only"
            log.warning("%s", self._query_failure)
            return None, self._query_failure
        self._query_failure = None
        vec.flags.writeable = False  # shared by every search that repeats the query
        with self._cache_lock:
            self._query_cache[key] = vec
            while len(self._query_cache) > QUERY_CACHE_SIZE:
                self._query_cache.popitem(last=False)
        return vec, None

    def close(self) -> None:
        if self.current is not None:
            with contextlib.suppress(Exception):  # closing is best effort
                self.current.close()


def unknown_ratio(provider: EmbeddingProvider, text: str) -> float:
    """The share of the text's tokens the model cannot read (0 when it cannot tell)."""
    check = getattr(provider, "unknown_ratio", None)  # only the local model can tell
    if check is None:
        return 0.0
    try:
        return float(check(text))
    except EmbeddingError:
        return 0.0


def readable(provider: EmbeddingProvider, text: str) -> bool:
    """The model reads enough of the text for its vector to mean something."""
    return unknown_ratio(provider, text) <= MAX_UNKNOWN_QUERY_TOKENS
