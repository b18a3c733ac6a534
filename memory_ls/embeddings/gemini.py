"""Google Gemini API embeddings (``generativelanguage.googleapis.com``).

A query: ``POST {baseUrl}/models/{model}:embedContent`` with
``{"model": "models/{model}", "content": {"parts": [{"text": ...}]},
"taskType": "RETRIEVAL_QUERY", "outputDimensionality"?: n}``, answered by
``{"embedding": {"values": [...]}}``.

Documents: ``POST {baseUrl}/models/{model}:batchEmbedContents`` with
``{"requests": [<the same request per text, taskType RETRIEVAL_DOCUMENT>, ...]}``, answered by
``{"embeddings": [{"values": [...]}, ...]}`` in request order (at most 100 per call).

The key travels in the ``x-goog-api-key`` header, never in the URL.
"""

from __future__ import annotations

from typing import Any

from ..settings import RemoteSettings
from .base import Batcher, EmbeddingError
from .batch_gemini import GeminiBatchEmbedder
from .remote_provider import RemoteProvider


class GeminiProvider(RemoteProvider):
    id = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    default_model = "gemini-embedding-001"
    default_max_input_tokens = 2048
    # Over-long input is truncated by the API; 4 bytes a token keeps most of a chunk.
    bytes_per_token = 4
    max_batch = 100

    def _normalize_model(self, model: str) -> str:
        return model[len("models/") :] if model.startswith("models/") else model

    def _auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-goog-api-key": api_key}

    def batch_embedder(self, remote: RemoteSettings) -> Batcher | None:
        return GeminiBatchEmbedder(self, remote)

    def _format_version(self) -> str:
        return "retrieval-task-types-1"

    def _url(self, query: bool) -> str:
        verb = "embedContent" if query else "batchEmbedContents"
        return f"{self.base_url}/models/{self.model}:{verb}"

    def content_request(self, text: str, task: str) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": f"models/{self.model}",
            "content": {"parts": [{"text": text}]},
            "taskType": task,
        }
        if self.dimensions:
            request["outputDimensionality"] = self.dimensions
        return request

    def request_body(self, texts: list[str], query: bool) -> dict[str, Any]:
        if query:
            return self.content_request(texts[0], "RETRIEVAL_QUERY")
        return {"requests": [self.content_request(t, "RETRIEVAL_DOCUMENT") for t in texts]}

    def _parse(self, answer: dict[str, Any], count: int) -> tuple[Any, int | None]:
        items = [answer["embedding"]] if "embedding" in answer else answer.get("embeddings")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise EmbeddingError(f"{self.id}: answer has no 'embedding' / 'embeddings'")
        return [i.get("values") for i in items], None
