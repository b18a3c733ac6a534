"""The hosted rerank APIs: Voyage, Jina, and Cohere (and servers speaking Cohere's format).

Every one is ``POST {baseUrl}/rerank`` with ``Authorization: Bearer <key>`` and answers a list
of ``{"index": i, "relevance_score": s}`` items, ``index`` pointing into the request's
``documents``; they differ in field names only:

* Voyage (``https://api.voyageai.com/v1/rerank``): ``{"query", "documents", "model",
  "top_k"?}``; answer ``{"object": "list", "data": [...], "model", "usage": {"total_tokens"}}``.
  At most 1000 documents; ``truncation`` defaults to true (over-long input is cut, not refused).
* Jina (``https://api.jina.ai/v1/rerank``): ``{"model", "query", "documents", "top_n"}``;
  answer ``{"model", "results": [...], "usage": {"total_tokens"}}`` (items may also carry the
  ``document``).
* Cohere v2 (``https://api.cohere.com/v2/rerank``): ``{"model", "query", "documents",
  "top_n"}``, ``model`` required; answer ``{"id", "results": [...], "meta": {...}}``. Long
  documents are truncated at ``max_tokens_per_doc`` (4096 by default). vLLM, llama.cpp's
  server and other self-hosted rerankers offer the same shape (``cohere-compatible``).

The HTTP client with its retries, query budget and key scrubbing is the embeddings'
``RemoteClient``; this module only knows the wire formats and checks the answers: one finite
score for every document, each index once, or a ``RerankError`` (the engine then keeps the
fused order).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..embeddings.remote import ProviderStats, RemoteClient, RemoteError
from ..settings import RemoteSettings, RerankSettings
from .base import MAX_DOCUMENT_CHARS, RerankError, RerankUnavailable


class RemoteReranker:
    """Base of the hosted rerankers; subclasses set the wire format's names."""

    id = "remote"
    default_base_url = ""
    default_model = ""
    results_key = "results"  # where the answer lists its {index, relevance_score} items
    top_key = "top_n"  # the request field asking for that many results
    needs_key = True

    def __init__(self, rerank: RerankSettings, remote: RemoteSettings, api_key: str) -> None:
        if self.needs_key and not api_key:
            raise RerankUnavailable(f"{self.id}: no API key for reranking")
        self.model = rerank.model.strip() or self.default_model
        if not self.model:
            raise RerankUnavailable(f"{self.id}: no rerank model configured: set rerank.model")
        self.base_url = (rerank.base_url.strip() or self.default_base_url).rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise RerankUnavailable(
                f"{self.id}: rerank.baseUrl must be an http(s) URL"
                + ("" if self.base_url else " (none set)")
            )
        self.url = f"{self.base_url}/rerank"
        self.stats = ProviderStats()
        # The embedding provider's retries and backoff, the reranker's own budget; never the
        # embedding provider's extra headers, which may hold another service's credentials.
        policy = RemoteSettings(
            query_timeout_ms=rerank.timeout_ms,
            retries=remote.retries,
            backoff_min_ms=remote.backoff_min_ms,
            backoff_max_ms=remote.backoff_max_ms,
        )
        self.client = RemoteClient(
            f"{self.id} rerank",
            policy,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            secrets=[api_key],
            stats=self.stats,
        )

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model={self.model!r}, url={self.url!r})"

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        docs = [_prepare(d) for d in documents]  # rerank.topN (<= 100) is far below 1000
        if not docs:
            return []
        try:
            answer = self.client.post_json(self.url, self.request_body(query, docs), query=True)
            scores = self.read_scores(answer, len(docs))
        except RemoteError as exc:
            raise RerankError(str(exc)) from None
        except RerankError:
            self.stats.add(failures=1)
            raise
        self._count(answer, docs)
        return scores

    def request_body(self, query: str, documents: list[str]) -> dict[str, Any]:
        return {
            "model": self.model,
            "query": query,
            "documents": documents,
            self.top_key: len(documents),
        }

    def read_scores(self, answer: Any, count: int) -> list[float]:
        """One score per document in input order, from a decoded answer; else RerankError."""
        items = answer.get(self.results_key) if isinstance(answer, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise RerankError(f"{self.id}: answer has no {self.results_key!r} list")
        if len(items) != count:
            raise RerankError(f"{self.id}: scored {len(items)} of {count} documents")
        scores: list[float | None] = [None] * count
        for item in items:
            index, score = item.get("index"), item.get("relevance_score")
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
                raise RerankError(f"{self.id}: answer has an index out of 0..{count - 1}")
            if scores[index] is not None:
                raise RerankError(f"{self.id}: answer scores document {index} twice")
            if (
                not isinstance(score, int | float)
                or isinstance(score, bool)
                or not math.isfinite(score)
            ):
                raise RerankError(f"{self.id}: answer has a relevance_score that is no number")
            scores[index] = float(score)
        return [s for s in scores if s is not None]

    def stats_snapshot(self) -> dict[str, int]:
        return self.stats.snapshot()

    def close(self) -> None:
        self.client.close()

    def _count(self, answer: dict[str, Any], docs: list[str]) -> None:
        usage = answer.get("usage")
        tokens = usage.get("total_tokens") if isinstance(usage, dict) else None
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            self.stats.add(texts=len(docs), tokens=tokens)
        else:
            estimate = sum(len(d.encode("utf-8")) for d in docs) // 4 + len(docs)
            self.stats.add(texts=len(docs), tokens=estimate, tokens_estimated=estimate)


def _prepare(text: str) -> str:
    """What is sent for one document: capped in length, never empty (APIs refuse those)."""
    text = text[:MAX_DOCUMENT_CHARS]
    return text if text.strip() else " "


class VoyageReranker(RemoteReranker):
    id = "voyage"
    default_base_url = "https://api.voyageai.com/v1"
    default_model = "rerank-2.5"
    results_key = "data"
    top_key = "top_k"

    def request_body(self, query: str, documents: list[str]) -> dict[str, Any]:
        return {
            "query": query,
            "documents": documents,
            "model": self.model,
            "top_k": len(documents),
        }


class JinaReranker(RemoteReranker):
    id = "jina"
    default_base_url = "https://api.jina.ai/v1"
    default_model = "jina-reranker-v2-base-multilingual"


class CohereReranker(RemoteReranker):
    id = "cohere"
    default_base_url = "https://api.cohere.com/v2"
    default_model = "rerank-v3.5"


class CohereCompatibleReranker(CohereReranker):
    """A self-hosted server with Cohere's format: its URL and model are the user's, and it
    gets ``rerank.apiKey`` only, never a hosted provider's key from the environment."""

    id = "cohere-compatible"
    default_base_url = ""
    default_model = ""
    needs_key = False


REMOTE_RERANKERS: dict[str, type[RemoteReranker]] = {
    cls.id: cls for cls in (VoyageReranker, JinaReranker, CohereReranker, CohereCompatibleReranker)
}
