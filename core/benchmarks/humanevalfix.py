"""HumanEvalFix (HumanEvalPack): fix the bug in a function, as bigcode-evaluation-harness runs it.

bigcode's `humanevalpack.py` (`HumanEvalFixBase.get_prompt`) shows the model a context and
asks "Fix bugs in {entry_point}."; the variant decides the context:

- `fixtests` (bigcode's standard task, `humanevalfixtests-<lang>`): declaration + buggy
  solution + "\\n" + the tests;
- `fixdocs` (`humanevalfixdocs-<lang>`): the prompt with its docstring + buggy solution;
- `fix`: declaration + buggy solution only (no ground truth shown; the earlier mapping).

For Rust the declaration is preceded by `fn main(){}` (bigcode's `get_prompt_base`; its prompt
already holds it), so the file also builds as a binary.

Mapped into the CanItEdit contract: before = what the model must edit (declaration or
docstring prompt + buggy solution), after = the same + canonical solution, `shown_tests` =
the tests under `fixtests`, instruction = "Fix bugs in {entry_point}.", tests = the
language's test code as is (it already calls `check(...)` or its own test function, so it
runs once), `prelude` = bigcode's `IMPORT_HELPER` for Python and C++, put before the program
at execution. Go and Rust programs are assembled as bigcode's `process_results` assembles them
(`GoPayload.assemble`, `RustPayload.assemble`): Go's test setup (`package main`, `testing`,
testify's `assert`) without the imports the completion already has, plus the helper packages it
uses but does not import; Rust's `fn main(){}` and declaration lines the completion lacks. For Python, `import_helper="strict"` (the default) drops the helper's two numpy
lines: numpy gives a program raw memory access, so a problem that imports it runs in the
sandbox's declared unverified mode, and no problem's solution or tests use it (0 of 164);
`import_helper="bigcode"` keeps all sixteen lines (every problem then passes as
`passed_unverified`). Splits are languages. Reads `<path>/<lang>.jsonl` (HumanEvalPack's layout): by
default the copy shipped in `core/data/humanevalpack/` (MIT, see its LICENSE), or the hub's
`bigcode/humanevalpack` when the path is `hub:bigcode/humanevalpack`.
"""

from __future__ import annotations

import ast
import re
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


# bigcode's IMPORT_HELPER["go"]: standard packages a Go program gets imported when it uses them.
GO_HELPER_PACKAGES = ("math", "strings", "fmt", "strconv", "time", "bytes", "regexp", "sort", "math/rand", "crypto/md5")  # fmt: skip
RUST_MAIN = "fn main(){}\n"


@dataclass(frozen=True)
class GoPayload(HumanEvalFixPayload):
    """A Go problem's payload: its test setup, which the program is assembled with."""

    setup: str = ""

    def assemble(self, code: str, tests: str) -> str:
        """bigcode's `process_results` for Go (per sample; bigcode's loop also drops, from later samples
        of the same problem, the setup imports an earlier one had): the setup without the imports `code`
        already imports, an import of each helper package that the file uses outside comments and does not
        import, then `code`. bigcode imports such a package by its last path element (`"rand"`, which
        does not compile); we import its path (`"math/rand"`)."""
        setup = self.setup + "\n"
        imported = _go_imports(code)
        for line in setup.split("\n"):
            name = line.replace("import", "").replace("(", "").replace(")", "").strip()
            if name.startswith('"') and name in imported:
                setup = setup.replace(name, "")
        whole = setup + code + "\n\n" + tests
        used = [p for p in GO_HELPER_PACKAGES if f'"{p}"' not in whole and _go_mentions(whole, p)]
        imports = "import (\n" + "\n".join(f'    "{p}"' for p in used) + "\n)\n" if used else ""
        if "package main" in setup:
            code = code.replace("package main", "")
        return setup + imports + code


_GO_COMMENTS = re.compile(r'"(?:\\.|[^"\\\n])*"|`[^`]*`|//[^\n]*|/\*.*?\*/', re.S)
_GO_IMPORT = re.compile(r'^\s*import\s+([\w.]+\s+)?("[^"\n]*")|^\s*import\s*\(([^)]*)\)', re.M)


def _go_imports(code: str) -> set[str]:
    """The quoted paths `code`'s import declarations name under the package's own name. bigcode drops
    a setup import whose text appears anywhere in the code; a comment holding
    `"github.com/stretchr/testify/assert"` then removed testify's import and let the program declare
    an `assert` of its own for the tests. An import under another name (`_`, `.`, an alias) binds
    no `assert`: the setup keeps its own."""
    code = _GO_COMMENTS.sub(lambda m: m.group() if m.group().startswith(('"', "`")) else "", code)
    paths: set[str] = set()
    for alias, single, block in _GO_IMPORT.findall(code):
        if single and not alias:
            paths.add(single)
        for line in block.split("\n"):
            found = re.search(r'^\s*("[^"\n]*")\s*;?\s*$', line)
            if found:
                paths.add(found.group(1))
    return paths


def _go_mentions(code: str, package: str) -> bool:
    """bigcode's test of whether Go code uses a package: `name.` on a line that is not a comment."""
    name = package.split("/")[-1] + "."
    return any(name in line for line in code.split("\n") if not line.strip().startswith("//"))


# Go/95's solution stops at a second key that agrees with the first (`else { break }`), which is
# right in Python's insertion-ordered dicts only: Go iterates a map in random order, and the
# solution as given passes under half of its runs. The reference checks every key.
GO_SOLUTION_FIXES = {
    "Go/95": (
        "        } else {\n            break\n        }\n    }\n    return state",
        "        }\n    }\n    return state",
    ),
}


