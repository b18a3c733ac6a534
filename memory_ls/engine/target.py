"""Where the vector phase writes: shared by the local indexer and the team index."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

from ..index.backend import IndexBackend
from ..index.sync import IndexContext


@dataclass(frozen=True)
class EmbedTarget:
    """A store, the lock its writer is used under, and the context rows are written with."""

    store: IndexBackend
    lock: AbstractContextManager[object]
    ctx: IndexContext
