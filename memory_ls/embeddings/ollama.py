"""Ollama's native embedding endpoint.

``POST {baseUrl}/api/embed`` with ``{"model": ..., "input": [...], "truncate": true,
"dimensions"?: n}``; the answer is ``{"model": ..., "embeddings": [[...], ...],
"prompt_eval_count": n, ...}`` with the vectors in input order. No key is needed; one set in
``remote.apiKey`` is sent as a bearer token (for an Ollama behind an authenticating proxy).
For Ollama's OpenAI-compatible endpoint set ``remote.baseUrl`` to ``http://host:11434/v1``:
the factory then uses ``openai.OllamaOpenAIProvider``.
"""

from __future__ import annotations

from typing import Any

from .remote_provider import RemoteProvider


class OllamaProvider(RemoteProvider):
    id = "ollama"
    default_base_url = "http://localhost:11434"
    default_model = "nomic-embed-text"
    # Models vary (nomic-embed-text takes 8192 tokens, all-minilm 256) and Ollama truncates
    # over-long input by default: assume 512 unless remote.maxInputTokens says otherwise.
    default_max_input_tokens = 512
    bytes_per_token = 4
    max_batch = 512
    needs_key = False

    def _url(self, query: bool) -> str:
        return f"{self.base_url}/api/embed"

    def request_body(self, texts: list[str], query: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "truncate": True}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        return body

    def _parse(self, answer: dict[str, Any], count: int) -> tuple[Any, int | None]:
        tokens = answer.get("prompt_eval_count")
        if not isinstance(tokens, int) or isinstance(tokens, bool):
            tokens = None
        return answer.get("embeddings"), tokens
