"""Run the pipeline's pure per-batch functions locally or on a Ray cluster.

Both executors take a `datasets.Dataset`, apply `fn(batch: dict[str, list], **kwargs) ->
dict[str, list]` to every batch and return a `Dataset` in the input order, so the local
run (`datasets.map` with `num_proc`) and the Ray run (Ray Data `map_batches`) give the same
output on the same input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from datasets import Dataset

BatchFn = Callable[..., dict[str, list]]


class Executor(Protocol):
    def map_batches(self, ds: Dataset, fn: BatchFn, fn_kwargs: dict[str, Any], desc: str) -> Dataset: ...

    def close(self) -> None: ...


class LocalExecutor:
    """`datasets.map(batched=True, num_proc=N)`: one machine, N processes."""

    def __init__(self, num_proc: int | None = None, batch_size: int = 1000):
        self.num_proc, self.batch_size = num_proc, batch_size

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

    def close(self) -> None:
        return None


def _call_on_lists(batch: Any, fn: BatchFn, fn_kwargs: dict[str, Any]) -> Any:
    """A pyarrow.Table in, the same dict-of-lists as `datasets.map` to `fn`, a pyarrow.Table out."""
    import numpy as np
    import pyarrow as pa

    out = fn(batch.to_pydict(), **fn_kwargs)
    columns = {}
    for key, value in out.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:  # e.g. uint64 signatures: keep them lists
            value = pa.FixedSizeListArray.from_arrays(value.reshape(-1), value.shape[1])
        columns[key] = value
    return pa.table(columns)


class RayExecutor:
    """Ray Data `map_batches` with order preserved; `address=None` starts a local Ray."""

    def __init__(self, address: str | None = None, batch_size: int = 1000):
        import ray

        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        self.batch_size = batch_size

    def map_batches(self, ds: Dataset, fn: BatchFn, fn_kwargs: dict[str, Any], desc: str) -> Dataset:
        import pyarrow as pa
        import ray

        if len(ds) == 0:
            return Dataset.from_dict({k: [] for k in ds.column_names}).map(
                fn, batched=True, fn_kwargs=fn_kwargs
            )
        table = ds.with_format("arrow")[:]
        rds = ray.data.from_arrow(table).map_batches(
            _call_on_lists,
            fn_kwargs={"fn": fn, "fn_kwargs": fn_kwargs},
            batch_size=self.batch_size,
            batch_format="pyarrow",
        )
        tables = [t for t in ray.get(rds.to_arrow_refs()) if t.num_rows]
        return Dataset(pa.concat_tables(tables, promote_options="default"))

    def close(self) -> None:
        import ray

        if ray.is_initialized():
            ray.shutdown()


def make_executor(kind: str, num_proc: int | None, address: str | None, batch_size: int) -> Executor:
    if kind == "ray":
        return RayExecutor(address=address, batch_size=batch_size)
    return LocalExecutor(num_proc=num_proc, batch_size=batch_size)
