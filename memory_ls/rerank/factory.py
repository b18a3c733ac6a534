"""Choose the reranker for a workspace from ``rerank.*``: a hosted API, a local GGUF file, or
none. ``rerank.apiKey`` wins over the provider's environment variable (``VOYAGE_API_KEY``,
``JINA_API_KEY``, ``COHERE_API_KEY``); ``cohere-compatible`` uses ``rerank.apiKey`` only, so a
hosted key is never sent to a server it does not belong to."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from ..settings import Settings
from .base import Reranker, RerankError

log = logging.getLogger(__name__)

ENV_KEYS: dict[str, str] = {
    "voyage": "VOYAGE_API_KEY",
    "jina": "JINA_API_KEY",
    "cohere": "COHERE_API_KEY",
}


def rerank_key(name: str, settings: Settings, env: Mapping[str, str] | None = None) -> str:
    """The key a rerank provider would use: ``rerank.apiKey``, else its environment variable."""
    if settings.rerank.api_key.strip():
        return settings.rerank.api_key.strip()
    var = ENV_KEYS.get(name)
    return (os.environ if env is None else env).get(var, "").strip() if var else ""


def create_reranker(settings: Settings) -> tuple[Reranker | None, str | None]:
    """(reranker, None), or (None, why there is none; None when ``rerank.provider`` is
    ``none``). Never raises: a broken reranker must never take search down."""
    name = settings.rerank.provider
    if name == "none":
        return None, None
    try:
        if name == "local":
            from .local import open_local_reranker

            configured = settings.rerank.model_path.strip()
            if not configured:
                return None, "local rerank: set rerank.modelPath to a GGUF reranker file"
            return open_local_reranker(Path(configured).expanduser(), settings), None
        from .remote import REMOTE_RERANKERS

        cls = REMOTE_RERANKERS.get(name)
        if cls is None:
            return None, f"unknown rerank provider {name!r}"
        key = rerank_key(name, settings)
        if cls.needs_key and not key:
            return None, f"{name} rerank: no API key: set {ENV_KEYS[name]} or rerank.apiKey"
        return cls(settings.rerank, settings.remote, key), None
    except RerankError as exc:
        return None, str(exc)
    except Exception as exc:  # e.g. a model llama.cpp chokes on: search must still work
        log.warning("rerank provider %s failed to start: %s", name, exc)
        return None, f"{name} rerank failed to start: {type(exc).__name__}: {exc}"
