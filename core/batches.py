"""The one batch loop of sandbox work, shared by evaluation, the audit and the data pipeline.

`run_missing` works through the items a store has no record of yet, chunk by chunk, and hands each
chunk's results to the store as soon as that chunk ends, so a killed run started again redoes at
most the chunks that were in flight. Evaluation keeps them in `samples.jsonl`
(`eval.samples.run_missing`), the audit in `out/steps/`; `run_all` is the same loop for batches
that keep nothing between runs (the API-update build, the novel-API tasks and validation).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Container, Hashable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
R = TypeVar("R")
CHUNK = 64  # items per chunk: what a kill can lose, and the sandbox's batch
IN_FLIGHT = 2  # chunks worked on at once, so that no worker idles behind a chunk's slowest job


def run_missing(
    todo: Sequence[tuple[K, T]],
    work: Callable[[list[tuple[K, T]]], Sequence[R]],
    keep: Callable[[list[tuple[K, T]], Sequence[R]], None],
    done: Container[K] = frozenset(),
    *,
    label: str = "batch",
    progress: Callable[[int], None] | None = None,
    chunk: int = CHUNK,
    in_flight: int = IN_FLIGHT,
) -> int:
    """For each item whose key is not in `done`, chunk by chunk, `work` gives one result per item and
    `keep` gets them (in this thread) as soon as their chunk is done. ``in_flight`` chunks are worked
    on at once (in threads: `work` drives the sandbox's pool, which takes jobs from several callers),
    so the next chunk's jobs fill the workers a chunk's slowest job leaves idle; with 1, chunks run
    one after another, in order, in this thread. Returns how many ran."""
    missing = [(key, item) for key, item in todo if key not in done]
    parts = iter([missing[start : start + chunk] for start in range(0, len(missing), chunk)])

    def finish(part: list[tuple[K, T]], results: Sequence[R]) -> None:
        if len(results) != len(part):
            raise RuntimeError(f"{label}: {len(results)} records for {len(part)} items")
        keep(part, results)
        if progress:
            progress(len(part))

    if in_flight <= 1:  # in this thread, so that Ctrl-C stops the chunk at once
        for part in parts:
            finish(part, work(part))
        return len(missing)
    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        running = {pool.submit(work, part): part for part in itertools.islice(parts, in_flight)}
        try:
            while running:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    part = running.pop(future)
                    finish(part, future.result())
                    following = next(parts, None)
                    if following is not None:
                        running[pool.submit(work, following)] = following
        finally:
            for future in running:  # an error: chunks not started yet are dropped
                future.cancel()
    return len(missing)


def run_all(
    items: Sequence[T],
    work: Callable[[list[T]], Sequence[R]],
    *,
    label: str = "batch",
    progress: Callable[[int], None] | None = None,
    chunk: int = CHUNK,
    in_flight: int = IN_FLIGHT,
) -> list[R]:
    """`run_missing` over every item with nothing kept between runs: the results in item order."""
    results: dict[int, R] = {}

    def keep(part: list[tuple[int, T]], found: Sequence[R]) -> None:
        results.update(zip((i for i, _ in part), found, strict=True))

    run_missing(
        list(enumerate(items)),
        lambda part: work([item for _, item in part]),
        keep,
        label=label,
        progress=progress,
        chunk=chunk,
        in_flight=in_flight,
    )
    return [results[i] for i in range(len(items))]
