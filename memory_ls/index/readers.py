"""Reader connections for one index file: one per thread at a time, reused (WAL readers never
wait for the writer)."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .store import Store


class ReaderPool:
    def __init__(self, path: Path):
        self.path = path
        self._idle: queue.LifoQueue[Store] = queue.LifoQueue()
        self._closed = False

    @contextmanager
    def borrow(self) -> Iterator[Store]:
        try:
            store = self._idle.get_nowait()
        except queue.Empty:
            store = Store(self.path, create=False)
        try:
            yield store
        finally:
            if self._closed:
                store.close()
            else:
                self._idle.put(store)

    def drop(self) -> None:
        """Close the idle readers (after the file was replaced under them by a rebuild)."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def close(self) -> None:
        self._closed = True
        self.drop()
