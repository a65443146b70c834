"""Run the pipeline's pure functions locally or on a Ray cluster, with the same output.

Two kinds of work:

- ``map_batches(ds, fn, fn_kwargs)``: a per-batch function ``fn(batch: dict[str, list],
  **kwargs) -> dict[str, list]`` over a table (filters, decontamination), returning a table in
  input order, its columns updated by ``fn``'s like ``datasets.map``.
- ``run_tasks(fn, tasks, shared)``: one call ``fn(task, **shared) -> dict`` per task, where a
  task names shards on disk and ``fn`` writes its outputs there (the sharded MinHash job).

Locally, batches run under ``datasets.map(num_proc)`` and tasks in a process pool. On Ray,
both run as Ray Data tasks that read their shard from the stage files and write their
output next to them, so only file names and counts ever reach the driver: the driver never
holds a shard, and `RayExecutor.max_result_bytes` records the largest reply it received. On a
multi-node cluster the build's `out` (or `executor.work_dir`) must be on storage every node
mounts.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
from datasets import Dataset

from core.errors import UserError
from core.progress import tqdm
from data_pipeline.shards import ArrowSource, arrow_source, batches, dataset_from_files, write_arrow

BatchFn = Callable[..., dict[str, list]]
TaskFn = Callable[..., dict]


class Executor(Protocol):
    distributed: bool  # tasks may run on other machines: outputs go through shared storage
    batch_size: int  # rows per call of a batch function
    shard_rows: int  # rows per shard of a sharded job
    partition_rows: int  # band keys per LSH bucket task

    def map_batches(self, ds: Dataset, fn: BatchFn, fn_kwargs: dict[str, Any], desc: str) -> Dataset: ...

    def run_tasks(
        self, fn: TaskFn, tasks: Sequence[dict], shared: dict[str, Any], desc: str
    ) -> list[dict]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """`datasets.map(batched=True, num_proc=N)` and a pool of N processes: one machine."""

    distributed = False

    def __init__(
        self, num_proc: int | None = None, batch_size: int = 1000, shard_rows: int = 100_000,
        partition_rows: int = 2_000_000,
    ):  # fmt: skip
        self.num_proc, self.batch_size = num_proc, batch_size
        self.shard_rows, self.partition_rows = shard_rows, partition_rows

    def map_batches(self, ds: Dataset, fn: BatchFn, fn_kwargs: dict[str, Any], desc: str) -> Dataset:
        num_proc = self.num_proc if self.num_proc and len(ds) >= 2 * self.batch_size else None
        return ds.map(
            fn,
            batched=True,
            batch_size=self.batch_size,
            fn_kwargs=fn_kwargs,
            num_proc=num_proc,
            desc=desc,
            load_from_cache_file=False,
        )

    def run_tasks(self, fn: TaskFn, tasks: Sequence[dict], shared: dict[str, Any], desc: str) -> list[dict]:
        call = partial(fn, **shared)
        bar = dict(total=len(tasks), desc=desc, unit="task", leave=False)
        if not self.num_proc or self.num_proc < 2 or len(tasks) < 2:
            return [call(t) for t in tqdm(tasks, **bar)]
        # fork: workers inherit imported modules and compiled kernels instead of importing again.
        with ProcessPoolExecutor(min(self.num_proc, len(tasks)), mp_context=get_context("fork")) as pool:
            return list(tqdm(pool.map(call, tasks), **bar))

    def close(self) -> None:
        return None


def map_shard_task(task: dict, *, src: dict, fn: BatchFn, fn_kwargs: dict[str, Any], batch_rows: int) -> dict:
    """Apply a batch function to one shard of a table and write the result as an Arrow file."""
    source, (start, stop) = ArrowSource.from_dict(src), task["rows"]
    tables = (_apply(table, fn, fn_kwargs) for table in batches(source, start, stop, batch_rows))
    first = next(tables, None)
    if first is None:
        return {"rows": 0}
    return {"rows": write_arrow(Path(task["out"]), itertools.chain([first], tables), first.schema)}


def _apply(table: pa.Table, fn: BatchFn, fn_kwargs: dict[str, Any]) -> pa.Table:
    """`datasets.map` semantics on one batch: `fn`'s columns replace or extend the batch's."""
    out = fn(table.to_pydict(), **fn_kwargs)
    columns = {name: table.column(name) for name in table.column_names}
    for key, value in out.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:  # e.g. uint64 signatures: keep them lists
            value = pa.FixedSizeListArray.from_arrays(value.reshape(-1), value.shape[1])
        columns[key] = value
    return pa.table(columns)


def _run_row(row: dict, fn: TaskFn, shared: dict[str, Any]) -> dict:
    return {"index": row["index"], "result": json.dumps(fn(json.loads(row["task"]), **shared))}


class RayExecutor:
    """Ray Data tasks over shards on disk; `address=None` starts a local Ray, "auto" joins a cluster."""

    distributed = True

    def __init__(
        self, address: str | None = None, batch_size: int = 1000, shard_rows: int = 100_000,
        partition_rows: int = 2_000_000, scratch: Path | None = None, num_cpus: int | None = None,
    ):  # fmt: skip
        import ray

        if not ray.is_initialized():
            try:
                ray.init(
                    address=address, num_cpus=num_cpus if address is None else None,
                    include_dashboard=False, log_to_driver=False, configure_logging=False,
                )  # fmt: skip
            except ConnectionError as e:
                raise UserError(
                    f"executor.address={address!r}: no Ray cluster to join ({e}); start one (ray start --head) "
                    "or leave executor.address empty for a Ray on this machine"
                ) from None
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        self.batch_size, self.shard_rows, self.partition_rows = batch_size, shard_rows, partition_rows
        self.scratch = scratch
        self.max_result_bytes = 0

    def run_tasks(self, fn: TaskFn, tasks: Sequence[dict], shared: dict[str, Any], desc: str) -> list[dict]:
        import ray

        if not tasks:
            return []
        items = [{"index": i, "task": json.dumps(t)} for i, t in enumerate(tasks)]
        rows = (
            ray.data.from_items(items, override_num_blocks=len(items))
            .map(_run_row, fn_kwargs={"fn": fn, "shared": shared}, num_cpus=1)
            .take_all()
        )
        self.max_result_bytes = max(self.max_result_bytes, *(len(r["result"]) for r in rows))
        return [json.loads(r["result"]) for r in sorted(rows, key=lambda r: r["index"])]

    def map_batches(self, ds: Dataset, fn: BatchFn, fn_kwargs: dict[str, Any], desc: str) -> Dataset:
        if self.scratch is None:
            raise ValueError("RayExecutor.map_batches needs a scratch folder every worker can reach")
        work = self.scratch / f"map-{uuid.uuid4().hex[:12]}"
        work.mkdir(parents=True)
        src = arrow_source(ds, work)
        starts = range(0, src.num_rows, self.shard_rows)
        tasks = [
            {"rows": [s, min(s + self.shard_rows, src.num_rows)], "out": str(work / f"s{i:05d}.arrow")}
            for i, s in enumerate(starts)
        ]
        shared = {"src": src.as_dict(), "fn": fn, "fn_kwargs": fn_kwargs, "batch_rows": self.batch_size}
        counts = self.run_tasks(map_shard_task, tasks, shared, desc)
        files = [Path(t["out"]) for t, c in zip(tasks, counts, strict=True) if c["rows"]]
        if not files:  # an empty table: its columns come from running fn on an empty batch
            return LocalExecutor(batch_size=self.batch_size).map_batches(ds, fn, fn_kwargs, desc)
        return dataset_from_files(files, None)

    def close(self) -> None:
        import ray

        if ray.is_initialized():
            ray.shutdown()


def make_executor(
    kind: str, num_proc: int | None, address: str | None, batch_size: int, shard_rows: int,
    partition_rows: int, scratch: Path,
) -> Executor:  # fmt: skip
    if kind == "ray":
        return RayExecutor(address, batch_size, shard_rows, partition_rows, scratch, num_proc)
    return LocalExecutor(num_proc, batch_size, shard_rows, partition_rows)
