"""The base of the hosted embedding providers and the helpers that read their answers.

Every remote provider (OpenAI and its compatibles, Ollama, Gemini, Voyage, Mistral) is a
``RemoteProvider`` subclass that only knows its wire format: the URL, the request body and how
to read vectors out of the answer. The base owns batching into requests of ``remote.batchSize``,
answer validation (vector count, order by ``index``, consistent dimensions, finite numbers),
usage counting and the fingerprint of what changes the vectors; the HTTP client with its
retries and timeouts is ``remote.RemoteClient``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..settings import RemoteSettings
from .base import Batcher, EmbeddingError, ProviderUnavailable, check_vectors
from .remote import ProviderStats, RemoteClient


def fingerprint(**parts: Any) -> str:
    """A short stable hash of what changes the vectors (never pass a secret here)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def normalize_base_url(url: str) -> str:
    return url.strip().rstrip("/")


def to_matrix(provider: str, rows: Any, count: int, dims: int = 0) -> np.ndarray:
    """Vectors from a decoded answer as validated, unit-length float32 rows."""
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise EmbeddingError(f"{provider}: answer holds no list of vectors")
    if len(rows) != count:
        raise EmbeddingError(f"{provider}: expected {count} vectors, got {len(rows)}")
    lengths = {len(r) for r in rows}
    if len(lengths) > 1:
        raise EmbeddingError(
            f"{provider}: vectors of different dimensions in one answer: {sorted(lengths)}"
        )
    if lengths == {0}:
        raise EmbeddingError(f"{provider}: answer holds empty vectors")
    try:
        matrix = np.asarray(rows, dtype=np.float64)
    except (TypeError, ValueError):
        raise EmbeddingError(f"{provider}: answer holds values that are not numbers") from None
    return check_vectors(provider, matrix, count, dims)


def rows_by_index(provider: str, items: Any, count: int, key: str = "embedding") -> list[Any]:
    """The ``key`` of each item of an OpenAI-style ``data`` list, in ``index`` order."""
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise EmbeddingError(f"{provider}: answer has no 'data' list")
    if len(items) != count:
        raise EmbeddingError(f"{provider}: expected {count} vectors, got {len(items)}")
    indexes = [i.get("index") for i in items]
    if all(isinstance(i, int) and not isinstance(i, bool) for i in indexes):
        if sorted(indexes) != list(range(count)):
            raise EmbeddingError(f"{provider}: answer indexes are not 0..{count - 1}")
        items = sorted(items, key=lambda i: i["index"])
    elif any(i is not None for i in indexes):
        raise EmbeddingError(f"{provider}: answer has malformed 'index' fields")
    return [i.get(key) for i in items]


