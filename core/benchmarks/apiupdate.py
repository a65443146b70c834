"""The API-update editing benchmark, as built by `python -m eval.build_apiupdate` (problems.jsonl).

Each row is one problem under one modified API in one split (reliability, generalization,
specificity, nonworkaround). Mapped into `Problem`: before = the prompt (signature and
docstring), after = the canonical solution rewritten to the modified API, tests = the
problem's tests, one instruction under the row's split; `ApiUpdatePayload` carries what the
enforcing sandbox needs (`modification`, `entry_point`, `n_params`) and the row's `api`, `type`,
`task_id`, `source` and unmodified `original` program.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.benchmarks.options import BenchmarkOptions
from core.problems import BenchmarkError, Problem, check_unique, read_jsonl
from core.signatures import Signature, SignatureError

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


# How a benchmark is built (eval/apiupdate/builder.py): the study's choice first, then ours.
BUILD_CHOICES = {
    "types_per_api": ("one", "all"),
    "s4_form": ("tuple", "value"),
    "nonworkaround": ("appendix_b", "extended", "none"),
    "disjoint": ("per_api", "across_apis"),
}

MODIFICATION_FIELDS = ("api", "type", "module", "name", "new_name", "signature", "old_signature")
TYPES = ("R1", "S1", "S2", "S3", "S4", "none")


@dataclass(frozen=True)
class Modification:
    """One synthetic modified API; `spec()` is what the in-sandbox runtime installs."""

    api: str  # builtins.len, math.sqrt
    type: str  # R1 | S1 | S2 | S3 | S4 | none (the unmodified API, counted)
    module: str
    name: str
    new_name: str
    signature: str  # the new signature, "(x, /, *, errors)"
    old_signature: str
    param: str | None = None  # S1/S2: the added parameter
    swap: tuple[int, int] | None = None  # S3
    roles: tuple[str, ...] | None = None  # S3: roles of the swapped parameters, old order
    result_name: str | None = None  # S4
    result_form: str = "tuple"  # S4: "tuple" (the study's: read `[0]`) | "value" (ours: read `.value`)

    @property
    def id(self) -> str:
        return f"{self.api}/{self.type}"

    @property
    def display(self) -> str:
        """The new API as a caller writes it (`length`, `math.square_root`)."""
        return self.new_name if self.module == "builtins" else f"{self.module}.{self.new_name}"

    @property
    def old_display(self) -> str:
        return self.name if self.module == "builtins" else f"{self.module}.{self.name}"

    @property
    def result_read(self) -> str:
        """S4: what a caller appends to a call to get the old value (`[0]` or `.value`)."""
        return ".value" if self.result_form == "value" else "[0]"

    @property
    def new_api(self) -> str:
        return f"{self.module}.{self.new_name}"

    @property
    def notice(self) -> str:
        """The API-update notice: what changed and the new signature, in one paragraph."""
        old, new, sig = self.old_display, self.display, f"{self.display}{self.signature}"
        if self.type == "R1":
            return (
                f"API update: `{old}` was renamed to `{new}`; `{old}` no longer exists. Signature: `{sig}`."
            )
        if self.type == "S1":
            return (
                f"API update: `{old}` takes a new optional keyword argument `{self.param}` (default False); "
                f"with `{self.param}=True` it raises TypeError when an argument is None. Signature: `{sig}`."
            )
        if self.type == "S2":
            return (
                f'API update: `{old}` now requires the keyword argument `{self.param}`: "raise" (raise '
                f'errors as before) or "return_none" (return None instead of raising). Calls without it '
                f"fail. Signature: `{sig}`."
            )
        if self.type == "S3":
            return (
                f"API update: the first two parameters of `{old}` swapped places. Signature: `{sig}` "
                f"(previously `{old}{self.old_signature}`)."
            )
        if self.type == "S4" and self.result_form == "value":
            return (
                f"API update: `{old}` now returns a `{self.result_name}` object; the value it used to return "
                f"is its `.value` attribute. Signature: `{sig}`."
            )
        if self.type == "S4":
            return (
                f"API update: `{old}` now returns a tuple; the value it used to return is its first item, "
                f"`{new}(...)[0]`. Signature: `{sig}`."
            )
        return f"`{old}` is unchanged."

    def spec(self) -> dict[str, Any]:
        spec = asdict(self)
        spec["notice"] = self.notice
        return spec

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Modification:
        fields = {k: spec[k] for k in cls.__dataclass_fields__ if k in spec}
        if fields.get("type") == "S4" and "result_form" not in spec:
            fields["result_form"] = (
                "value"  # built before the tuple form existed: their references read .value
            )
        for key in ("swap", "roles"):
            if fields.get(key) is not None:
                fields[key] = tuple(fields[key])
        return cls(**fields)


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
    modification: Modification  # what the enforcing runtime installs (checked at load)
    entry_point: str
    n_params: int | None
    original: str | None  # the unmodified canonical program


def _modification(mod: Any, where: str) -> Modification:
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
            Signature.from_text(mod[key])
        except SignatureError as err:
            raise BenchmarkError(f"{where}: modification {key}: {err}") from None
    return Modification.from_spec(mod)


def problem_from_row(row: dict[str, Any], where: str) -> Problem:
    for key in FIELDS:
        if key not in row:
            raise BenchmarkError(f"{where}: row {row.get('id', '?')!r} lacks field {key!r}")
    if row["split"] not in SPLITS:
        raise BenchmarkError(f"{where}: split {row['split']!r} is not one of {SPLITS}")
    modification = _modification(row["modification"], where)
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
            modification=modification,
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
