"""Reranking: a cross-encoder re-scores the best fused candidates of a search.

``base`` holds the ``Reranker`` protocol and its errors, ``remote`` the hosted APIs (Voyage,
Jina, Cohere and Cohere-compatible servers, over the embeddings' ``RemoteClient``), ``local`` a
GGUF reranker run by llama.cpp, ``factory`` the choice from ``rerank.*`` settings. The engine
decides when to rerank and what a failure means (``engine/reranking.py``).
"""

from .base import MAX_DOCUMENT_CHARS, Reranker, RerankError, RerankUnavailable
from .factory import ENV_KEYS, create_reranker, rerank_key

__all__ = [
    "ENV_KEYS",
    "MAX_DOCUMENT_CHARS",
    "RerankError",
    "RerankUnavailable",
    "Reranker",
    "create_reranker",
    "rerank_key",
]
