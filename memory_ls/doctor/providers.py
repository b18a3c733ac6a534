"""Remote embedding providers: whether the one the settings would use has its API key (named,
never shown), and with ``--online`` one tiny embedding request to it."""

from __future__ import annotations

import os

from .check import FAIL, OK, Check, Env


def _remote_in_use(env: Env) -> str | None:
    """The remote provider the settings would embed with, or None (local, none, no key)."""
    from ..embeddings.factory import AUTO_REMOTE_ORDER, REMOTE_PROVIDERS, api_key_for

    s = env.settings
    for name in (s.provider, s.fallback):
        if name in REMOTE_PROVIDERS:
            return name
        if name == "auto" and not _local_model(env):
            return next((n for n in AUTO_REMOTE_ORDER if api_key_for(n, s)), None)
    return None


def _local_model(env: Env) -> bool:
    from ..embeddings.base import ProviderUnavailable
    from ..embeddings.local import find_local_model

    try:
        return find_local_model(env.settings) is not None
    except ProviderUnavailable:
        return False


def check_providers(env: Env) -> Check:
    from ..embeddings.factory import ENV_KEYS, api_key_for

    s = env.settings
    keys = [var for var in ENV_KEYS.values() if os.environ.get(var, "").strip()]
    if s.remote.api_key:
        keys.append("remote.apiKey (settings)")
    detail = f"API keys present: {', '.join(keys) or 'none'} (values never shown)"
    name = _remote_in_use(env)
    if name is None:
        return Check("providers", OK, "no remote provider in use", detail)
    var = ENV_KEYS.get(name)
    if var and not api_key_for(name, s):
        fix = f"export {var}=... (or set remote.apiKey)"
        return Check("providers", FAIL, f"{name}: no API key", detail, fix)
    if name == "openai-compatible" and not s.remote.base_url.strip():
        fix = "set remote.baseUrl to the server's OpenAI-compatible API"
        return Check("providers", FAIL, f"{name}: no remote.baseUrl", detail, fix)
    if not env.online:
        return Check("providers", OK, f"{name}: key present (--online sends one request)", detail)
    return _online(env, name, detail)


def _online(env: Env, name: str, detail: str) -> Check:
    """One embedding of a short text: the key, the URL and the model, tried for real."""
    from ..embeddings.factory import api_key_for, open_remote

    key = api_key_for(name, env.settings)
    try:
        provider = open_remote(name, env.settings)
        try:
            vector = provider.embed_query("memory-ls doctor")
        finally:
            provider.close()
    except Exception as exc:  # every failure is the finding
        said = f"{type(exc).__name__}: {exc}"
        said = said.replace(key, "***") if key else said
        fix = "check the key, remote.baseUrl and the model the detail names"
        return Check("providers", FAIL, f"{name}: the test request failed: {said}", detail, fix)
    model = getattr(provider, "model", "") or env.settings.model or "its default model"
    return Check("providers", OK, f"{name}: {model} answered ({len(vector)} dims)", detail)
