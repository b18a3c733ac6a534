"""The PostgreSQL + pgvector backend: one shared index per namespace for a team or a fleet.

``PgDatabase`` connects, checks pgvector and migrates the schema; ``PgStore`` is the
``IndexBackend`` on one of its connections. psycopg is imported only when this package is.
"""

from .database import PgDatabase
from .errors import URL_ENV, PrimaryUnavailable, describe, redact
from .store import PgStore

__all__ = ["URL_ENV", "PgDatabase", "PgStore", "PrimaryUnavailable", "describe", "redact"]
