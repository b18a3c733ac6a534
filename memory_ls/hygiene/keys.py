"""Which passages hold a key (``duplicates.keys``): the full build's sorted arrays, and the
keys of the passages added since, for ``incremental.Checker``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from .duplicates import MAX_GROUP


class Keys:
    """Which passages hold a key: the full build's sorted arrays, and what changed since."""

    def __init__(self) -> None:
        self.k = np.zeros(0, dtype=np.int64)
        self.o = np.zeros(0, dtype=np.int64)
        self.extra: dict[int, set[int]] = {}
        self.mine: dict[int, set[int]] = {}  # pid -> its keys, for the pids in ``extra``
        self.dead: set[int] = set()

    def build(self, keyed: Iterable[tuple[int, set[int]]]) -> Iterator[list[int]]:
        """Index every passage's keys at once; yields each key's group of passages."""
        keys: list[int] = []
        owners: list[int] = []
        for pid, ks in keyed:
            keys += ks
            owners += [pid] * len(ks)
        k = np.array(keys, dtype=np.int64)
        o = np.array(owners, dtype=np.int64)
        order = np.argsort(k, kind="stable")
        self.k, self.o = k[order], o[order]
        self.extra, self.mine, self.dead = {}, {}, set()
        bounds = np.flatnonzero(np.diff(self.k)) + 1
        starts = np.concatenate(([0], bounds)).astype(np.int64)
        ends = np.concatenate((bounds, [len(self.k)])).astype(np.int64)
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            if 2 <= e - s <= MAX_GROUP:
                yield sorted(set(self.o[s:e].tolist()))

    def add(self, pid: int, keys: set[int]) -> None:
        self.mine[pid] = keys
        for key in keys:
            self.extra.setdefault(key, set()).add(pid)

    def drop(self, pid: int) -> None:
        keys = self.mine.pop(pid, None)
        if keys is None:
            self.dead.add(pid)
            return
        for key in keys:
            group = self.extra.get(key)
            if group is not None:
                group.discard(pid)
                if not group:
                    del self.extra[key]

    def groups(
        self, keys: list[int], plus: Mapping[int, list[int]] | None = None
    ) -> list[list[int]]:
        """The live passages holding each of ``keys`` (and ``plus``'s, passages not indexed:
        a draft's), each group of 2 to ``MAX_GROUP``."""
        if not keys:
            return []
        q = np.array(keys, dtype=np.int64)
        lo = np.searchsorted(self.k, q, side="left").tolist()
        hi = np.searchsorted(self.k, q, side="right").tolist()
        out = []
        for key, a, b in zip(keys, lo, hi, strict=True):
            group = [o for o in self.o[a:b].tolist() if o not in self.dead] if b > a else []
            group += self.extra.get(key, ())
            group += (plus or {}).get(key, ())
            if 2 <= len(set(group)) <= MAX_GROUP:
                out.append(group)
        return out
