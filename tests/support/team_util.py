"""The team index's test helpers: a team workspace's notes and settings, and SQL on the
PostgreSQL of pg_util.py."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
from http_stub import StubServer
from remote_util import fast

from memory_ls.engine import MemoryEngine
from memory_ls.settings import Settings

NOTES = {
    "MEMORY.md": "# Memory\n\nUser prefers dark mode in every editor.\n"
    "Deploys go through GitHub Actions to Fly.io.\n",
    "memory/2026-01-10-api.md": "# API design\n\nWe chose token bucket rate limiting backed by "
    "Redis.\nThe limit is 100 requests per minute per key.\n\n## Errors\n\n"
    "Clients get HTTP 429 with a Retry-After header.\n",
    "memory/cjk.md": "# 笔记\n\n我们使用令牌桶限流算法保护接口。\n東京の天気は晴れです。\n",
    "memory/cafe.md": "# Café\n\nThe team meets at the café near the station on Fridays.\n",
}


def write_notes(root: Path, notes: dict[str, str]) -> Path:
    for rel, text in notes.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def team(url: str, namespace: str, stub: StubServer | None = None, **pg: object) -> Settings:
    s = Settings(provider="none")
    if stub is not None:
        s.provider, s.model = "openai-compatible", "stub-embed"
        s.remote = fast(stub.url + "/v1")
    s.store.backend = "postgres"
    s.store.postgres.url = url
    s.store.postgres.namespace = namespace
    for key, value in pg.items():
        setattr(s.store.postgres, key, value)
    return s


def rows(url: str, sql: str, *params: object) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def paths(resp) -> list[str]:
    return [h.path for h in resp.results]


def by_primary(resp) -> bool:
    """Answered by the team index (the local fallback always says so)."""
    return "team index unavailable" not in (resp.fallback_reason or "")


def searched_during_rebuilds(reader: MemoryEngine, query: str, engines) -> list:
    """``reader``'s answers to ``query``, asked over and over while every one of ``engines``
    runs a forced rebuild of the namespace at the same time."""
    stop = threading.Event()
    answers: list = []

    def read() -> None:
        while not stop.is_set():
            answers.append(reader.search(query, min_score=0))

    t_read = threading.Thread(target=read)
    t_read.start()
    ts = [threading.Thread(target=e.sync, kwargs={"force": True}) for e in engines]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    stop.set()
    t_read.join(10)
    return answers
