"""The benchmark-problem contract (CanItEdit's schema) and its validation.

Every benchmark maps into `Problem`: `before` is the code to edit, `after` the reference
edit, one instruction per split (CanItEdit: descriptive and lazy; HumanEvalFix: one per
language), `tests` the code that must pass after the program. Two optional fields let a
benchmark run as its authors ran it (HumanEvalFix, bigcode's harness):

- `shown_tests`: tests the prompt shows after `before` (`shown`); a completion that repeats
  them is cut where they begin, since execution appends `tests` anyway (they run once);
- `prelude`: code run before the program but never shown (bigcode's import helper);
- `helpers`: benchmark text the tests call besides the program (HumanEvalFix's `poly`,
  `encode_cyclic`): a split run (docs/sandbox.md) binds them from this text, not from the program.

What only one benchmark kind needs travels in `payload`, a frozen dataclass that kind's loader
defines (`HumanEvalFixPayload`, `ApiUpdatePayload`, ...): typed fields, never string keys. A
payload that is an `Assembler` builds the program around the completion itself (HumanEvalFix Go
and Rust: the imports and declarations bigcode's harness adds where the completion lacks them).
`not_runnable` says why a problem cannot run on this machine (empty: it can).

A file with a missing or mistyped field fails with a message that names the problem and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from core.errors import UserError

CANITEDIT_FIELDS = {
    "id": (int, str),
    "name": (str,),
    "before": (str,),
    "after": (str,),
    "instruction_descriptive": (str,),
    "instruction_lazy": (str,),
    "tests": (str,),
}


class BenchmarkError(UserError, ValueError):
    """A benchmark file or record is unusable; the message names the problem and field."""


@runtime_checkable
class Assembler(Protocol):
    """A payload whose benchmark builds the program around the completion (see the module docstring)."""

    def assemble(self, code: str, tests: str) -> str: ...


@dataclass(frozen=True)
class Problem:
    id: str
    name: str
    before: str
    after: str
    tests: str
    instructions: dict[str, str]  # split -> instruction
    language: str = "python"
    taxonomy: dict[str, Any] = field(default_factory=dict)
    payload: Any = None  # the kind's own frozen dataclass (see the module docstring)
    shown_tests: str = ""  # tests the prompt shows after `before`
    prelude: str = ""  # runs before the program, never shown to the model
    helpers: str = ""  # functions of the benchmark's text the tests call (bound on the trusted side)
    not_runnable: tuple[str, ...] = ()  # why this machine cannot run it; empty: it can

    @property
    def splits(self) -> list[str]:
        return list(self.instructions)

    @property
    def shown(self) -> str:
        """The code the prompt shows: `before`, then the tests where the benchmark shows them."""
        return f"{self.before}\n{self.shown_tests}" if self.shown_tests else self.before

    def program(self, code: str) -> str:
        """The program that runs for a completion's extracted `code`.

        >>> p = Problem("1", "p", "f = 0\\n", "f = 1\\n", "assert f\\n", {"s": "fix"},
        ...             shown_tests="assert f\\n", prelude="import math")
        >>> p.program("f = 1\\n\\nassert f\\nassert f\\n")
        'import math\\nf = 1\\n\\n'
        """
        first = next((line for line in self.shown_tests.splitlines() if line.strip()), None)
        if first is not None:
            lines = code.splitlines(keepends=True)
            for i, line in enumerate(lines):
                if line.rstrip("\r\n") == first:
                    code = "".join(lines[:i])
                    break
        if self.prelude and code.strip():
            code = f"{self.prelude}\n{code}"
        if isinstance(self.payload, Assembler) and code.strip():
            code = self.payload.assemble(code, self.tests)
        return code


def problem_from_canitedit(record: dict[str, Any], where: str) -> Problem:
    for key, types in CANITEDIT_FIELDS.items():
        if key not in record:
            raise BenchmarkError(
                f"{where}: problem {record.get('name', record.get('id', '?'))!r} lacks field {key!r}"
            )
        if not isinstance(record[key], types):
            raise BenchmarkError(
                f"{where}: problem {record.get('name', '?')!r} field {key!r} must be "
                f"{' or '.join(t.__name__ for t in types)}, got {type(record[key]).__name__}"
            )
    taxonomy = record.get("taxonomy") or {}
    if not isinstance(taxonomy, dict) or not all(
        isinstance(taxonomy.get(k), (str, type(None))) for k in ("change_kind", "topic")
    ):
        raise BenchmarkError(
            f"{where}: problem {record['name']!r} field 'taxonomy' must be an object whose change_kind and "
            "topic are strings"
        )
    return Problem(
        id=str(record["id"]),
        name=record["name"],
        before=record["before"],
        after=record["after"],
        tests=record["tests"],
        instructions={"descriptive": record["instruction_descriptive"], "lazy": record["instruction_lazy"]},
        taxonomy=taxonomy,
    )


def read_jsonl(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(location, record) for each non-empty line; a broken line is a BenchmarkError."""
    if not path.is_file():
        raise BenchmarkError(
            f"benchmark file {path} does not exist; check benchmark.path (or the decontamination list)"
        )
    records = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise BenchmarkError(f"{path}:{line_no}: not JSON ({err.msg})") from err
        if not isinstance(record, dict):
            raise BenchmarkError(f"{path}:{line_no}: a problem must be a JSON object")
        records.append((f"{path}:{line_no}", record))
    return records


def check_unique(problems: list[Problem], source: str) -> list[Problem]:
    seen: set[str] = set()
    for p in problems:
        if p.id in seen:
            raise BenchmarkError(f"{source}: problem id {p.id!r} appears twice")
        seen.add(p.id)
    if not problems:
        raise BenchmarkError(f"{source}: no problems")
    return problems


def read_records(path: Path, required: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The objects of a jsonl file, each holding `required` keys; a broken line or a missing key is
    a BenchmarkError naming the file, the line and the key (one line for the user, never a traceback)."""
    rows = []
    for where, record in read_jsonl(path):
        missing = [k for k in required if k not in record]
        if missing:
            raise BenchmarkError(f"{where}: lacks {missing}")
        rows.append(record)
    return rows
