"""What went wrong with the PostgreSQL primary, said without the password.

libpq's own messages do not carry the password, but a URL does, and a message may quote
connection options: every text that leaves this package goes through ``scrub``.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

URL_ENV = "MEMORY_LS_PG_URL"


class PrimaryUnavailable(Exception):
    """The primary cannot be used; ``str()`` is the reason, safe to show."""


# libpq also takes the password as a query parameter: postgresql://u@h/db?password=...
_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&#]*)", re.IGNORECASE)


def password_of(url: str) -> str | None:
    if "://" in url:
        parts = urlsplit(url)
        if parts.password is not None:
            return parts.password
        m = _QUERY_PASSWORD.search(parts.query and "?" + parts.query)
        return unquote(m.group(2)) if m and m.group(2) else None
    m = re.search(r"(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", url, re.IGNORECASE)
    return m.group(1).strip("'") if m else None


def redact(url: str) -> str:
    """The URL as it may be shown: the password replaced by ``***``."""
    if "://" in url:
        parts = urlsplit(url)
        if parts.query:
            query = _QUERY_PASSWORD.sub(r"\1***", "?" + parts.query)[1:]
            parts = parts._replace(query=query)
        if parts.password is None:
            return urlunsplit(parts)
        # The hosts as written: ``parts.port`` raises on a libpq multi-host list
        # (h1:5432,h2:5432) or a port that is no number, and a failed redaction must not
        # take the engine down.
        hosts = parts.netloc.rpartition("@")[2]
        netloc = f"{parts.username or ''}:***@{hosts}"
        return urlunsplit(parts._replace(netloc=netloc))
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", url, flags=re.I)


def scrub(text: str, url: str) -> str:
    """``text`` with the URL's password (and any URL carrying one) taken out."""
    secret = password_of(url)
    if secret:
        text = text.replace(secret, "***")
    return re.sub(r"(postgres(?:ql)?://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)


def describe(exc: BaseException, url: str) -> str:
    """One line naming what is wrong: unreachable, bad credentials, missing database, ..."""
    if isinstance(exc, PrimaryUnavailable):
        return scrub(str(exc), url)
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    low = str(exc).lower()
    if "unsupported startup parameter" in low or ("prepared statement" in low and "exist" in low):
        # What PgBouncer in transaction mode says to a client that expects a session.
        kind = "a pooler in transaction mode? set store.postgres.pooler = transaction"
    elif "password authentication failed" in low or "no password supplied" in low:
        kind = "bad credentials"
    elif "does not exist" in low and "database" in low:
        kind = "no such database"
    elif "failed to resolve host" in low or "could not translate host name" in low:
        kind = "unknown host"
    elif (
        "invalid connection option" in low
        or "for connection option" in low
        or "invalid sslmode" in low
        or "connection info string" in low
    ):
        kind = "invalid URL"  # libpq's parser said it: nothing was tried on the network
    elif "timeout" in low or "timed out" in low or "canceling statement" in low:
        kind = "too slow"
    elif "refused" in low or "could not connect" in low or "connection" in low:
        kind = "unreachable"
    else:
        kind = "error"
    return scrub(f"PostgreSQL at {redact(url)}: {kind} ({first})", url)
