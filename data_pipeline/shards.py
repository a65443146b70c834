"""Shards on disk: how a worker reads its rows of a dataset and writes what it made.

A build's stages are `datasets` tables saved as Arrow stream files. A worker — a local
process or a Ray task on another node — gets an `ArrowSource` (the file paths and their row
counts) and a row range, and memory-maps only that range: nothing passes through the driver.
On a cluster the paths must be on storage every node mounts (see docs/dedup.md).

Outputs are written to a temporary name and renamed into place, so a killed task leaves
either a complete file or none, and a rerun redoes only the missing ones.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from datasets import Dataset, concatenate_datasets, load_from_disk


@dataclass(frozen=True)
class ArrowSource:
    """The Arrow stream files behind a dataset, in order, with their row counts."""

    files: tuple[str, ...]
    lengths: tuple[int, ...]

    @property
    def num_rows(self) -> int:
        return sum(self.lengths)

    def as_dict(self) -> dict[str, list]:
        return {"files": list(self.files), "lengths": list(self.lengths)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Sequence]) -> ArrowSource:
        return cls(tuple(d["files"]), tuple(int(n) for n in d["lengths"]))


def _open(path: str) -> pa.Table:
    # Memory-mapped and zero-copy: reading a slice touches only that slice's pages.
    with pa.memory_map(path) as source:
        return pa.ipc.open_stream(source).read_all()


def arrow_source(ds: Dataset, scratch: Path) -> ArrowSource:
    """The files behind `ds`; an in-memory or re-indexed dataset is saved under `scratch` first."""
    if not ds.cache_files or ds._indices is not None:
        ds.save_to_disk(str(scratch / "input"))
        ds = load_from_disk(str(scratch / "input"))
    files = tuple(f["filename"] for f in ds.cache_files)
    return ArrowSource(files, tuple(_open(f).num_rows for f in files))


def read_rows(src: ArrowSource, start: int, stop: int, columns: Sequence[str] | None = None) -> pa.Table:
    """Rows [start, stop) of the concatenated files (only `columns` when given)."""
    parts, offset = [], 0
    for path, n in zip(src.files, src.lengths, strict=True):
        lo, hi = max(start - offset, 0), min(stop - offset, n)
        if lo < hi:
            table = _open(path)
            parts.append((table.select(list(columns)) if columns else table).slice(lo, hi - lo))
        offset += n
    if not parts:
        table = _open(src.files[0]) if src.files else pa.table({})
        return (table.select(list(columns)) if columns else table).slice(0, 0)
    return pa.concat_tables(parts)


def take_rows(src: ArrowSource, indices: np.ndarray, columns: Sequence[str]) -> pa.Table:
    """The rows at ascending global `indices`, in that order."""
    bounds = np.concatenate(([0], np.cumsum(src.lengths))).astype(np.int64)
    parts = []
    for f, path in enumerate(src.files):
        lo, hi = np.searchsorted(indices, bounds[f : f + 2])
        if lo < hi:
            parts.append(_open(path).select(list(columns)).take(pa.array(indices[lo:hi] - bounds[f])))
    return pa.concat_tables(parts) if parts else read_rows(src, 0, 0, columns)


def batches(
    src: ArrowSource, start: int, stop: int, rows: int, columns: Sequence[str] | None = None
) -> Iterator[pa.Table]:
    for lo in range(start, stop, rows):
        yield read_rows(src, lo, min(lo + rows, stop), columns)


def write_arrow(path: Path, tables: Iterator[pa.Table], schema: pa.Schema) -> int:
    """Stream `tables` into one Arrow stream file (the format `Dataset.from_file` reads); rows written."""
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    rows = 0
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for table in tables:
            writer.write_table(table.cast(schema))
            rows += table.num_rows
    os.replace(tmp, path)
    return rows


def dataset_from_files(paths: Sequence[Path], features: Any) -> Dataset:
    """One memory-mapped dataset over Arrow stream files, in order."""
    parts = [Dataset.from_file(str(p)) for p in paths]
    if not parts:
        return Dataset.from_dict({k: [] for k in features}, features=features)
    return concatenate_datasets(parts) if len(parts) > 1 else parts[0]


def save_array(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}.npy")
    np.save(tmp, np.ascontiguousarray(array))
    os.replace(tmp, path)


def load_array(path: Path) -> np.ndarray:
    return np.load(path, mmap_mode="r")


def save_json(path: Path, value: Any) -> None:
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


class RawWriter:
    """Appends uint64 arrays to a raw file, renamed into place on a clean exit (`load_raw` maps it)."""

    def __init__(self, path: Path):
        self.path, self.tmp = path, path.with_name(f"{path.name}.tmp-{os.getpid()}")

    def __enter__(self) -> RawWriter:
        self.fh = self.tmp.open("wb")
        return self

    def write(self, array: np.ndarray) -> None:
        self.fh.write(np.ascontiguousarray(array, dtype=np.uint64).tobytes())

    def __exit__(self, kind: object, *_: object) -> None:
        self.fh.close()
        if kind is None:
            os.replace(self.tmp, self.path)


def load_raw(path: Path) -> np.ndarray:
    """A raw uint64 file, memory-mapped (an empty file maps to an empty array)."""
    if path.stat().st_size == 0:
        return np.empty(0, dtype=np.uint64)
    return np.asarray(np.memmap(path, dtype=np.uint64, mode="r"))
