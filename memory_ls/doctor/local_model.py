"""The local embedding models: which are pulled, which one this workspace's settings use."""

from __future__ import annotations

from .check import FAIL, OK, WARN, Check, Env


def check_models(env: Env) -> Check:
    from ..embeddings.base import ProviderUnavailable
    from ..embeddings.local import find_local_model
    from ..models import registry
    from ..models.gguf_meta import GgufError, check_complete

    entries = registry.list_models()
    pulled = [e for e in entries if e.installed]
    detail = f"model folder: {registry.default_model_dir()}\n" + "\n".join(
        f"{e.name}: {'pulled' if e.installed else 'not pulled'}" for e in entries
    )
    s = env.settings
    if s.provider not in ("auto", "local"):
        names = ", ".join(e.name for e in pulled) or "none"
        return Check(
            "models", OK, f"provider {s.provider!r} needs no local model (pulled: {names})", detail
        )
    try:
        active = find_local_model(s)
    except ProviderUnavailable as exc:
        name = s.local.model.strip()
        fix = f"memory-ls model pull {name}" if name else "set local.modelPath to a GGUF file"
        return Check("models", FAIL, str(exc), detail, fix)
    if active is None:
        status = FAIL if s.provider == "local" else WARN
        summary = "no model pulled: search is keyword-only (or remote, with an API key)"
        return Check("models", status, summary, detail, "memory-ls model pull")
    try:
        check_complete(active)
    except (GgufError, OSError) as exc:
        fix = (
            f"memory-ls model pull {active.stem}"
            if active.stem in registry.MODELS
            else ("import the model again: memory-ls model import SOURCE")
        )
        return Check("models", FAIL, f"{active} is damaged: {exc}", detail, fix)
    return Check("models", OK, f"active: {active.stem} ({active})", detail)
