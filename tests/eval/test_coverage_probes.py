"""ExcessCode's lines measured in the verdict run (score.coverage=probes) equal coverage.py's.

A split verdict run collects the program's executed lines with slipcover's probes in the candidate's
process and the tests' lines by tracing the trusted process (core/sandbox/line_probes.py); the server
turns them into coverage.py's analysis of main.py. Here, on every HumanEvalFix Python reference,
every CanItEdit fixture (both test styles) and 200 passing variants of them that leave code
unexecuted in the shapes coverage.py treats specially (dead functions and branches, multi-line
statements, exception handlers, ``match``, decorators, excluded lines, generators), the statements,
exclusions and missing lines equal, line for line, those of the second run under coverage.py's
tracer (``score.coverage=coverage.py``, CanItEdit's way), and so do ExcessCode's figures.
"""

from __future__ import annotations

import ast
import json
import textwrap
from dataclasses import replace

import pytest

from core.benchmarks import load_benchmark
from core.benchmarks.canitedit import FIXTURES
from core.problems import Problem
from core.sandbox import SandboxLimits, make_sandbox
from core.sandbox.declared import unverified_flags
from eval.excess_code import CoverageReport, coverage_reports
from eval.execute import program_verdicts
from eval.samples import SampleStore
from eval.scoring import measure_coverage
from eval.split_mode import run_modes

LIMITS = SandboxLimits(timeout_s=30)

APPENDED = [
    # a dead function with a loop and a docstring
    '\n\ndef _unused_total(values):\n    """Never called."""\n    total = 0\n    for v in values:\n'
    "        total += v\n    return total\n",
    # a class: an excluded abstract method (CanItEdit's .coveragerc), an unused static method, a
    # multi-line statement that runs
    "\n\nimport abc\n\n\nclass _Shape(abc.ABC):\n    sides = {\n        'a': 1,\n        'b': 2,\n    }\n\n"
    "    @abc.abstractmethod\n    def area(self):\n        return 0\n\n    @staticmethod\n"
    "    def unused(\n        x,\n        y,\n    ):\n        return x + y\n",
    # a handler that never runs, and a finally that does
    "\n\ntry:\n    _parsed = int('1')\nexcept ValueError:\n    _parsed = 0\nexcept (TypeError,\n"
    "        KeyError):\n    _parsed = -1\nelse:\n    _parsed += 1\nfinally:\n    _done = True\n",
    # match with cases that never match
    "\n\n_value = 3\nmatch _value:\n    case 0:\n        _kind = 'zero'\n    case [_, _]:\n"
    "        _kind = 'pair'\n    case _:\n        _kind = 'other'\n",
    # a comprehension and a lambda over several lines, a generator never started
    "\n\n_squares = [\n    v * v\n    for v in range(3)\n    if v\n]\n_key = (lambda\n    v: -v)\n\n\n"
    "def _gen():\n    yield 1\n    yield 2\n",
    # excluded lines and a while loop that never runs
    "\n\ndef _excluded():  # pragma: no cover\n    return 1\n\n\nwhile False:\n    _never = 1\n"
    "_after_loop = 1\n",
]


def guarded(program: str) -> str | None:
    """The program with a branch that never runs (a multi-line raise) at the top of its first
    function's body; None where it has no such body on lines of its own."""
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return None
    function = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if function is None or function.body[0].lineno == function.lineno:
        return None
    first = function.body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant)
    anchor = function.body[1] if docstring and len(function.body) > 1 else first
    if anchor is first and docstring:
        return None
    lines = program.splitlines(keepends=True)
    indent = " " * anchor.col_offset
    guard = textwrap.indent(
        "if __name__ == '__never__':\n    raise SystemExit(\n        'unreachable'\n    )\n", indent
    )
    return "".join(lines[: anchor.lineno - 1]) + guard + "".join(lines[anchor.lineno - 1 :])


def humanevalfix() -> list[tuple[str, Problem, str]]:
    return [
        (p.id, p, p.program(p.after))
        for p in load_benchmark("humanevalfix", None, languages=["python"]).problems
    ]


def fixtures() -> list[tuple[str, Problem, str]]:
    problems = {p.id: p for p in load_benchmark("fixtures", None).problems if p.language == "python"}
    rows = [json.loads(line) for line in FIXTURES.read_text().splitlines() if line.strip()]
    out = []
    for row in rows:
        problem = problems.get(row["id"]) or Problem(
            row["id"], row["id"], row["before"], row["after"], row["tests"], {"descriptive": ""}
        )
        pragma = "### START TESTS ###\nif True:  # pragma: no cover\n" + textwrap.indent(row["tests"], "    ")
        for style, tests in (("plain", row["tests"]), ("pragma", pragma)):
            out.append((f"{row['id']}/{style}", _with_tests(problem, tests), row["after"]))
    return out


