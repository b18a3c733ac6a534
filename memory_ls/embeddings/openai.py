"""OpenAI embeddings, and everything that speaks the same wire format.

``POST {baseUrl}/embeddings`` with ``Authorization: Bearer <key>`` and
``{"model": ..., "input": [...], "dimensions"?: n}``; the answer is
``{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...]}, ...],
"model": ..., "usage": {"prompt_tokens": n, "total_tokens": n}}``. Vectors are put back in
input order by ``index``.

The same format serves Mistral (``mistral-embed``; its dimension field is
``output_dimension``), any OpenAI-compatible server through ``remote.baseUrl`` (vLLM, LM
Studio, llama.cpp's server, OpenRouter ...) and Ollama's ``/v1`` endpoint.
"""

from __future__ import annotations

from typing import Any

from ..settings import RemoteSettings
from .base import Batcher
from .batch_openai import OpenAIBatchEmbedder
from .remote_provider import RemoteProvider, rows_by_index, usage_tokens


class OpenAIProvider(RemoteProvider):
    id = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_model = "text-embedding-3-small"
    default_max_input_tokens = 8191
    # OpenAI rejects (400) an input over the token limit instead of truncating it: budget
    # 2 bytes a token, safe for English (~4) and CJK text (~3 bytes, 1-2 tokens a character).
    bytes_per_token = 2
    max_batch = 2048  # at most 2048 inputs per request
    max_request_tokens = 300_000  # summed over a request's inputs
    dimensions_field = "dimensions"

    def batch_embedder(self, remote: RemoteSettings) -> Batcher | None:
        return OpenAIBatchEmbedder(self, remote)

    def _url(self, query: bool) -> str:
        return f"{self.base_url}/embeddings"

    def request_body(self, texts: list[str], query: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions:
            body[self.dimensions_field] = self.dimensions
        return body

    def _parse(self, answer: dict[str, Any], count: int) -> tuple[Any, int | None]:
        rows = rows_by_index(self.id, answer.get("data"), count)
        return rows, usage_tokens(answer, "prompt_tokens", "total_tokens")


class MistralProvider(OpenAIProvider):
    id = "mistral"
    default_base_url = "https://api.mistral.ai/v1"
    default_model = "mistral-embed"
    default_max_input_tokens = 8192
    max_batch = 512
    dimensions_field = "output_dimension"  # only some models (codestral-embed) accept it

    def batch_embedder(self, remote: RemoteSettings) -> Batcher | None:
        return None  # Mistral's batch API is not OpenAI's: not supported


class OpenAICompatibleProvider(OpenAIProvider):
    """Any server with an OpenAI-style ``/embeddings``: the base URL and model are required,
    the key optional, and the input limit conservative (512 tokens) unless
    ``remote.maxInputTokens`` says otherwise: such servers often truncate silently."""

    id = "openai-compatible"
    default_base_url = ""
    default_model = ""
    default_max_input_tokens = 512
    bytes_per_token = 4
    max_batch = 512
    needs_key = False

    def batch_embedder(self, remote: RemoteSettings) -> Batcher | None:
        return None  # compatible servers have no batch API


class OllamaOpenAIProvider(OpenAICompatibleProvider):
    """Ollama through its OpenAI-compatible ``/v1/embeddings`` (``baseUrl`` ending in ``/v1``)."""

    id = "ollama"
    default_base_url = "http://localhost:11434/v1"
    default_model = "nomic-embed-text"

    def _format_version(self) -> str:
        return "openai-1"
