"""The API-update editing benchmark, as built by `python -m eval.build_apiupdate` (problems.jsonl).

Each row is one problem under one modified API in one split (reliability, generalization,
specificity, nonworkaround). Mapped into `Problem`: before = the prompt (signature and
docstring), after = the canonical solution rewritten to the modified API, tests = the
problem's tests, one instruction under the row's split; `ApiUpdatePayload` carries what the
enforcing sandbox needs (`modification`, `entry_point`, `n_params`) and the row's `api`, `type`,
`task_id`, `source` and unmodified `original` program.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.benchmarks.options import BenchmarkOptions
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


MODIFICATION_FIELDS = ("api", "type", "module", "name", "new_name", "signature", "old_signature")
TYPES = ("R1", "S1", "S2", "S3", "S4", "none")


@dataclass
class ApiUpdateOptions(BenchmarkOptions):
    name: str = "apiupdate"
    built_by = "python -m eval.build_apiupdate"


@dataclass(frozen=True)
class ApiUpdatePayload:
    task_id: str
    source: str | None
    api: str
    type: str  # R1 | S1 | S2 | S3 | S4 | none
    modification: dict[str, Any]  # the spec the enforcing runtime installs (checked at load)
    entry_point: str
    n_params: int | None
    original: str | None  # the unmodified canonical program


def _check_modification(mod: Any, where: str) -> None:
    """The modification the enforcing runtime installs: every field it reads, well-formed."""
    if not isinstance(mod, dict):
        raise BenchmarkError(f"{where}: field 'modification' must be an object")
    missing = [k for k in MODIFICATION_FIELDS if not isinstance(mod.get(k), str)]
    if missing:
        raise BenchmarkError(f"{where}: modification lacks {missing} (strings)")
    if mod["type"] not in TYPES:
        raise BenchmarkError(f"{where}: modification type {mod['type']!r} is not one of {TYPES}")
    if mod["type"] in ("S1", "S2") and not isinstance(mod.get("param"), str):
        raise BenchmarkError(f"{where}: a {mod['type']} modification needs its added 'param'")
    if mod["type"] == "S3" and not (isinstance(mod.get("swap"), list) and isinstance(mod.get("roles"), list)):
        raise BenchmarkError(f"{where}: an S3 modification needs 'swap' and 'roles' lists")
    for key in ("signature", "old_signature"):
        try:
            ast.parse(f"def _api{mod[key]}:\n    pass\n")
        except SyntaxError:
            raise BenchmarkError(
                f"{where}: modification {key} {mod[key]!r} is not a parameter list"
            ) from None


def problem_from_row(row: dict[str, Any], where: str) -> Problem:
    for key in FIELDS:
        if key not in row:
            raise BenchmarkError(f"{where}: row {row.get('id', '?')!r} lacks field {key!r}")
    if row["split"] not in SPLITS:
        raise BenchmarkError(f"{where}: split {row['split']!r} is not one of {SPLITS}")
    _check_modification(row["modification"], where)
    if row.get("n_params") is not None and not isinstance(row["n_params"], int):
        raise BenchmarkError(f"{where}: field 'n_params' must be an integer or null")
    return Problem(
        id=str(row["id"]),
        name=f"{row['task_id']} {row['api']}/{row['type']}",
        before=row["prompt"],
        after=row["reference"],
        tests=row["tests"],
        instructions={row["split"]: row.get("instruction") or "Complete the function."},
        payload=ApiUpdatePayload(
            task_id=str(row["task_id"]),
            source=row.get("source"),
            api=row["api"],
            type=row["type"],
            modification=row["modification"],
            entry_point=row["entry_point"],
            n_params=row.get("n_params"),
            original=row.get("original"),
        ),
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


def load(options: ApiUpdateOptions) -> list[Problem]:
    return load_apiupdate(options.path)
