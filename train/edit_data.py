"""Load edit-example datasets, mix them by weight, shuffle and hold out a validation split.

Input is anything in the edit-example contract (`core/schema.py`; `before, after, instruction`
at least): a hub dataset named `hub:ID`, a local jsonl/json/parquet file, a folder of such
files, a `save_to_disk` folder, or a folder built by `python -m data_pipeline.build`. A name
without `hub:` is a path and must exist. Other schemas map in with a column mapping (CommitPackFT:
`{old_contents: before, new_contents: after, subject: instruction}`).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import datasets
from datasets import Dataset, DatasetDict, concatenate_datasets
from datasets.exceptions import DatasetGenerationError

from core.errors import UserError
from core.hub import is_hub, load_hub_dataset
from core.schema import REQUIRED_COLUMNS, build_output
from train.config import DataConfig, DatasetSpec
from train.synthetic_edits import synthetic_edits, task_edits

log = logging.getLogger(__name__)

_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


class DataError(UserError, ValueError):
    """A dataset cannot be used for training; the message names the dataset and the cause."""


@dataclass
class EditSplits:
    train: Dataset
    validation: Dataset | None
    counts: dict = field(default_factory=dict)  # per-source rows and drops, for the run log


def _load_local(path: Path, split: str) -> Dataset:
    path = build_output(path) or path  # a `python -m data_pipeline.build` output folder
    if path.is_dir():
        if (
            (path / "dataset_info.json").exists()
            or (path / "dataset_dict.json").exists()
            or (path / "state.json").exists()
        ):
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, DatasetDict):
                if split not in loaded:
                    raise DataError(f"{path}: no split {split!r}; it has {sorted(loaded)}")
                loaded = loaded[split]
            return loaded
        files = sorted(p for p in path.rglob("*") if p.suffix in _FILE_BUILDERS)
        if not files:
            raise DataError(f"{path}: a folder with no save_to_disk dataset and no jsonl/json/parquet files")
        builders = {_FILE_BUILDERS[p.suffix] for p in files}
        if len(builders) > 1:
            raise DataError(f"{path}: mixes json and parquet files; keep one kind per folder")
        return _load_files(path, builders.pop(), [str(p) for p in files])
    builder = _FILE_BUILDERS.get(path.suffix)
    if builder is None:
        raise DataError(f"{path}: unsupported file type {path.suffix!r}; use jsonl, json or parquet")
    return _load_files(path, builder, [str(path)])


def _load_files(path: Path, builder: str, files: list[str]) -> Dataset:
    """``files`` through datasets' ``builder``; a file it cannot parse (a truncated last line, a
    corrupt parquet file) is a DataError naming the file and the parser's own first line."""
    try:
        return datasets.load_dataset(builder, data_files=files, split="train")
    except DatasetGenerationError as err:
        cause = err.__cause__ or err.__context__ or err
        first = next((line.strip() for line in str(cause).splitlines() if line.strip()), type(cause).__name__)
        raise DataError(
            f"{path}: cannot be read as {builder}: {type(cause).__name__}: {first[:300]}"
        ) from err


def load_one(spec: DatasetSpec, seed: int) -> Dataset:
    """Load one dataset of the mix, with its columns mapped onto the contract."""
    if spec.synthetic is not None and spec.synthetic_family == "tasks":
        return Dataset.from_list(task_edits(spec.synthetic, seed=seed))
    if spec.synthetic is not None:
        return Dataset.from_list(synthetic_edits(spec.synthetic, seed=seed))
    assert spec.path is not None
    if is_hub(spec.path):
        ds = load_hub_dataset(spec.path, spec.subset, spec.split, "data.path")
    else:
        local = Path(spec.path).expanduser()
        if not local.exists():
            raise DataError(
                f"dataset {spec.path!r} does not exist; fix the path or write hub:ID for a hub dataset"
            )
        ds = _load_local(local, spec.split)
    missing_sources = [src for src in spec.columns if src not in ds.column_names]
    if missing_sources:
        raise DataError(
            f"dataset {spec.path!r}: column mapping names {missing_sources}, which it lacks; "
            f"its columns are {ds.column_names}"
        )
    mapping = {src: dst for src, dst in spec.columns.items() if src != dst}
    clashing = [dst for dst in mapping.values() if dst in ds.column_names and dst not in mapping]
    if clashing:
        ds = ds.remove_columns(clashing)
    ds = ds.rename_columns(mapping)
    missing = [c for c in REQUIRED_COLUMNS if c not in ds.column_names]
    if missing:
        raise DataError(
            f"dataset {spec.path!r} lacks column(s) {missing} (has {ds.column_names}); "
            "map them with data.columns / data.datasets[].columns, e.g. {old_contents: before}"
        )
    return ds


def _valid(row: dict) -> bool:
    return all(isinstance(row[c], str) for c in REQUIRED_COLUMNS) and bool(row["after"].strip())


def _apply_weight(ds: Dataset, weight: float, seed: int) -> Dataset:
    whole, frac = divmod(weight, 1.0)
    parts = [ds] * int(whole)
    take = math.floor(frac * len(ds))
    if take:
        parts.append(ds.shuffle(seed=seed).select(range(take)))
    return concatenate_datasets(parts) if len(parts) > 1 else parts[0]


def _contract_columns(ds: Dataset, source: str) -> Dataset:
    keep = [c for c in (*REQUIRED_COLUMNS, "id", "lang", "source") if c in ds.column_names]
    ds = ds.select_columns(keep)
    if "source" not in ds.column_names:
        ds = ds.add_column("source", [source] * len(ds))
    if "id" not in ds.column_names:
        ds = ds.add_column("id", [f"{source}-{i}" for i in range(len(ds))])
    if "lang" not in ds.column_names:
        ds = ds.add_column("lang", ["python"] * len(ds))
    return ds.cast_column("id", datasets.Value("string"))


def load_edit_splits(cfg: DataConfig) -> EditSplits:
    """Mix, filter, shuffle and split the configured datasets. Fails before any model loads."""
    counts: dict[str, dict] = {}
    parts = []
    for spec in cfg.specs():
        name = spec.path if spec.path is not None else f"synthetic:{spec.synthetic}"
        ds = load_one(spec, cfg.seed)
        n_in = len(ds)
        ds = ds.filter(_valid, desc=f"Checking fields of {name}")
        dropped = Counter({"missing_or_empty_field": n_in - len(ds)})
        ds = _apply_weight(_contract_columns(ds, Path(name).name or name), spec.weight, cfg.seed)
        counts[name] = {"input": n_in, "after_weight": len(ds), "dropped": dict(dropped)}
        if len(ds) == 0:
            raise DataError(
                f"dataset {name!r} has no usable rows (read {n_in}, all dropped: {dict(dropped)})"
            )
        parts.append(ds)
    mixed = concatenate_datasets(parts).shuffle(seed=cfg.seed)
    if cfg.max_examples is not None:
        mixed = mixed.select(range(min(cfg.max_examples, len(mixed))))
    n_val = int(cfg.val_size if cfg.val_size >= 1 else round(cfg.val_size * len(mixed)))
    if n_val >= len(mixed):
        raise DataError(f"data.val_size={cfg.val_size} leaves no training rows out of {len(mixed)}")
    validation = mixed.select(range(n_val)) if n_val else None
    train = mixed.select(range(n_val, len(mixed)))
    log.info("data: %d train rows, %d validation rows from %s", len(train), n_val, list(counts))
    return EditSplits(train=train, validation=validation, counts=counts)
