"""The API-update editing benchmark, as built by `python -m eval.build_apiupdate` (problems.jsonl).

Each row is one problem under one modified API in one split (reliability, generalization,
specificity, nonworkaround). Mapped into `Problem`: before = the prompt (signature and
docstring), after = the canonical solution rewritten to the modified API, tests = the
problem's tests, one instruction under the row's split; `extra` carries what the enforcing
sandbox needs (`modification`, `entry_point`, `n_params`) and the row's `api`, `type`,
`task_id`, `source` and unmodified `original` program.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.problems import BenchmarkError, Problem, check_unique, read_jsonl

FIELDS = (
    "id",
    "task_id",
    "split",
    "api",
    "type",
    "modification",
    "prompt",
    "reference",
    "tests",
    "entry_point",
)
SPLITS = ("reliability", "generalization", "specificity", "nonworkaround")


def problem_from_row(row: dict[str, Any], where: str) -> Problem:
    for key in FIELDS:
        if key not in row:
            raise BenchmarkError(f"{where}: row {row.get('id', '?')!r} lacks field {key!r}")
    if row["split"] not in SPLITS:
        raise BenchmarkError(f"{where}: split {row['split']!r} is not one of {SPLITS}")
    if not isinstance(row["modification"], dict):
        raise BenchmarkError(f"{where}: field 'modification' must be an object")
    return Problem(
        id=str(row["id"]),
        name=f"{row['task_id']} {row['api']}/{row['type']}",
        before=row["prompt"],
        after=row["reference"],
        tests=row["tests"],
        instructions={row["split"]: row.get("instruction") or "Complete the function."},
        extra={
            k: row.get(k)
            for k in (
                "task_id",
                "source",
                "api",
                "type",
                "modification",
                "entry_point",
                "n_params",
                "original",
            )
        },
    )


def load_apiupdate(path: str | None) -> list[Problem]:
    """Problems from a built folder (its problems.jsonl) or a problems.jsonl file."""
    if path is None:
        raise BenchmarkError(
            "benchmark=apiupdate needs benchmark.path=<folder written by python -m eval.build_apiupdate>"
        )
    file = Path(path)
    if file.is_dir():
        file = file / "problems.jsonl"
    return check_unique([problem_from_row(r, where) for where, r in read_jsonl(file)], str(path))
