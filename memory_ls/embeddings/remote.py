"""Shared plumbing for the hosted embedding APIs: HTTP client, retries, errors, validation.

Every remote provider (OpenAI and its compatibles, Ollama, Gemini, Voyage, Mistral) is a
``RemoteProvider`` subclass that only knows its wire format: the URL, the request body and how
to read vectors out of the answer. This module owns the rest:

* one ``httpx.Client`` per provider (thread-safe: the engine calls from worker threads);
* timeouts: a query has one overall budget (``remote.queryTimeoutMs``, default 2 s) that
  includes its retries, so a search falls back to keywords quickly; a document batch gets
  ``remote.batchTimeoutMs`` per attempt;
* retries on 408, 429, 5xx, connection errors and timeouts, at most ``remote.retries``, with
  exponential backoff and jitter between ``remote.backoffMinMs`` and ``remote.backoffMaxMs``,
  honouring ``Retry-After`` (seconds or HTTP date) and ``retry-after-ms``; no retry on other
  4xx (400, 401, 403, 404 ...);
* errors that name the provider and the HTTP status and never contain a secret: every message
  goes through ``redact`` with the API key and any secret-looking header values;
* response validation: vector count, order by ``index``, consistent dimensions, finite numbers.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import random
import re
import ssl
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np

from ..redact import redact as redact_patterns
from ..settings import RemoteSettings
from .base import EmbeddingError, ProviderUnavailable, check_vectors

log = logging.getLogger(__name__)

USER_AGENT = "memory-ls/0.1 (+httpx)"
# A Retry-After beyond this is not waited out: the call fails and the caller (engine) decides.
MAX_RETRY_AFTER_S = 60.0
# Statuses worth another try; every other 4xx is a caller mistake and fails at once.
TRANSIENT_STATUSES = frozenset({408, 409, 425, 429})
_MIN_ATTEMPT_S = 0.05  # do not start an attempt with less time than this left in the budget

_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|signature", re.IGNORECASE)


class RemoteError(EmbeddingError):
    """A remote embedding call failed.

    ``status`` is the HTTP status (None for timeouts and connection errors), ``transient`` says
    whether trying again later may succeed (429, 5xx, timeouts) as opposed to a configuration
    problem (401, 403, 404, 400, malformed answers), ``attempts`` how many requests were made.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        transient: bool = False,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.transient = transient
        self.attempts = attempts


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the given secrets replaced by ``***`` and anything the shared table of
    secret patterns knows (an API key of another provider, a server echoing a key back)
    replaced by ``[REDACTED:<kind>]``."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return redact_patterns(text)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``Retry-After``, or None."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            value = float(raw_ms) / 1000.0
            if value >= 0 and value == value:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        return value if value >= 0 and value == value else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = datetime.now(UTC).timestamp() if now is None else now
    return max(0.0, when.timestamp() - current)


def backoff_delay(
    attempt: int, min_s: float, max_s: float, rng: random.Random | None = None
) -> float:
    """Delay before retry number ``attempt`` (0-based): exponential with "equal jitter".

    The ceiling doubles from ``min_s`` up to ``max_s``; the delay is drawn from the upper half of
    it, and never leaves ``[min_s, max_s]``: 0.5 s, 0.5-1 s, 1-2 s, 2-4 s, 4-8 s, 4-8 s ...
    """
    max_s = max(max_s, min_s)
    ceiling = min(max_s, min_s * (2 ** max(0, attempt)))
    jitter = (rng or random).uniform(ceiling / 2, ceiling)
    return min(max_s, max(min_s, jitter))


