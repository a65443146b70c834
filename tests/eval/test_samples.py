"""The one resumable loop: chunks worked on two at a time, every record appended once, errors surface."""

from __future__ import annotations

import threading
import time

import pytest

from eval.samples import SampleStore, run_missing


def _todo(n: int) -> list:
    return [(("p", "s", i), i) for i in range(n)]


def test_the_next_chunk_fills_in_behind_a_slow_one(tmp_path):
    store = SampleStore(tmp_path / "samples.jsonl")
    active, overlap, lock = [0], [0], threading.Lock()

    def work(chunk):
        with lock:
            active[0] += 1
            overlap[0] = max(overlap[0], active[0])
        time.sleep(0.3 if chunk[0][1] == 0 else 0.01)  # the first chunk is slow
        with lock:
            active[0] -= 1
        return [{"value": item * 2} for _, item in chunk]

    seen = []
    assert run_missing(store, "execution", _todo(10), work, seen.append, chunk=2) == 10
    assert overlap[0] == 2  # another chunk ran while the slow one did
    assert sorted(seen) == [2] * 5
    records = store.of_type("execution")
    assert {k[2]: r["value"] for k, r in records.items()} == {i: 2 * i for i in range(10)}
    assert run_missing(store, "execution", _todo(10), work) == 0  # resumed: nothing left


def test_an_error_stops_the_loop_and_keeps_what_finished(tmp_path):
    store = SampleStore(tmp_path / "samples.jsonl")

    def work(chunk):
        if chunk[0][1] == 4:
            raise ValueError("broken chunk")
        return [{"value": 1} for _ in chunk]

    with pytest.raises(ValueError, match="broken chunk"):
        run_missing(store, "execution", _todo(20), work, chunk=2, in_flight=1)
    assert sorted(k[2] for k in store.of_type("execution")) == [0, 1, 2, 3]
