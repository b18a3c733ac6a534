"""Duplicates the words alone cannot settle, confirmed by the index's line vectors (the real
all-MiniLM-L6-v2 model, real SQLite): a reworded fact is found; a line the vectors find close
that names someone the earlier line does not is not a copy."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from conftest import write
from model_util import ensure_test_model

from memory_ls.engine import MemoryEngine
from memory_ls.settings import Settings

pytestmark = pytest.mark.model


def test_line_vectors_confirm_a_rewording_but_not_another_name(tmp_path: Path):
    root = tmp_path / "ws"
    write(
        root,
        "memory/2026-01-05.md",
        "# Notes\n\n"
        "- Decided to cache exchange rates in Redis with a one hour expiry.\n"
        "- Dana is working on the refund API this sprint.\n",
    )
    write(
        root,
        "memory/2026-01-12.md",
        "# Notes\n\n"
        "- Exchange rates are cached in Redis and expire after one hour.\n"
        "- Bob is pairing with Dana on the refund API this sprint.\n",
    )
    # Other standups, so that "is working on ... this sprint" weighs what it does in a memory.
    for i, (who, what) in enumerate(
        [("Carol", "login page"), ("Erin", "invoice export"), ("Frank", "search ranking")]
    ):
        write(
            root,
            f"memory/2026-02-0{i + 1}.md",
            f"# Standup\n\n- {who} is working on the {what} this sprint.\n"
            f"- The {what.split()[-1]} work ships on Friday after review.\n",
        )
    s = Settings(provider="local")
    s.local.model_path = str(ensure_test_model())
    with MemoryEngine(root, s, index_path=tmp_path / "i.sqlite") as e:
        e.sync("test")  # chunks, then their lines, embedded
        found = [f for f in e.check(date(2026, 6, 1), vectors=True) if f.code == "duplicate"]
    got = [(f.path, f.start_line, f.end_line, f.related[0].end_line) for f in found]
    assert got == [("memory/2026-01-12.md", 3, 3, 3)]  # not line 4 (Bob), nor L3-L4