def fingerprint(**parts: Any) -> str:
    """A short stable hash of what changes the vectors (never pass a secret here)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def normalize_base_url(url: str) -> str:
    return url.strip().rstrip("/")


@dataclass
class ProviderStats:
    """Counters for ``status`` and cost control: requests, retries, failures, texts, tokens.

    ``tokens`` is what the provider reported when it reports usage, else an estimate from the
    input size (about 4 bytes a token); ``tokens_estimated`` counts the estimated part.
    """

    requests: int = 0
    retries: int = 0
    failures: int = 0
    texts: int = 0
    tokens: int = 0
    tokens_estimated: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {
                "requests": self.requests,
                "retries": self.retries,
                "failures": self.failures,
                "texts": self.texts,
                "tokens": self.tokens,
                "tokensEstimated": self.tokens_estimated,
            }


class RemoteClient:
    """A JSON-over-HTTP client with the retry and timeout policy of the module docstring."""

    def __init__(
        self,
        provider: str,
        remote: RemoteSettings,
        *,
        headers: Mapping[str, str] | None = None,
        secrets: Iterable[str] = (),
        stats: ProviderStats | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.provider = provider
        self.retries = max(0, int(remote.retries))
        self.query_timeout_s = max(0.05, remote.query_timeout_ms / 1000.0)
        self.batch_timeout_s = max(0.05, remote.batch_timeout_ms / 1000.0)
        self.backoff_min_s = max(0.0, remote.backoff_min_ms / 1000.0)
        self.backoff_max_s = max(self.backoff_min_s, remote.backoff_max_ms / 1000.0)
        merged = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        merged.update(headers or {})
        merged.update(remote.headers or {})  # the user's extra headers win
        self._secrets = [s for s in secrets if s]
        self._secrets += [v for k, v in merged.items() if _SECRET_HEADER.search(k) and v]
        self._secrets += [v.split(None, 1)[1] for v in list(self._secrets) if " " in v.strip()]
        self.stats = stats or ProviderStats()
        self._rng = rng or random.Random()
        self._client = httpx.Client(headers=merged, follow_redirects=False, verify=_ssl_context())

    def redact(self, text: str) -> str:
        return redact(text, self._secrets)

    def post_json(self, url: str, body: Any, *, query: bool = False) -> Any:
        return self.request("POST", url, json_body=body, query=query)

    def request(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        files: Any = None,
        data: Any = None,
        query: bool = False,
        expect: str = "json",
        timeout_s: float | None = None,
    ) -> Any:
        """Send with retries; return the decoded JSON (``expect="json"``) or the raw bytes.

        ``query=True`` means one overall budget of ``queryTimeoutMs`` for all attempts.
        Raises ``RemoteError`` (an ``EmbeddingError``) on failure.
        """
        per_attempt = timeout_s or (self.query_timeout_s if query else self.batch_timeout_s)
        deadline = time.monotonic() + per_attempt if query else None
        attempts = self.retries + 1
        where = _display_url(url)
        last: RemoteError | None = None
        made = 0
        for attempt in range(attempts):
            timeout = per_attempt
            if deadline is not None:
                timeout = max(0.001, min(per_attempt, deadline - time.monotonic()))
                if made and timeout < _MIN_ATTEMPT_S:
                    break
            made += 1
            self.stats.add(requests=1)
            wait_hint: float | None = None
            try:
                response = self._client.request(
                    method, url, json=json_body, files=files, data=data, timeout=timeout
                )
            except httpx.TimeoutException:
                last = self._error(
                    f"request to {where} timed out after {timeout:.2f} s", None, True, made
                )
            except httpx.TransportError as exc:
                detail = self.redact(str(exc))[:200] or type(exc).__name__
                last = self._error(
                    f"cannot reach {where} ({type(exc).__name__}: {detail})", None, True, made
                )
            else:
                if response.status_code < 300:
                    return self._decode(response, expect, where, made)
                last = self._status_error(response, where, made)
                if not last.transient:
                    self.stats.add(failures=1)
                    raise last
                wait_hint = parse_retry_after(response.headers)
            if attempt + 1 >= attempts:
                break
            if wait_hint is not None and wait_hint > MAX_RETRY_AFTER_S:
                last = self._error(
                    f"{_strip(last)}; the server asks to wait {wait_hint:.0f} s, giving up",
                    last.status,
                    True,
                    made,
                )
                break
            wait = (
                wait_hint
                if wait_hint is not None
                else backoff_delay(attempt, self.backoff_min_s, self.backoff_max_s, self._rng)
            )
            if deadline is not None and time.monotonic() + wait + _MIN_ATTEMPT_S > deadline:
                break  # no time left for another try within the query budget
            log.info(
                "%s: %s; retry %d of %d in %.2f s",
                self.provider,
                _strip(last),
                attempt + 1,
                self.retries,
                wait,
            )
            self.stats.add(retries=1)
            time.sleep(wait)
        if last is None:  # pragma: no cover - the first attempt always runs
            last = self._error(f"no attempt made to reach {where}", None, True, made)
        self.stats.add(failures=1)
        if made > 1:
            last = self._error(f"{_strip(last)} (after {made} attempts)", last.status, True, made)
        raise last

    def close(self) -> None:
        self._client.close()

    # -- helpers -------------------------------------------------------------------------

    def _error(
        self, message: str, status: int | None, transient: bool, attempts: int
    ) -> RemoteError:
        return RemoteError(
            self.redact(f"{self.provider}: {message}"),
            provider=self.provider,
            status=status,
            transient=transient,
            attempts=attempts,
        )

    def _status_error(self, response: httpx.Response, where: str, made: int) -> RemoteError:
        status = response.status_code
        transient = status in TRANSIENT_STATUSES or status >= 500
        hint = {
            401: " (check the API key)",
            403: " (check the API key and its permissions)",
            404: " (check baseUrl and model)",
            429: " (rate limited)",
        }.get(status, "")
        reason = response.reason_phrase or ""
        detail = _error_detail(response)
        message = f"HTTP {status} {reason}{hint} from {where}".replace("  ", " ")
        if detail:
            message += f": {detail}"
        return self._error(message, status, transient, made)

    def _decode(self, response: httpx.Response, expect: str, where: str, made: int) -> Any:
        if expect == "bytes":
            return response.content
        try:
            return response.json()
        except (ValueError, UnicodeDecodeError):
            size = len(response.content)
            raise self._error(
                f"invalid JSON from {where} ({size} bytes): truncated answer, or baseUrl "
                "does not point at the embeddings API",
                response.status_code,
                False,
                made,
            ) from None


_SSL_LOCK = threading.Lock()
_SSL_CONTEXT: ssl.SSLContext | None = None


def _ssl_context() -> ssl.SSLContext:
    """One shared TLS context (loading the CA bundle costs ~30 ms per client otherwise)."""
    global _SSL_CONTEXT
    with _SSL_LOCK:
        if _SSL_CONTEXT is None:
            _SSL_CONTEXT = httpx.create_ssl_context()
        return _SSL_CONTEXT


def _strip(err: RemoteError) -> str:
    """The message without the leading ``provider:`` (to re-wrap it)."""
    text = str(err)
    prefix = f"{err.provider}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def _display_url(url: str) -> str:
    """The URL without its query string (which could hold a key, e.g. Gemini's ``?key=``)."""
    return url.split("?", 1)[0]


def _error_detail(response: httpx.Response) -> str:
    """The server's own error message, from the usual JSON shapes, capped in length."""
    text = ""
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or err.get("status") or err.get("code")
        if isinstance(err, list):  # FastAPI-style validation errors
            err = "; ".join(str(e.get("msg", e)) if isinstance(e, dict) else str(e) for e in err)
        if err is not None:
            text = str(err)
    elif body is None:
        try:
            text = response.text
        except Exception:  # noqa: BLE001 - undecodable body: no detail
            text = ""
        if "<html" in text[:200].lower():
            text = ""  # an HTML error page says nothing useful
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "")


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

    Subclass hooks: ``_url(query)``, ``_body(texts, query)``, ``_parse(answer, count)`` which
    returns ``(rows, tokens or None)``, and ``_auth_headers(api_key)``.
    """

    id = "remote"
    default_base_url = ""
    default_model = ""
    default_max_input_tokens = 512
    bytes_per_token = 4  # max_input_bytes = tokens * this (see each provider)
    max_batch = 2048  # the API's own limit on inputs per request
    needs_key = True
    needs_model = False

    def __init__(
        self,
        remote: RemoteSettings | None = None,
        *,
        model: str = "",
        api_key: str = "",
        rng: random.Random | None = None,
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
        self._client = RemoteClient(
            self.id,
            remote,
            headers=self._auth_headers(api_key) if api_key else {},
            secrets=[api_key],
            stats=self.stats,
            rng=rng,
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
        parts = [
            self._embed(texts[i : i + self.batch_size], query=False)
            for i in range(0, len(texts), self.batch_size)
        ]
        return parts[0] if len(parts) == 1 else np.vstack(parts)

    def close(self) -> None:
        self._client.close()

    # -- shared machinery ----------------------------------------------------------------

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        texts = self._prepare(texts)
        answer = self._client.post_json(self._url(query), self._body(texts, query), query=query)
        return self._vectors(answer, texts)

    @staticmethod
    def _prepare(texts: Sequence[str]) -> list[str]:
        # Most APIs refuse empty strings; an empty chunk embeds as a blank.
        return [t if t and t.strip() else " " for t in texts]

    def _vectors(self, answer: Any, texts: Sequence[str]) -> np.ndarray:
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

    def _format_version(self) -> str:
        return "1"

    def _normalize_model(self, model: str) -> str:
        return model

    def _auth_headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def _url(self, query: bool) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _body(self, texts: list[str], query: bool) -> dict[str, Any]:  # pragma: no cover
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
