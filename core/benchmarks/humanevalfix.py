"""HumanEvalFix (HumanEvalPack): fix the bug in a function, as bigcode-evaluation-harness runs it.

bigcode's `humanevalpack.py` (`HumanEvalFixBase.get_prompt`) shows the model a context and
asks "Fix bugs in {entry_point}."; the variant decides the context:

- `fixtests` (bigcode's standard task, `humanevalfixtests-<lang>`): declaration + buggy
  solution + "\\n" + the tests;
- `fixdocs` (`humanevalfixdocs-<lang>`): the prompt with its docstring + buggy solution;
- `fix`: declaration + buggy solution only (no ground truth shown; the earlier mapping).

Mapped into the CanItEdit contract: before = what the model must edit (declaration or
docstring prompt + buggy solution), after = the same + canonical solution, `shown_tests` =
the tests under `fixtests`, instruction = "Fix bugs in {entry_point}.", tests = the
language's test code as is (it already calls `check(...)` or its own test function, so it
runs once), `prelude` = bigcode's `IMPORT_HELPER` for Python and C++, put before the program
at execution. For Python, `import_helper="strict"` (the default) drops the helper's two numpy
lines: numpy gives a program raw memory access, so a problem that imports it runs in the
sandbox's declared unverified mode, and no problem's solution or tests use it (0 of 164);
`import_helper="bigcode"` keeps all sixteen lines (every problem then passes as
`passed_unverified`). Splits are languages. Reads `<path>/<lang>.jsonl` (HumanEvalPack's layout): by
default the copy shipped in `core/data/humanevalpack/` (MIT, see its LICENSE), or the hub's
`bigcode/humanevalpack` when the path is `hub:bigcode/humanevalpack`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.benchmarks.options import BenchmarkOptions
from core.errors import ConfigError
from core.hub import is_hub, load_hub_dataset
from core.problems import BenchmarkError, Problem, check_unique, read_jsonl

HUB_ID = "bigcode/humanevalpack"
SHIPPED = Path(__file__).resolve().parent.parent / "data" / "humanevalpack"
FIELDS = ("task_id", "prompt", "declaration", "buggy_solution", "canonical_solution", "test", "entry_point")
VARIANTS = ("fix", "fixtests", "fixdocs")
IMPORT_HELPERS = ("strict", "bigcode")


@dataclass
class HumanEvalFixOptions(BenchmarkOptions):
    name: str = "humanevalfix"
    languages: list[str] = field(default_factory=lambda: ["python"])  # the splits
    variant: str = "fixtests"  # fix | fixtests | fixdocs (bigcode's standard: fixtests)
    import_helper: str = "strict"  # strict (bigcode's minus numpy) | bigcode (all of it: unverified runs)

    def validate(self, key: str = "benchmark") -> None:
        super().validate(key)
        if self.variant not in VARIANTS:
            raise ConfigError(f"{key}.variant={self.variant!r}: choose one of {VARIANTS}")
        if self.import_helper not in IMPORT_HELPERS:
            raise ConfigError(f"{key}.import_helper={self.import_helper!r}: choose one of {IMPORT_HELPERS}")

    def variants(self) -> list[HumanEvalFixOptions]:
        return [replace(self, variant=v) for v in VARIANTS]


@dataclass(frozen=True)
class HumanEvalFixPayload:
    entry_point: str
    variant: str


# bigcode_eval/tasks/humanevalpack.py IMPORT_HELPER (from CodeGeeX), joined by newlines and
# put before each program; the languages we run that it has helpers for.
IMPORT_HELPER = {
    "python": [
        "import math",
        "import re",
        "import sys",
        "import copy",
        "import datetime",
        "import itertools",
        "import collections",
        "import heapq",
        "import statistics",
        "import functools",
        "import hashlib",
        "import numpy",
        "import numpy as np",
        "import string",
        "from typing import *",
        "from collections import *",
    ],
    "cpp": [
        "using namespace std;",
        "#include<stdlib.h>",
        "#include<algorithm>",
        "#include<cmath>",
        "#include<math.h>",
        "#include<numeric>",
        "#include<stdio.h>",
        "#include<vector>",
        "#include<set>",
        "#include<map>",
        "#include<queue>",
        "#include<stack>",
        "#include<list>",
        "#include<deque>",
        "#include<boost/any.hpp>",
        "#include<string>",
        "#include<climits>",
        "#include<cstring>",
        "#include<iostream>",
        "#include<sstream>",
        "#include<fstream>",
    ],
}


def _join(head: str, solution: str) -> str:
    """head + solution, minus lines the head already holds (CPP/38's declaration ends with the
    first lines of the function body, which the solutions repeat)."""
    lines = head.rstrip("\n").split("\n")
    body = [line.strip() for line in solution.split("\n")]
    for k in range(min(len(lines), len(body)) - 1, 1, -1):
        if [line.strip() for line in lines[-k:]] == body[:k] and any(body[:k]):
            return "\n".join(lines[:-k]) + "\n" + solution
    return head + solution


def import_helper(language: str, kind: str = "strict") -> str:
    """The prelude of a ``language`` program: bigcode's import helper, for Python without its numpy
    lines under ``kind="strict"`` (see the module docstring)."""
    lines = IMPORT_HELPER.get(language, [])
    if kind == "strict":
        lines = [line for line in lines if "numpy" not in line]
    return "\n".join(lines)


def problem_from_humanevalpack(
    record: dict[str, Any], language: str, where: str, variant: str = "fixtests", helper: str = "strict"
) -> Problem:
    if variant not in VARIANTS:
        raise BenchmarkError(f"HumanEvalFix variant {variant!r}: choose one of {VARIANTS}")
    for key in FIELDS:
        if not isinstance(record.get(key), str):
            raise BenchmarkError(f"{where}: problem {record.get('task_id', '?')!r} lacks text field {key!r}")
    head = record["prompt"] if variant == "fixdocs" else record["declaration"]
    return Problem(
        id=record["task_id"],
        name=record["task_id"].replace("/", "_"),
        before=_join(head, record["buggy_solution"]),
        after=_join(head, record["canonical_solution"]),
        tests=record["test"],
        instructions={language: f"Fix bugs in {record['entry_point']}."},
        language=language,
        taxonomy={"bug_type": record.get("bug_type"), "failure_symptoms": record.get("failure_symptoms")},
        payload=HumanEvalFixPayload(record["entry_point"], variant),
        shown_tests=record["test"] if variant == "fixtests" else "",
        prelude=import_helper(language, helper),
    )


def load_humanevalfix(
    path: str | None, languages: list[str], variant: str = "fixtests", helper: str = "strict"
) -> list[Problem]:
    """`path`: None (the shipped copy), `hub:ID`, or a folder of `<language>.jsonl` / one such file."""
    source = path or str(SHIPPED)
    problems: list[Problem] = []
    for language in languages:
        if is_hub(source):
            ds = load_hub_dataset(source, language, "test", "benchmark.path")
            name = source.removeprefix("hub:")
            records = [(f"{name}:{language}[{i}]", dict(r)) for i, r in enumerate(ds)]
        else:
            folder = Path(source)
            file = folder / f"{language}.jsonl" if folder.is_dir() else folder
            if path is None and not file.is_file():
                raise BenchmarkError(
                    f"HumanEvalFix {language}: no shipped copy at {file}; pass benchmark.path=FOLDER "
                    f"of <language>.jsonl files, or benchmark.path=hub:{HUB_ID}"
                )
            records = read_jsonl(file)
        problems += [problem_from_humanevalpack(r, language, where, variant, helper) for where, r in records]
    return check_unique(problems, source)


def load(options: HumanEvalFixOptions) -> list[Problem]:
    return load_humanevalfix(options.path, list(options.languages), options.variant, options.import_helper)
