"""`core.batches`: the one batch loop. What a store already holds is skipped, each chunk is kept as it
ends, an interrupted run started again does only the rest, and results keep the items' order."""

from __future__ import annotations

import threading
import time

import pytest

from core.batches import run_all, run_missing


def _todo(n: int) -> list[tuple[str, int]]:
    return [(f"k{i}", i) for i in range(n)]


def test_an_interrupted_run_started_again_does_only_the_rest():
    kept: dict[str, int] = {}
    seen: list[int] = []

    def keep(part, results):
        kept.update((key, r) for (key, _), r in zip(part, results, strict=True))

    def work(part):
        if len(seen) >= 4:
            raise KeyboardInterrupt
        seen.extend(i for _, i in part)
        return [i * 10 for _, i in part]

    with pytest.raises(KeyboardInterrupt):
        run_missing(_todo(10), work, keep, kept, chunk=2, in_flight=1)
    assert seen == [0, 1, 2, 3] and sorted(kept) == ["k0", "k1", "k2", "k3"]
    again: list[int] = []

    def rest(part):
        again.extend(i for _, i in part)
        return [i * 10 for _, i in part]

    assert run_missing(_todo(10), rest, keep, kept, chunk=2, in_flight=1) == 6
    assert again == [4, 5, 6, 7, 8, 9]
    assert kept == {f"k{i}": i * 10 for i in range(10)}
    assert run_missing(_todo(10), rest, keep, kept) == 0  # all done: nothing runs


def test_one_chunk_in_flight_runs_in_order_in_the_callers_thread():
    threads, order, progress = set(), [], []

    def work(part):
        threads.add(threading.get_ident())
        order.extend(i for _, i in part)
        return part

    run_missing(_todo(7), work, lambda part, results: None, chunk=3, in_flight=1, progress=progress.append)
    assert threads == {threading.get_ident()} and order == list(range(7)) and progress == [3, 3, 1]


def test_run_all_keeps_the_items_order_when_a_later_chunk_ends_first():
    def work(part):
        time.sleep(0.3 if part[0] == 0 else 0.01)  # the first chunk is the slowest
        return [i * 2 for i in part]

    assert run_all(list(range(9)), work, chunk=2, in_flight=2) == [i * 2 for i in range(9)]


def test_a_wrong_number_of_results_names_the_batch():
    with pytest.raises(RuntimeError, match="tasks: 1 records for 2 items"):
        run_all([1, 2], lambda part: [0], label="tasks", chunk=2)
