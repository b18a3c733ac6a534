"""The plain row types of an index and the byte form of a vector."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ChunkRow:
    id: int
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    date: str | None  # of the file; None = evergreen


@dataclass(frozen=True)
class ChunkState:
    id: int
    hash: str
    start_line: int
    end_line: int
    embedding: bytes | None


@dataclass(frozen=True)
class FileState:
    hash: str
    mtime: float
    size: int


def to_blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=np.float32).tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32)
