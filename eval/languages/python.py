"""Python: runs in the sandbox's interpreter harness (split where the problem allows it:
eval/split_mode.py), never as a command; density by its syntax tree and coverage by coverage.py."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from concurrent.futures import Executor

from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.languages.base import CommandJob, Language
from eval.languages.lines import LineCoverage, prelude_lines, source_lines

_PY_FUNCTIONS = re.compile(r"^\s*(?:async\s+)?def\s+(?:test\w*|check)\s*\(", re.MULTILINE)
_PY_ASSERTIONS = re.compile(
    r"^\s*assert\b|\braise\s+AssertionError\b|\bassert\w+\s*\(|\bpytest\.(?:raises|warns)\s*\(",
    re.MULTILINE,
)


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _is_assertion_call(call: ast.Call) -> bool:
    name = _call_name(call)
    if name.startswith("assert"):
        return True
    func = call.func
    return (
        name in ("raises", "warns")
        and isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "pytest"
    )


def _raises_assertion_error(node: ast.Raise) -> bool:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == "AssertionError"


def python_counts(tests: str) -> tuple[int, int]:
    """(test functions, assertions) of Python tests, by eval/audit/density.py's rules."""
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return len(_PY_FUNCTIONS.findall(tests)), len(_PY_ASSERTIONS.findall(tests))
    functions = assertions = 0

    def visit(node: ast.AST, in_function: bool, in_assert: bool) -> None:
        nonlocal functions, assertions
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not in_function and (node.name.startswith("test") or node.name == "check"):
                functions += 1
            in_function = True
        elif isinstance(node, ast.Assert):
            assertions += 1
            in_assert = True
        elif (
            isinstance(node, ast.Raise)
            and _raises_assertion_error(node)
            or isinstance(node, ast.Call)
            and not in_assert
            and _is_assertion_call(node)
        ):
            assertions += 1
        for child in ast.iter_child_nodes(node):
            visit(child, in_function, in_assert)

    visit(tree, False, False)
    return functions, assertions


class Python(Language):
    name = "python"

    def unavailable(self) -> str | None:
        return None  # the sandbox's own interpreter

    def job(self, program: str, tests: str, helpers: str = "", split: bool = False) -> CommandJob:
        raise ValueError("Python runs in the sandbox's interpreter harness (Sandbox.run), not as a command")

    def test_counts(self, tests: str) -> tuple[int, int]:
        return python_counts(tests)

    def coverage_unavailable(self) -> str | None:
        return None

    def coverage(
        self, problems: Sequence[Problem], sandbox: Sandbox, limits: SandboxLimits, threads: Executor
    ) -> list[LineCoverage | str]:
        """coverage.py inside the sandbox, statements after its exclusions, for all at once."""
        from eval.excess_code import CoverageError, coverage_reports
        from eval.execute import declared_unverified  # it runs programs by language: imported when used

        jobs = [(p.program(p.after), p.tests) for p in problems]
        out: list[LineCoverage | str] = []
        unverified = declared_unverified(sandbox, problems)
        for problem, report in zip(
            problems, coverage_reports(sandbox, jobs, limits, unverified), strict=True
        ):
            if isinstance(report, CoverageError):
                out.append(f"coverage failed: {report}")
                continue
            shift, n = prelude_lines(problem), len(source_lines(problem.after))
            statements = {
                s - shift for s in report.statements if shift < s <= shift + n
            }  # the reference's lines
            missing = {m - shift for m in report.missing}
            out.append(LineCoverage(frozenset(statements), frozenset(statements - missing)))
        return out


LANGUAGE = Python()
