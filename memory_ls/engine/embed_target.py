"""Where the vector phase writes, and how rows are written: shared by the local indexer and the
team index."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

from ..chunking import ChunkLimits
from ..embeddings.base import EmbeddingProvider
from ..index.backend import IndexBackend
from ..index.sync import IndexContext
from ..index.writes import VectorUpdate
from ..settings import Settings
from ..workspace import Workspace


@dataclass(frozen=True)
class EmbedTarget:
    """A store, the lock its writer is used under, and the context rows are written with."""

    store: IndexBackend
    lock: AbstractContextManager[object]
    ctx: IndexContext


def index_context(
    settings: Settings,
    workspace: Workspace,
    provider: EmbeddingProvider | None,
    on_vectors: VectorUpdate | None = None,
) -> IndexContext:
    """How files are chunked and which vectors they may reuse, for the current provider."""
    limits = ChunkLimits.for_model(
        settings.chunking.tokens,
        settings.chunking.overlap,
        provider.max_input_tokens if provider else 0,
        provider.max_input_bytes if provider else 0,
    )
    return IndexContext(
        workspace=workspace,
        limits=limits,
        cache_key=(provider.id, provider.model, provider.provider_key) if provider else None,
        cache_enabled=settings.cache.enabled,
        max_file_bytes=settings.max_file_bytes,
        on_vectors=on_vectors,
    )
