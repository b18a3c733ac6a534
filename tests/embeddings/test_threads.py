"""llama.cpp threads: queries keep a core free, indexing keeps the measured faster choice."""

from __future__ import annotations

from memory_ls.embeddings.threads import PROBE_EVERY, BatchThreads, default_threads, usable_cores


def test_query_threads_leave_a_core_free() -> None:
    cores = usable_cores()
    assert default_threads() == max(1, min(cores - 1, 8))


def test_auto_offers_one_fewer_and_all_cores() -> None:
    choices = BatchThreads.auto().choices
    assert choices == tuple(sorted({default_threads(), max(1, min(usable_cores(), 8))}))


def run(chooser: BatchThreads, speed: dict[int, float], batches: int) -> list[int]:
    picks = []
    for _ in range(batches):
        n = chooser.choose()
        picks.append(n)
        chooser.record(n, tokens=1000, seconds=1000 / speed[n])
    return picks


def test_tries_each_then_keeps_the_faster() -> None:
    chooser = BatchThreads((1, 2))
    picks = run(chooser, {1: 3500.0, 2: 7200.0}, PROBE_EVERY + 2)
    assert picks[:2] == [1, 2]
    assert picks[2 : 2 + PROBE_EVERY] == [2] * PROBE_EVERY


def test_probes_the_other_choice_and_follows_a_change_in_load() -> None:
    # Idle: 2 threads win. Then another process takes a core and 2 threads fall below 1.
    chooser = BatchThreads((1, 2))
    run(chooser, {1: 3500.0, 2: 7200.0}, 10)
    picks = run(chooser, {1: 4000.0, 2: 2900.0}, 4 * PROBE_EVERY)
    tail = picks[-2 * PROBE_EVERY :]
    assert tail.count(1) >= len(tail) - 2  # one probe of 2 threads every PROBE_EVERY batches
    # ... and when the machine is idle again, the periodic probe finds 2 threads again.
    picks = run(chooser, {1: 3500.0, 2: 7200.0}, 6 * PROBE_EVERY)
    tail = picks[-2 * PROBE_EVERY :]
    assert tail.count(2) >= len(tail) - 2


def test_fixed_count_never_changes() -> None:
    chooser = BatchThreads((3,))
    assert set(run(chooser, {3: 100.0}, 3 * PROBE_EVERY)) == {3}


def test_ignores_empty_or_unknown_measurements() -> None:
    chooser = BatchThreads((1, 2))
    chooser.record(1, tokens=0, seconds=1.0)
    chooser.record(5, tokens=100, seconds=1.0)
    chooser.record(2, tokens=100, seconds=0.0)
    assert chooser.rates == {}
