"""Test scope: which tests ever touch the reference's code outside the lines the edit changed.

The published audit labelled scope with an LLM; here each test runs alone under coverage.py in
the sandbox (a per-test coverage context, measured rather than judged). Lines that run when the
program is merely loaded (def and class headers, module constants) do not count as touched. A
suite is `blind_outside` when its tests together reach under half of the code outside the edit. A *test* is a top-level
statement of the tests that checks something: an `assert`, a loop or block holding one, or a
call of a `test*`/`check` function; every other top-level statement (imports, helpers, fixtures,
`def test_*` bodies) is kept in every run, in order; CanItEdit's `if True:` block is opened up
into its statements. Python only; at most `MAX_TESTS` tests per
problem, spread evenly.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Sequence
from typing import Any

from core.problems import Problem
from core.sandbox import SandboxLimits
from eval.audit.linecoverage import diff_region, prelude_lines
from eval.excess_code import CoverageError, coverage_reports
from eval.execute import declared_unverified

MAX_TESTS = 30


def _is_test(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Assert):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        return name.startswith("test") or name == "check"
    if isinstance(stmt, (ast.For, ast.While, ast.With, ast.If, ast.Try)):
        return any(isinstance(n, ast.Assert) for n in ast.walk(stmt))
    return False


def _unwrap(tests: str, tree: ast.Module) -> str:
    """CanItEdit wraps its asserts in one `if True:` block; its statements are the tests, so the
    block is dedented into top-level statements."""
    lines = tests.splitlines(keepends=True)
    for stmt in reversed(tree.body):
        always = isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Constant) and stmt.test.value is True
        if always and not stmt.orelse:
            body = textwrap.dedent("".join(lines[stmt.body[0].lineno - 1 : stmt.end_lineno]))
            lines[stmt.lineno - 1 : stmt.end_lineno] = [body]
    return "".join(lines)


def split_tests(tests: str) -> list[str]:
    """One program text per test: the setup statements plus that one test (empty if unparsable)."""
    try:
        tests = _unwrap(tests, ast.parse(tests))
        tree = ast.parse(tests)
    except SyntaxError:
        return []
    lines = tests.splitlines(keepends=True)
    text = lambda s: "".join(lines[s.lineno - 1 : s.end_lineno])  # noqa: E731
    chosen = [i for i, s in enumerate(tree.body) if _is_test(s)]
    if len(chosen) > MAX_TESTS:
        step = len(chosen) / MAX_TESTS
        chosen = [chosen[int(k * step)] for k in range(MAX_TESTS)]
    every = {i for i, s in enumerate(tree.body) if _is_test(s)}
    return ["".join(text(s) for j, s in enumerate(tree.body) if j == i or j not in every) for i in chosen]


def test_scope(
    problems: Sequence[Problem], sandbox, limits: SandboxLimits, executable: dict[str, set[int]]
) -> dict:
    """Per problem id: tests, tests that touch code outside the diff region, and the outside lines
    any test reaches. `executable` holds each reference's executable lines (from the coverage step)."""
    measured = [p for p in problems if p.language == "python" and p.id in executable]
    shift = {p.id: prelude_lines(p) for p in measured}
    # Lines that run on load alone (def and class headers, constants) say nothing about a test.
    unverified = dict(zip((p.id for p in measured), declared_unverified(sandbox, measured), strict=True))
    loading = (
        coverage_reports(
            sandbox,
            [(p.program(p.after), "") for p in measured],
            limits,
            [unverified[p.id] for p in measured],
        )
        if measured
        else []
    )
    outside = {}
    for p, report in zip(measured, loading, strict=True):
        on_load = set() if isinstance(report, CoverageError) else {n - shift[p.id] for n in report.covered}
        outside[p.id] = executable[p.id] - diff_region(p.before, p.after) - on_load
    jobs, owners = [], []
    for p in measured:
        for unit in split_tests(p.tests):
            jobs.append((p.program(p.after), unit))
            owners.append(p)
    per: dict[str, dict[str, Any]] = {}
    flags = [unverified[p.id] for p in owners]
    for p, report in zip(owners, coverage_reports(sandbox, jobs, limits, flags) if jobs else [], strict=True):
        row = per.setdefault(p.id, {"tests": 0, "tests_outside": 0, "measured": 0, "outside_reached": set()})
        row["tests"] += 1
        if isinstance(report, CoverageError):
            continue
        row["measured"] += 1
        reached = {n - shift[p.id] for n in report.covered} & outside[p.id]
        if reached:
            row["tests_outside"] += 1
            row["outside_reached"] |= reached
    return {
        pid: {
            "tests": row["tests"],
            "tests_measured": row["measured"],
            "tests_touching_outside": row["tests_outside"],
            "outside_lines_reached": len(row["outside_reached"]),
            "outside_lines": len(outside[pid]),
            # the tests reach under half of the code outside the edit: a change there goes unseen
            "blind_outside": row["measured"] > 0 and len(row["outside_reached"]) < 0.5 * len(outside[pid]),
        }
        for pid, row in per.items()
    }
