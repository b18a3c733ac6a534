"""Shared fixtures: every test gets its own cache and config folders, never the user's."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Shared helpers (tests/support/) import by their plain names, as does this file's own
# ``write`` and ``spy_submit`` (``from conftest import write``).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "support"))

import pg_util  # noqa: E402
from lsp_harness import start  # noqa: E402,F401  (the language-server fixture, for all tests)


def pytest_configure(config: pytest.Config) -> None:
    """The folder of the PostgreSQL the whole session shares (tests/support/pg_util.py), made
    before pytest-xdist starts its workers, which inherit its name; the first test that needs
    the server starts it."""
    pg_util.session_begin()


def pytest_unconfigure(config: pytest.Config) -> None:
    """After the last worker: stop and delete that server."""
    pg_util.session_end()


@pytest.fixture(scope="session", autouse=True)
def _isolated_session_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Module- and session-scoped fixtures start before the per-test folders below: they get a
    cache of their own too (a model opened there may leave a bfloat16 copy in it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("session") / "cache"))
        yield


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    base = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CACHE_HOME", str(base / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    for key in ("OPENAI_API_KEY", "GEMINI_API_KEY", "VOYAGE_API_KEY", "MISTRAL_API_KEY"):
        monkeypatch.delenv(key, raising=False)


def spy_submit(monkeypatch: pytest.MonkeyPatch, executor: Any) -> list[object]:
    """The functions handed to ``executor.submit`` from now on (they still run), so a test can
    tell that work really went to another thread."""
    submitted: list[object] = []
    real_submit = executor.submit

    def submit(fn: Any, *args: Any) -> Any:
        submitted.append(fn)
        return real_submit(fn, *args)

    monkeypatch.setattr(executor, "submit", submit)
    return submitted


def write(root: Path, rel: str, text: str | bytes) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(
        root,
        "MEMORY.md",
        "# Memory\n\nUser prefers dark mode in every editor.\nPasswords live in the team vault.\n",
    )
    write(
        root,
        "memory/2026-01-10-api-design.md",
        "# API design\n\nWe chose token bucket rate limiting backed by Redis.\n"
        "The limit is 100 requests per minute per key.\n\n## Errors\n\n"
        "Clients get HTTP 429 with a Retry-After header.\n",
    )
    write(
        root,
        "memory/2026-02-01-deploy.md",
        "# Deploy\n\nDeploys go through GitHub Actions to Fly.io.\n"
        "Rollbacks use the previous image tag.\n",
    )
    write(
        root,
        "memory/notes/cjk.md",
        "# 笔记\n\n我们使用令牌桶限流算法保护接口。\n東京の天気は晴れです。\n"
        "서울 날씨 맑음 오늘은 산책하기 좋다.\n",
    )
    write(root, "README.md", "Not memory: rate limiting appears here too.\n")
    return root


def fts_leaks(index: Path, secrets: list[str]) -> list[str]:
    """The secrets whose distinctive tokens (8+ characters, as the index's own FTS5 tokenizer
    splits them) are in the index's FTS5 vocabulary. The FTS5 table is contentless, so its
    vocabulary is all of the text it keeps."""
    from memory_ls.index.schema import FTS_TOKENIZER, connect

    conn, _ = connect(index, vec=False)
    try:
        conn.executescript(
            f"CREATE VIRTUAL TABLE temp.probe USING fts5(w, tokenize = '{FTS_TOKENIZER}');"
            "CREATE VIRTUAL TABLE temp.probe_terms USING fts5vocab('temp', 'probe', 'instance');"
            "CREATE VIRTUAL TABLE temp.index_terms USING fts5vocab('main', 'chunks_fts', 'row');"
        )
        terms = {t for (t,) in conn.execute("SELECT term FROM temp.index_terms")}
        leaks = []
        for s in secrets:
            conn.execute("DELETE FROM temp.probe")
            conn.execute("INSERT INTO temp.probe(w) VALUES (?)", (s,))
            mine = {t for (t,) in conn.execute("SELECT term FROM temp.probe_terms")}
            if any(len(t) >= 8 and t in terms for t in mine):
                leaks.append(s)
        return leaks
    finally:
        conn.close()
