"""A fix-task build's rows as RL tasks: `tasks.jsonl` in CanItEdit's schema, so `train/rl.py` reads
them as `tasks.sources=[{name: canitedit, path: OUT/tasks.jsonl}]` and judges them as evaluation
judges CanItEdit (split runs of the unit's tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from datasets import Dataset


def task_record(row: dict[str, Any]) -> dict[str, Any]:
    meta = json.loads(row["meta"])
    return {
        "id": row["id"],
        "name": f"{meta['module'].removesuffix('.py')}:{meta['unit']}".replace("/", "."),
        "full_name": row["id"],
        "before": row["before"],
        "after": row["after"],
        "tests": meta["tests"],
        "instruction_descriptive": row["instruction"],
        "instruction_lazy": meta["instruction_lazy"],
        "taxonomy": {"change_kind": "corrective", "topic": meta["operator"]},
    }


def write_tasks(ds: Dataset, path: Path) -> None:
    with path.open("w") as fh:
        for row in ds:
            fh.write(json.dumps(task_record(row)) + "\n")
