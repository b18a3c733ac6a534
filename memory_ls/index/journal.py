"""Which files' rows a connection wrote, in order: what the memory checks read again after an
edit, instead of every file's hash (``Written.since``)."""

from __future__ import annotations

LIMIT = 4096  # paths remembered; past them, a reader asking from before learns "unknown"


class Written:
    def __init__(self) -> None:
        self.seq = 0
        self.floor = 0  # the newest number forgotten
        self.paths: dict[str, int] = {}  # path -> the number of its last write, oldest first

    def add(self, path: str) -> None:
        self.seq += 1
        self.paths.pop(path, None)
        self.paths[path] = self.seq
        if len(self.paths) > LIMIT:
            oldest = next(iter(self.paths))
            self.floor = self.paths.pop(oldest)

    def since(self, seq: int) -> set[str] | None:
        """The paths written after number ``seq``; None when some of them were forgotten."""
        if seq < self.floor:
            return None
        out = set()
        for path in reversed(self.paths):
            if self.paths[path] <= seq:
                break
            out.add(path)
        return out
