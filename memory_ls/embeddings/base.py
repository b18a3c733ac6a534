"""The embedding provider protocol shared by the local model and the remote APIs, and the
optional batch capability some remote APIs add to it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..settings import RemoteSettings

# on_vectors(start, vectors): vectors for texts[start : start + len(vectors)], as they arrive
OnVectors = Callable[[int, np.ndarray], None]


class EmbeddingError(Exception):
    """An embedding request failed; the message names the provider and never holds a secret."""


class ProviderUnavailable(EmbeddingError):
    """The provider cannot be used at all (no model file, no key, library missing)."""


# Local models run on llama.cpp, which memory-ls installs only with its `local` extra: pip, pipx
# and uv compile it from source, and a plain install stays seconds long without it.
NO_LLAMA_CPP = (
    "llama-cpp-python is not installed: run `memory-ls model pull`, which builds it for this "
    "CPU, or install memory-ls with its local extra (`memory-ls[local]`)"
)


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns text into unit-length float32 vectors.

    ``provider_key`` fingerprints everything besides id and model that changes the vectors
    (endpoint, requested dimensions, model file hash); it never contains a secret.
    ``max_input_tokens`` / ``max_input_bytes`` bound a single input: the chunker re-splits
    anything larger. ``dims`` may be 0 until the first call for remote providers.
    """

    id: str
    model: str
    provider_key: str
    dims: int
    max_input_tokens: int
    max_input_bytes: int

    def embed_query(self, text: str) -> np.ndarray:
        """One query vector, shape (dims,). Fast-fails: a search falls back to keywords."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Document vectors, shape (len(texts), dims), in input order."""
        ...

    def close(self) -> None: ...


class Batcher(Protocol):
    """A provider's asynchronous batch API, as a backfill uses it (``batch.BatchEmbedder``)."""

    def should_use(self, count: int) -> bool:
        """Whether ``count`` texts are worth a batch job (``remote.batchApiMinTexts``)."""
        ...

    def embed(self, texts: Sequence[str], on_vectors: OnVectors | None = None) -> np.ndarray:
        """Vectors for ``texts`` in order; each piece goes to ``on_vectors`` as it arrives."""
        ...


@runtime_checkable
class BatchCapable(Protocol):
    """A provider that may offer an asynchronous batch API (the remote ones)."""

    def batch_embedder(self, remote: RemoteSettings) -> Batcher | None:
        """Its batch embedder, or None when its API has no batch endpoint."""
        ...


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim == 1:
        n = float(np.linalg.norm(v))
        return v / n if n > 0 else v
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (v / norms).astype(np.float32)


def check_vectors(provider: str, vectors: np.ndarray, count: int, dims: int = 0) -> np.ndarray:
    """Validate a provider's answer: count, dimensions and finite numbers."""
    if vectors.ndim != 2 or vectors.shape[0] != count:
        raise EmbeddingError(f"{provider}: expected {count} vectors, got shape {vectors.shape}")
    if dims and vectors.shape[1] != dims:
        raise EmbeddingError(f"{provider}: expected {dims} dimensions, got {vectors.shape[1]}")
    if not np.isfinite(vectors).all():
        raise EmbeddingError(f"{provider}: response holds non-finite numbers")
    return normalize(vectors)
