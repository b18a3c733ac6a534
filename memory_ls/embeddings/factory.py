"""Choose the embedding provider for a workspace: explicit, auto, or none (keyword-only)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..settings import Settings
from .base import EmbeddingError, EmbeddingProvider

log = logging.getLogger(__name__)


def create_provider(settings: Settings) -> tuple[EmbeddingProvider | None, str | None]:
    """Return (provider, None) or (None, why there is none). Never raises."""
    name = settings.provider
    if name == "none":
        return None, "provider is 'none': keyword-only search"
    try:
        if name in ("auto", "local"):
            from .local import find_local_model, open_local

            path = find_local_model(settings)
            if path is not None:
                return open_local(path, settings), None
            if name == "local":
                return None, "no local model: set local.modelPath or run `memory-ls model pull`"
        if name != "auto":
            return None, f"provider {name!r} is not built yet"
        return None, "no embedding model found: run `memory-ls model pull` for hybrid search"
    except EmbeddingError as exc:
        return None, str(exc)
    except Exception as exc:  # a broken model must never take search down
        log.warning("embedding provider %s failed to start: %s", name, exc)
        return None, f"{name} provider failed to start: {type(exc).__name__}: {exc}"


__all__ = ["create_provider", "Path"]
