"""The edit-example contract: what `python -m data_pipeline.build` writes and training reads.

A table (a `datasets.Dataset`) with these string columns, one row per edit:

    {"id": "r12", "before": "x = 1\\n", "after": "x = 2\\n", "instruction": "Make x two",
     "lang": "python", "source": "commits2023ft", "meta": "{}"}

`before`, `after` and `instruction` are required to train; the others are filled in when a
dataset lacks them. A build folder holds `dataset/` (save_to_disk) or `data.parquet`, next to
`manifest.json`, which accounts for every input row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

EDIT_COLUMNS = ("id", "before", "after", "instruction", "lang", "source", "meta")
REQUIRED_COLUMNS = ("before", "after", "instruction")

MANIFEST_FILE = "manifest.json"
DATASET_DIR = "dataset"
PARQUET_FILE = "data.parquet"
TASKS_FILE = "tasks.jsonl"  # pipeline=fix-tasks: the rows as RL tasks, in CanItEdit's schema


def edit_features() -> Any:
    """The columns as `datasets.Features` (all strings; `meta` is a JSON object as text)."""
    from datasets import Features, Value

    return Features({c: Value("string") for c in EDIT_COLUMNS})


def build_output(folder: Path) -> Path | None:
    """The table inside a build folder (`dataset/` or `data.parquet`), or None if not one."""
    if not (folder / MANIFEST_FILE).exists():
        return None
    return folder / DATASET_DIR if (folder / DATASET_DIR).is_dir() else folder / PARQUET_FILE