def go_reference(record: dict[str, Any], after: str, variant: str) -> str:
    """Go's reference made a program that passes, where HumanEvalPack's data breaks bigcode's own
    construction: the declaration lacks the helper function the prompt defines and the solution calls
    (Go/10, 32, 38, 50; appended under fix and fixtests), a prompt imports a package its solution
    never uses (Go/27 under fixdocs; Go refuses unused imports, so the import is dropped), and one
    solution depends on the map's iteration order (`GO_SOLUTION_FIXES`)."""
    old, new = GO_SOLUTION_FIXES.get(record["task_id"], ("", ""))
    if old:
        after = after.replace(old, new, 1)
    rest = record["prompt"].removeprefix(record["import"]).rstrip("\n").split("\n")
    if variant != "fixdocs" and rest[-1].strip() == record["declaration"].strip():
        rest.pop()  # the entry point's signature, then its comment
        while rest and rest[-1].strip().startswith("//"):
            rest.pop()
        helpers = "\n".join(rest).strip("\n")
        after = f"{after.rstrip()}\n\n{helpers}\n" if helpers.strip() else after
    block = re.search(r"^import \((.*?)\n\)", after, re.M | re.S)
    for line in block.group(1).split("\n") if block else []:
        package = line.strip().strip('"')
        if package and not _go_mentions(after, package):
            after = after.replace(line + "\n", "", 1)
    return after


@dataclass(frozen=True)
class RustPayload(HumanEvalFixPayload):
    """A Rust problem's payload: its declaration, whose lines the program is completed with."""

    declaration: str = ""

    def assemble(self, code: str, tests: str) -> str:
        """bigcode's `process_results` for Rust: `fn main(){}` unless `code` has a main, each line of the
        declaration that `code` lacks (a signature only when no function of that name is there), then
        `code` up to a second `fn main()`."""
        head = "" if "fn main()" in code else RUST_MAIN
        for line in self.declaration.split("\n"):
            line = line.strip()
            if line not in code and not (line.startswith("fn") and line.split("(")[0] in code):
                head += line + "\n"
        return head + "fn main()".join(code.split("fn main()")[:2])


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


TOP_LEVEL_DEF = re.compile(r"^def\s+(\w+)", re.M)  # a top-level function's `def` starts its line


def test_helpers(record: dict[str, Any]) -> str:
    """The functions of a Python problem's declaration that its tests call besides the entry point
    (``poly``, ``encode_cyclic``, ``encode_shift``), with the declaration's imports: a split run binds
    them from this text, so a program cannot redefine what the tests check it with."""
    program = record["declaration"] + record["canonical_solution"]
    if not any(name != record["entry_point"] for name in TOP_LEVEL_DEF.findall(program)):
        return ""  # most problems: no function but the entry point (loading skips 164 parses and walks)
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return ""
    used = {n.id for n in ast.walk(ast.parse(record["test"])) if isinstance(n, ast.Name)}
    keep = [
        node
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        or (isinstance(node, ast.FunctionDef) and node.name != record["entry_point"] and node.name in used)
    ]
    if not any(isinstance(node, ast.FunctionDef) for node in keep):
        return ""
    return "\n\n".join(ast.unparse(node) for node in keep) + "\n"


def js_test_helpers(record: dict[str, Any]) -> str:
    """The text of a JavaScript problem's declaration before its entry point, where the tests call a
    function declared there (``poly``, ``encodeCyclic``, ``encodeShift``): a split run binds those
    names from this text on the tests' side, so a program cannot redefine what checks it."""
    declaration, entry = record["declaration"], re.escape(record["entry_point"])
    found = list(re.finditer(rf"^(?:const|let|var|function)\s+{entry}\b", declaration, re.M))
    if len(found) != 1:
        return ""
    before = declaration[: found[0].start()]
    names = re.findall(r"^(?:const|let|var|function)\s+([A-Za-z_$][\w$]*)", before, re.M)
    used = any(re.search(rf"(?<![\w$.]){re.escape(name)}(?![\w$])", record["test"]) for name in names)
    return before if used else ""


def problem_from_humanevalpack(
    record: dict[str, Any], language: str, where: str, variant: str = "fixtests", helper: str = "strict"
) -> Problem:
    if variant not in VARIANTS:
        raise BenchmarkError(f"HumanEvalFix variant {variant!r}: choose one of {VARIANTS}")
    for key in FIELDS:
        if not isinstance(record.get(key), str):
            raise BenchmarkError(f"{where}: problem {record.get('task_id', '?')!r} lacks text field {key!r}")
    head = record["prompt"] if variant == "fixdocs" else record["declaration"]
    if language == "rust" and variant != "fixdocs":
        head = RUST_MAIN + head
    payload = HumanEvalFixPayload(record["entry_point"], variant)
    after = _join(head, record["canonical_solution"])
    if language == "go":
        for key in ("test_setup", "import"):
            if not isinstance(record.get(key), str):
                raise BenchmarkError(f"{where}: problem {record['task_id']!r} lacks text field {key!r}")
        payload = GoPayload(record["entry_point"], variant, record["test_setup"])
        after = go_reference(record, after, variant)
    elif language == "rust":
        payload = RustPayload(record["entry_point"], variant, record["declaration"])
    return Problem(
        id=record["task_id"],
        name=record["task_id"].replace("/", "_"),
        before=_join(head, record["buggy_solution"]),
        after=after,
        tests=record["test"],
        instructions={language: f"Fix bugs in {record['entry_point']}."},
        language=language,
        taxonomy={"bug_type": record.get("bug_type"), "failure_symptoms": record.get("failure_symptoms")},
        payload=payload,
        shown_tests=record["test"] if variant == "fixtests" else "",
        prelude=import_helper(language, helper),
        helpers=test_helpers(record)
        if language == "python"
        else js_test_helpers(record)
        if language == "js"
        else "",
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
