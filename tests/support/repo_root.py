"""The repository's root folder, for tests that run its scripts or read its files."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
