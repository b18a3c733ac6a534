"""How many CPU threads llama.cpp gets: few for queries, as many as pay off for indexing.

ggml's worker threads spin at barriers, so a job that asks for every core runs slower as soon as
another process holds one. Measured on 2 cores with all-MiniLM-L6-v2 (bench/embed_speed.py): idle,
2 threads embed 2.0x as fast as 1; with one core busy elsewhere, 2 threads are 0.73x as fast as 1
and queries take twice as long. Neither number is right everywhere, so queries keep a core free
and indexing batches measure both layouts and keep the faster one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

MAX_THREADS = 8
# After this many batches on the faster layout, one batch re-measures the other: load changes.
PROBE_EVERY = 12
# Weight of the newest batch in a layout's running rate (tokens per second).
RATE_WEIGHT = 0.3


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """All usable cores but one, at least 1, at most 8: the threads a query starts with, and
    the fewer of the two counts ``BatchThreads.auto`` measures.

    A query is a few dozen tokens, and keeping a core free keeps it fast while another process
    (or an indexing batch elsewhere) is busy; on an idle machine all cores are faster.
    """
    return max(1, min(usable_cores() - 1, MAX_THREADS))


@dataclass
class BatchThreads:
    """Picks the thread count for each indexing batch from the measured rate of each choice.

    Every choice is tried once; then the fastest runs, and every ``PROBE_EVERY`` batches the
    others are measured again so that a machine that gets busy (or idle) changes the pick.
    """

    choices: tuple[int, ...]
    rates: dict[int, float] = field(default_factory=dict)
    since_probe: int = 0
    probes: int = 0

    @classmethod
    def auto(cls) -> BatchThreads:
        """Choose between all usable cores but one and all of them (at most 8)."""
        cores = usable_cores()
        return cls(tuple(sorted({default_threads(), max(1, min(cores, MAX_THREADS))})))

    def choose(self) -> int:
        untried = [n for n in self.choices if n not in self.rates]
        if untried:
            return untried[0]
        best = max(self.choices, key=lambda n: self.rates[n])
        others = [n for n in self.choices if n != best]
        if self.since_probe >= PROBE_EVERY and others:
            self.since_probe = 0
            self.probes += 1
            return others[self.probes % len(others)]
        self.since_probe += 1
        return best

    def record(self, threads: int, tokens: int, seconds: float) -> None:
        if threads not in self.choices or tokens <= 0 or seconds <= 0:
            return
        rate = tokens / seconds
        old = self.rates.get(threads)
        self.rates[threads] = rate if old is None else old + RATE_WEIGHT * (rate - old)
