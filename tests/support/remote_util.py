"""Remote-provider settings for the tests against the stub server (http_stub.py)."""

from __future__ import annotations

from memory_ls.settings import RemoteSettings


def fast(base_url: str, **overrides) -> RemoteSettings:
    """Remote settings with short timeouts and backoffs, so failures cost milliseconds."""
    values = dict(
        base_url=base_url,
        query_timeout_ms=1000,
        batch_timeout_ms=1000,
        retries=3,
        backoff_min_ms=10,
        backoff_max_ms=40,
    )
    values.update(overrides)
    return RemoteSettings(**values)