class RemoteProvider:
    """Base of the HTTP providers; subclasses define the wire format.

    Subclass hooks: ``_url(query)``, ``request_body(texts, query)``, ``_parse(answer, count)``
    which returns ``(rows, tokens or None)``, and ``_auth_headers(api_key)``.

    The public names beyond ``EmbeddingProvider`` are what a batch embedder drives (see
    ``batch.BatchTarget``): ``client``, ``prepare``, ``request_body``, ``read_vectors``,
    ``base_url``, ``dimensions``, ``batch_size``; ``batch_embedder`` picks the batch API.
    """

    id = "remote"
    default_base_url = ""
    default_model = ""
    default_max_input_tokens = 512
    bytes_per_token = 4  # max_input_bytes = tokens * this (see each provider)
    max_batch = 2048  # the API's own limit on inputs per request
    max_request_tokens = 0  # the API's limit on a request's tokens summed over inputs (0: none)
    needs_key = True

    def __init__(
        self,
        remote: RemoteSettings | None = None,
        *,
        model: str = "",
        api_key: str = "",
    ) -> None:
        remote = remote or RemoteSettings()
        if self.needs_key and not api_key:
            raise ProviderUnavailable(f"{self.id}: no API key (set its environment variable)")
        self.model = self._normalize_model(model.strip() or self.default_model)
        if not self.model:
            raise ProviderUnavailable(f"{self.id}: no model configured: set `model`")
        self.base_url = normalize_base_url(remote.base_url or self.default_base_url)
        if not self.base_url.startswith(("http://", "https://")):
            raise ProviderUnavailable(
                f"{self.id}: remote.baseUrl must be an http(s) URL"
                + ("" if self.base_url else " (none set)")
            )
        self.dimensions = max(0, int(remote.dimensions))
        self.dims = self.dimensions
        self.max_input_tokens = int(remote.max_input_tokens) or self.default_max_input_tokens
        self.max_input_bytes = self.max_input_tokens * self.bytes_per_token
        self.batch_size = max(1, min(int(remote.batch_size), self.max_batch))
        self.provider_key = fingerprint(
            provider=self.id,
            base_url=self.base_url,
            model=self.model,
            dimensions=self.dimensions,
            format=self._format_version(),
        )
        self.stats = ProviderStats()
        self._dims_lock = threading.Lock()
        self.client = RemoteClient(
            self.id,
            remote,
            headers=self._auth_headers(api_key) if api_key else {},
            secrets=[api_key],
            stats=self.stats,
        )

    def __repr__(self) -> str:  # never show the key
        return (
            f"{type(self).__name__}(id={self.id!r}, model={self.model!r}, "
            f"base_url={self.base_url!r}, dims={self.dims})"
        )

    # -- the EmbeddingProvider protocol ---------------------------------------------------

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text], query=True)[0]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        parts = [self._embed(batch, query=False) for batch in self._batches(texts)]
        return parts[0] if len(parts) == 1 else np.vstack(parts)

    def _batches(self, texts: list[str]) -> Iterator[list[str]]:
        """Requests of at most ``batch_size`` texts and, where the API caps a request's
        summed tokens (OpenAI: 300,000, refused with a 400 that retries cannot cure), at most
        that many, counted from bytes like the per-input limit."""
        budget = self.max_request_tokens * self.bytes_per_token
        batch: list[str] = []
        size = 0
        for text in texts:
            n = len(text.encode("utf-8", "surrogatepass"))
            if batch and (len(batch) >= self.batch_size or (budget and size + n > budget)):
                yield batch
                batch, size = [], 0
            batch.append(text)
            size += n
        if batch:
            yield batch

    def close(self) -> None:
        self.client.close()

    # -- what batch embedders use -----------------------------------------------------------

    def batch_embedder(self, remote: RemoteSettings) -> Batcher | None:
        """This provider's asynchronous batch API, or None: most servers have none."""
        return None

    @staticmethod
    def prepare(texts: Sequence[str]) -> list[str]:
        """``texts`` as sent: most APIs refuse empty strings, so an empty chunk is a blank."""
        return [t if t and t.strip() else " " for t in texts]

    def request_body(self, texts: list[str], query: bool) -> dict[str, Any]:
        """The JSON body embedding ``texts`` (prepared) at the synchronous endpoint."""
        raise NotImplementedError  # pragma: no cover - each provider defines its format

    def read_vectors(self, answer: Any, texts: Sequence[str]) -> np.ndarray:
        """Validated vectors from a decoded answer for ``texts``; counts usage."""
        try:
            if not isinstance(answer, dict):
                raise EmbeddingError(f"{self.id}: answer is not a JSON object")
            rows, tokens = self._parse(answer, len(texts))
            vectors = to_matrix(self.id, rows, len(texts), self.dims)
            with self._dims_lock:
                if not self.dims:
                    self.dims = int(vectors.shape[1])
                elif vectors.shape[1] != self.dims:  # a concurrent first call saw other dims
                    raise EmbeddingError(
                        f"{self.id}: expected {self.dims} dimensions, got {vectors.shape[1]}"
                    )
        except EmbeddingError:
            self.stats.add(failures=1)
            raise
        if tokens is None:
            estimate = sum(len(t.encode("utf-8")) for t in texts) // 4 + len(texts)
            self.stats.add(texts=len(texts), tokens=estimate, tokens_estimated=estimate)
        else:
            self.stats.add(texts=len(texts), tokens=int(tokens))
        return vectors

    # -- shared machinery ----------------------------------------------------------------

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        texts = self.prepare(texts)
        answer = self.client.post_json(
            self._url(query), self.request_body(texts, query), query=query
        )
        return self.read_vectors(answer, texts)

    def _format_version(self) -> str:
        return "1"

    def _normalize_model(self, model: str) -> str:
        return model

    def _auth_headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def _url(self, query: bool) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _parse(self, answer: dict[str, Any], count: int) -> tuple[Any, int | None]:
        raise NotImplementedError  # pragma: no cover


def usage_tokens(answer: Mapping[str, Any], *names: str) -> int | None:
    """The first integer among ``answer["usage"][name]`` for ``names``, if any."""
    usage = answer.get("usage")
    if isinstance(usage, dict):
        for name in names:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None
