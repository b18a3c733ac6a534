"""The reranker protocol shared by the hosted rerank APIs and the local GGUF cross-encoder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

# The longest document text sent to a reranker, in characters: chunks are far shorter (about
# `chunking.tokens` x 4), this only bounds what a pathological chunk could cost.
MAX_DOCUMENT_CHARS = 8000


class RerankError(Exception):
    """A rerank failed; the message names the provider and never holds a secret."""


class RerankUnavailable(RerankError):
    """The reranker cannot be used at all (no key, no model file, not a reranker model)."""


@runtime_checkable
class Reranker(Protocol):
    """Scores documents against a query with a cross-encoder.

    ``rerank`` returns one relevance per document, in input order, higher is more relevant
    (0 to 1 for every provider here); it raises ``RerankError`` rather than answer partly.
    ``stats_snapshot`` counts requests, retries, failures, documents and tokens, as the
    embedding providers' ``ProviderStats`` does.
    """

    id: str
    model: str

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]: ...

    def stats_snapshot(self) -> dict[str, int]: ...

    def close(self) -> None: ...
