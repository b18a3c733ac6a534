"""Choose the embedding provider for a workspace: explicit, auto, or none (keyword-only).

``provider = "auto"`` tries, in order: a local model (configured or found), then OpenAI,
Gemini, Voyage and Mistral by available API key (``OPENAI_API_KEY``, ``GEMINI_API_KEY``,
``VOYAGE_API_KEY``, ``MISTRAL_API_KEY``; ``remote.apiKey`` counts as OpenAI's, being first),
then none: keyword-only search. An explicit provider uses ``remote.apiKey`` or else its own
environment variable; ``openai-compatible`` and ``ollama`` use ``remote.apiKey`` only, so a
hosted key is never sent to a server it does not belong to.

``remote.*`` settings (baseUrl, apiKey, headers, dimensions, maxInputTokens) and ``model``
belong to the primary provider. The fallback (``fallback = "..."``) uses them only when the
primary is not a remote API; otherwise it runs with its own defaults (default model, default
base URL, key from its environment variable), keeping the primary's timeouts and retries.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping

from ..settings import RemoteSettings, Settings
from .base import EmbeddingError, EmbeddingProvider, ProviderUnavailable

log = logging.getLogger(__name__)

ENV_KEYS: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "voyage": "VOYAGE_API_KEY",
    "mistral": "MISTRAL_API_KEY",
}
AUTO_REMOTE_ORDER = ("openai", "gemini", "voyage", "mistral")
REMOTE_PROVIDERS = ("openai", "openai-compatible", "ollama", "gemini", "voyage", "mistral")
_NO_MODEL = "no embedding model found: run `memory-ls model pull` for hybrid search"


def api_key_for(name: str, settings: Settings, env: Mapping[str, str] | None = None) -> str:
    """The key a provider would use: ``remote.apiKey``, else its environment variable."""
    if settings.remote.api_key:
        return settings.remote.api_key
    var = ENV_KEYS.get(name)
    return (os.environ if env is None else env).get(var, "").strip() if var else ""


def open_remote(name: str, settings: Settings) -> EmbeddingProvider:
    """A remote provider from ``settings``; raises ``ProviderUnavailable`` if it cannot be."""
    remote = settings.remote
    key = api_key_for(name, settings)
    if name in ENV_KEYS and not key:
        raise ProviderUnavailable(f"{name}: no API key: set {ENV_KEYS[name]} or remote.apiKey")
    model = settings.model
    if name == "openai":
        from .openai import OpenAIProvider

        return OpenAIProvider(remote, model=model, api_key=key)
    if name == "mistral":
        from .openai import MistralProvider

        return MistralProvider(remote, model=model, api_key=key)
    if name == "openai-compatible":
        from .openai import OpenAICompatibleProvider

        return OpenAICompatibleProvider(remote, model=model, api_key=key)
    if name == "ollama":
        if remote.base_url.strip().rstrip("/").endswith("/v1"):
            from .openai import OllamaOpenAIProvider

            return OllamaOpenAIProvider(remote, model=model, api_key=key)
        from .ollama import OllamaProvider

        return OllamaProvider(remote, model=model, api_key=key)
    if name == "gemini":
        from .gemini import GeminiProvider

        return GeminiProvider(remote, model=model, api_key=key)
    if name == "voyage":
        from .voyage import VoyageProvider

        return VoyageProvider(remote, model=model, api_key=key)
    raise ProviderUnavailable(f"unknown embedding provider {name!r}")


def _open_local(settings: Settings) -> tuple[EmbeddingProvider | None, str | None]:
    """(provider, None), or (None, why not) when no model is configured or found.

    Raises when a model exists but fails to load (the caller decides what that means)."""
    try:
        from .local import find_local_model, open_local
    except ImportError as exc:
        return None, f"local embeddings unavailable ({exc})"
    path = find_local_model(settings)
    if path is None:
        return None, "no local model: set local.modelPath or run `memory-ls model pull`"
    return open_local(path, settings), None


def _auto(
    settings: Settings, exclude: frozenset[str] = frozenset()
) -> tuple[EmbeddingProvider | None, str | None]:
    reasons: list[str] = []
    if "local" not in exclude:
        try:
            provider, why = _open_local(settings)
            if provider is not None:
                return provider, None
        except Exception as exc:  # a broken model file must not stop the remote options
            log.warning("local embedding model failed to start: %s", exc)
            reasons.append(f"local model failed to start: {type(exc).__name__}: {exc}")
    for name in AUTO_REMOTE_ORDER:
        if name in exclude or not api_key_for(name, settings):
            continue
        try:
            return open_remote(name, settings), None
        except EmbeddingError as exc:
            reasons.append(str(exc))
    if reasons:
        return None, "; ".join(reasons)
    keys = ", ".join(ENV_KEYS[n] for n in AUTO_REMOTE_ORDER)
    return None, f"{_NO_MODEL}, or set one of {keys}"


def _create(
    name: str, settings: Settings, exclude: frozenset[str] = frozenset()
) -> tuple[EmbeddingProvider | None, str | None]:
    if name == "none":
        return None, "provider is 'none': keyword-only search"
    try:
        if name == "auto":
            return _auto(settings, exclude)
        if name == "local":
            return _open_local(settings)
        if name in REMOTE_PROVIDERS:
            return open_remote(name, settings), None
        return None, f"unknown embedding provider {name!r}"
    except EmbeddingError as exc:
        return None, str(exc)
    except Exception as exc:  # a broken model must never take search down
        log.warning("embedding provider %s failed to start: %s", name, exc)
        return None, f"{name} provider failed to start: {type(exc).__name__}: {exc}"


def create_provider(settings: Settings) -> tuple[EmbeddingProvider | None, str | None]:
    """Return (provider, None) or (None, why there is none). Never raises."""
    return _create(settings.provider, settings)


def fallback_settings(settings: Settings, primary_id: str | None = None) -> Settings:
    """The settings the fallback provider runs with (see the module docstring)."""
    fb = copy.deepcopy(settings)
    fb.provider = settings.fallback
    primary = primary_id or settings.provider
    if primary in REMOTE_PROVIDERS:
        old = settings.remote
        fb.remote = RemoteSettings(
            query_timeout_ms=old.query_timeout_ms,
            batch_timeout_ms=old.batch_timeout_ms,
            batch_size=old.batch_size,
            retries=old.retries,
            backoff_min_ms=old.backoff_min_ms,
            backoff_max_ms=old.backoff_max_ms,
        )
        fb.model = ""
    return fb


def create_fallback(
    settings: Settings, primary: EmbeddingProvider | None = None
) -> EmbeddingProvider | None:
    """The provider named by ``settings.fallback``, or None (none configured, same as the
    primary, or unavailable: the reason is logged). Never raises.

    ``fallback = "auto"`` runs the auto order, skipping the primary's kind."""
    name = settings.fallback
    primary_id = primary.id if primary is not None else None
    if name in ("", "none") or name in (settings.provider, primary_id):
        return None
    fb = fallback_settings(settings, primary_id)
    exclude = frozenset(x for x in (settings.provider, primary_id) if x)
    provider, why = _create(name, fb, exclude)
    if provider is None:
        log.warning("fallback embedding provider %s unavailable: %s", name, why)
    elif primary_id is not None and provider.id == primary_id:
        provider.close()
        return None
    return provider


__all__ = [
    "AUTO_REMOTE_ORDER",
    "ENV_KEYS",
    "REMOTE_PROVIDERS",
    "api_key_for",
    "create_fallback",
    "create_provider",
    "fallback_settings",
    "open_remote",
]
