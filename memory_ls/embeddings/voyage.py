"""Voyage AI embeddings.

``POST {baseUrl}/embeddings`` with ``Authorization: Bearer <key>`` and
``{"model": ..., "input": [...], "input_type": "query" | "document",
"output_dimension"?: n}``; the answer is OpenAI-shaped:
``{"object": "list", "data": [{"object": "embedding", "embedding": [...], "index": i}],
"model": ..., "usage": {"total_tokens": n}}``. At most 1000 inputs per request.
"""

from __future__ import annotations

from typing import Any

from ..settings import RemoteSettings
from .base import Batcher
from .batch_voyage import VoyageBatchEmbedder
from .remote_provider import RemoteProvider, rows_by_index, usage_tokens


class VoyageProvider(RemoteProvider):
    id = "voyage"
    default_base_url = "https://api.voyageai.com/v1"
    default_model = "voyage-3.5"
    default_max_input_tokens = 32000
    # Voyage truncates over-long input by default (truncation: true).
    bytes_per_token = 4
    max_batch = 1000

    def batch_embedder(self, remote: RemoteSettings) -> Batcher | None:
        return VoyageBatchEmbedder(self, remote)

    def _format_version(self) -> str:
        return "input-type-1"

    def _url(self, query: bool) -> str:
        return f"{self.base_url}/embeddings"

    def request_body(self, texts: list[str], query: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "input": texts,
            "input_type": "query" if query else "document",
        }
        if self.dimensions:
            body["output_dimension"] = self.dimensions
        return body

    def _parse(self, answer: dict[str, Any], count: int) -> tuple[Any, int | None]:
        rows = rows_by_index(self.id, answer.get("data"), count)
        return rows, usage_tokens(answer, "total_tokens")
