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
        self._generation = 0  # drop() moves it: readers borrowed before close when returned

    @contextmanager
    def borrow(self) -> Iterator[Store]:
        generation = self._generation
        try:
            store = self._idle.get_nowait()
        except queue.Empty:
            store = Store(self.path, create=False)
        try:
            yield store
        finally:
            if self._closed or generation != self._generation:
                store.close()
            else:
                self._idle.put(store)

    def drop(self) -> None:
        """Close the readers (after the file was replaced under them by a rebuild, or deleted):
        the idle ones now, those in use when they come back."""
        self._generation += 1
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def close(self) -> None:
        self._closed = True
        self.drop()