def variants(cases: list[tuple[str, Problem, str]], count: int) -> list[tuple[str, Problem, str]]:
    """``count`` variants of the cases' programs, each with one shape of code that never runs."""
    out = []
    shapes = len(APPENDED) + 1
    for i in range(shapes * len(cases)):  # case after case, each round with the next shape
        name, problem, program = cases[i % len(cases)]
        shape = (i + i // len(cases)) % shapes
        if problem.helpers:
            continue
        changed = guarded(program) if shape == len(APPENDED) else program.rstrip("\n") + APPENDED[shape]
        if changed is not None:
            out.append((f"{name}+{shape}", problem, changed))
        if len(out) == count:
            break
    return out


def _with_tests(problem: Problem, tests: str) -> Problem:
    return replace(problem, tests=tests)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Per case: the verdict run's record (split, probes), coverage.py's report of the same program,
    and the coverage record the score stage writes from them (`measure_coverage`, as eval.run)."""
    base = humanevalfix() + fixtures()
    cases = base + variants(base, 200)
    store = SampleStore(tmp_path_factory.mktemp("store") / "samples.jsonl")
    with make_sandbox("auto", workers=2, limits=LIMITS, measured_split=True) as sandbox:
        modes = run_modes(sandbox, list({p.id: p for _, p, _ in cases}.values()), LIMITS)
        jobs = [(p, code) for _, p, code in cases]
        records = program_verdicts(jobs, sandbox, LIMITS, 1 << 20, coverage=True)
        unverified = unverified_flags(sandbox, [(p.prelude, p.before, p.after, p.tests) for _, p, _ in cases])
        traced = coverage_reports(sandbox, [(code, p.tests) for _, p, code in cases], LIMITS, unverified)
        for i, ((name, _, code), record) in enumerate(zip(cases, records, strict=True)):
            head = {"problem": name, "split": "s", "index": i}
            store.append({"type": "sample", **head, "code": code})
            store.append({"type": "execution", **head, **record})
        measure_coverage(store, {name: replace(p, id=name) for name, p, _ in cases}, sandbox, LIMITS)
    scored = {key[0]: record for key, record in store.of_type("coverage").items()}
    return cases, modes, records, traced, scored


def test_the_cases_are_what_the_docstring_says(measured):
    cases, modes, records, traced, _ = measured
    names = [name for name, _, _ in cases]
    assert sum("+" in n for n in names) == 200
    assert sum(n.startswith("Python/") and "+" not in n for n in names) == 164
    assert all(r["passed"] for r in records), [
        (n, r["detail"]) for (n, _, _), r in zip(cases, records, strict=True) if not r["passed"]
    ]
    assert all(isinstance(t, CoverageReport) for t in traced)
    # most of them run split without helpers: measured in their verdict run
    assert sum(modes[p.id].split and not p.helpers for _, p, _ in cases) >= 0.9 * len(cases)
    variants_missing = sum(
        bool(t.missing) for (name, _, _), t in zip(cases, traced, strict=True) if "+" in name
    )
    assert variants_missing >= 150, "the variants leave lines unexecuted"


def test_probes_equal_coverage_py_line_for_line(measured):
    cases, modes, records, traced, _ = measured
    compared = 0
    for (name, problem, code), record, report in zip(cases, records, traced, strict=True):
        if "coverage" not in record:  # runs in process: measured while scoring (the test below)
            continue
        ours = CoverageReport.from_measured(
            record["coverage"], len((code + "\n" + problem.tests).splitlines())
        )
        assert (ours.statements, ours.excluded, ours.missing) == (
            report.statements,
            report.excluded,
            report.missing,
        ), name
        assert ours.percent == report.percent and ours.reported_missing == report.reported_missing, name
        compared += 1
    assert compared == sum(modes[p.id].split for _, p, _ in cases)


def test_every_passing_split_sample_leaves_the_execute_stage_measured(measured):
    """Measured in its verdict run where it ran split without helpers, else by a second split run
    without them made at once; samples that run in process are measured while scoring."""
    cases, modes, records, _, _ = measured
    for (name, problem, _), record in zip(cases, records, strict=True):
        assert record["passed"] and ("coverage" in record) == modes[problem.id].split, name
        assert "error" not in record.get("coverage", {}), name
    assert any(p.helpers and modes[p.id].split for _, p, _ in cases), "HumanEvalFix's helpers' problems"
    assert not all(modes[p.id].split for _, p, _ in cases), "a fixture runs in process"


def test_the_score_stage_writes_coverage_py_figures_for_every_sample(measured):
    """Helpers' problems included: their second run is split, the program's own functions serving
    the tests (as in one file), measured by probes."""
    cases, _, _, traced, scored = measured
    for (name, _, _), report in zip(cases, traced, strict=True):
        assert (scored[name]["percent"], scored[name]["uncovered"]) == (
            report.percent,
            len(report.reported_missing),
        ), name
    assert any(problem.helpers for _, problem, _ in cases)
