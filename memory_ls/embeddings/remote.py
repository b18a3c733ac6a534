"""The HTTP client of the hosted embedding APIs: retries, timeouts, errors, redaction.

Each remote provider (``remote_provider.RemoteProvider``) owns one ``RemoteClient``; this
module owns:

* one ``httpx.Client`` per provider (thread-safe: the engine calls from worker threads);
* timeouts: a query has one overall budget (``remote.queryTimeoutMs``, default 2 s) that
  includes its retries, so a search falls back to keywords quickly; a document batch gets
  ``remote.batchTimeoutMs`` per attempt;
* retries on 408, 429, 5xx, connection errors and timeouts, at most ``remote.retries``, with
  exponential backoff and jitter between ``remote.backoffMinMs`` and ``remote.backoffMaxMs``,
  honouring ``Retry-After`` (seconds or HTTP date) and ``retry-after-ms``; no retry on other
  4xx (400, 401, 403, 404 ...);
* errors that name the provider and the HTTP status and never contain a secret: every message
  goes through ``redact`` with the API key and any secret-looking header values.
"""

from __future__ import annotations

import email.utils
import logging
import random
import re
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from ..redact import redact as redact_patterns
from ..settings import RemoteSettings
from .base import EmbeddingError

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
    ) -> Any:
        """Send with retries; return the decoded JSON (``expect="json"``) or the raw bytes.

        ``query=True`` means one overall budget of ``queryTimeoutMs`` for all attempts.
        Raises ``RemoteError`` (an ``EmbeddingError``) on failure.
        """
        per_attempt = self.query_timeout_s if query else self.batch_timeout_s
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
                else backoff_delay(attempt, self.backoff_min_s, self.backoff_max_s)
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
                "does not point at the provider's API",
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
