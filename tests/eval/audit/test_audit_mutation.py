"""Mutation audit (eval.audit.mutation): operators on tiny snippets, then whole problems in the
sandbox, where weak tests must show up as surviving mutants outside the edit."""

from __future__ import annotations

import json
import time

import pytest

from core.problems import Problem
from core.sandbox import make_sandbox
from eval.audit.mutation import Mutant, mutants, prelude_offset, run_mutants, sample_mutants


@pytest.fixture(scope="module")
def sandbox():
    with make_sandbox(workers=2) as sb:
        yield sb


class CountingSandbox:
    """Passes runs through and records how many programs each `run_many` got."""

    def __init__(self, inner) -> None:
        self.inner, self.batches = inner, []

    def run_many(self, jobs, **kwargs):
        self.batches.append(len(jobs))
        return self.inner.run_many(jobs, **kwargs)


def problem(before: str, after: str, tests: str, **kw) -> Problem:
    return Problem("p", "p", before, after, tests, instructions={"descriptive": "edit"}, **kw)


def sources(src: str, operator: str) -> set[str]:
    """The mutated programs of one operator, without sampling."""
    return {m.source.strip() for m in mutants(src, set(), cap=1000) if m.operator == operator}


# ------------------------------------------------------------------------------ operators, no sandbox
@pytest.mark.parametrize(
    ("expr", "mutated"),
    [
        ("a + b", "a - b"),
        ("a - b", "a + b"),
        ("a * b", "a / b"),
        ("a / b", "a * b"),
        ("a // b", "a * b"),
        ("a % b", "a // b"),
        ("a ** b", "a * b"),
        ("a < b", "a <= b"),
        ("a <= b", "a < b"),
        ("a > b", "a >= b"),
        ("a >= b", "a > b"),
        ("a == b", "a != b"),
        ("a != b", "a == b"),
        ("a is b", "a is not b"),
        ("a is not b", "a is b"),
        ("a in b", "a not in b"),
        ("a not in b", "a in b"),
        ("a and b", "a or b"),
        ("a or b", "a and b"),
    ],
)
def test_operator_swaps_follow_the_table(expr, mutated):
    assert sources(f"x = {expr}\n", "operator") == {f"x = {mutated}"}


def test_chained_comparisons_and_augmented_assignment_mutate_each_operator():
    assert sources("x = a < b == c\n", "operator") == {"x = a <= b == c", "x = a < b != c"}
    assert sources("n -= k\n", "operator") == {"n += k"}


def test_negate_wraps_each_kind_of_test():
    src = "if a:\n    b()\nwhile c:\n    break\nd = e if f else g\nassert h\n"
    negated = sources(src, "negate")
    assert len(negated) == 4
    assert any("if not a:" in s for s in negated)
    assert any("while not c:" in s for s in negated)
    assert any("d = e if not f else g" in s for s in negated)
    assert any("assert not h" in s for s in negated)


def test_constants_change_by_type_and_none_is_left_alone():
    assert sources("x = (0, 2, 1.5, True, False, 'a', '', None, b'z')\n", "constant") == {
        "x = (1, 2, 1.5, True, False, 'a', '', None, b'z')",
        "x = (0, 3, 1.5, True, False, 'a', '', None, b'z')",
        "x = (0, 2, 2.5, True, False, 'a', '', None, b'z')",
        "x = (0, 2, 1.5, False, False, 'a', '', None, b'z')",
        "x = (0, 2, 1.5, True, True, 'a', '', None, b'z')",
        "x = (0, 2, 1.5, True, False, '', '', None, b'z')",
        "x = (0, 2, 1.5, True, False, 'a', 'x', None, b'z')",
    }


def test_docstrings_annotations_and_fstring_text_are_not_mutated():
    src = "def f(a: 'int' = 0) -> 'str':\n    '''doc'''\n    return f'v={a}'\n"
    found = mutants(src, set(), cap=1000)
    assert [(m.operator, m.description) for m in found if m.operator == "constant"] == [
        ("constant", "constant: `0` -> `1`")
    ]
    assert "'''doc'''" not in " ".join(m.description for m in found)


def test_delete_replaces_simple_statements_only():
    src = '"""module doc"""\nx = 1\npass\n\n\ndef f():\n    return x\n'
    deleted = mutants(src, set(), cap=1000)
    assert sorted(m.line for m in deleted if m.operator == "delete") == [2, 7]  # not the def, doc, pass
    assert "x = 1" not in next(m.source for m in deleted if m.operator == "delete" and m.line == 2)


def test_region_is_the_mutated_nodes_first_line():
    found = mutants("a = 1\nb = (2 +\n     3)\n", diff_lines={3}, cap=1000)
    assert {m.region for m in found if m.line == 1} == {"outside"}
    three = next(m for m in found if m.description == "constant: `3` -> `4`")
    assert (three.line, three.statement_line, three.region) == (3, 2, "inside")
    assert next(m for m in found if m.operator == "operator").region == "outside"  # BinOp starts on line 2


def test_syntactic_equivalents_are_dropped_and_counted():
    # inf + 1 == inf and 1e20 + 1 == 1e20 in floats: the mutated module is the reference
    sample = sample_mutants("x = 1e999\ny = 1e20\nz = 3\n", diff_lines={3}, cap=1000)
    assert sample.equivalent == {"inside": 0, "outside": 2}
    assert sample.generated == {"inside": 2, "outside": 4}  # per line: delete, constant
    assert len(sample.mutants) == 4
    assert len({m.source for m in sample.mutants}) == len(sample.mutants)


WIDE = "\n".join(f"v{i} = a{i} + {i} if b{i} < {i} else c{i} * {i}" for i in range(12)) + "\n"


def test_cap_holds_per_region_is_deterministic_and_spread():
    first = mutants(WIDE, diff_lines={1, 2, 3}, cap=5, seed=7)
    assert sum(m.region == "inside" for m in first) == 5
    assert sum(m.region == "outside" for m in first) == 5
    assert first == mutants(WIDE, diff_lines={1, 2, 3}, cap=5, seed=7)
    assert any(mutants(WIDE, {1, 2, 3}, cap=5, seed=s) != first for s in range(1, 5))
    outside = [m for m in first if m.region == "outside"]
    assert len({m.operator for m in outside}) == 4  # one of each operator before any repeats
    assert len({m.line for m in outside}) >= 4
    assert mutants(WIDE, set(), cap=0) == []
    with pytest.raises(ValueError):
        mutants(WIDE, set(), cap=-1)


# ------------------------------------------------------------------------------ whole problems, sandbox
AREA_BEFORE = """def area(w, h):
    return w * h


def perimeter(w, h):
    return 2 * (w + h)
"""
AREA_AFTER = """def area(w, h, scale=1):
    if scale < 0:
        raise ValueError("negative")
    return w * h * scale


def perimeter(w, h):
    return 2 * (w + h)
"""
DEFAULT = "\n\nDEFAULT = perimeter(1, 1)\n"  # runs perimeter at import: its lines are covered
AREA_TESTS = """assert area(2, 3) == 6
assert area(2, 3, 2) == 12
assert area(2, 3, 0) == 0
try:
    area(1, 1, -1)
except ValueError as err:
    assert str(err) == "negative"
else:
    raise AssertionError("no error for a negative scale")
"""
PERIMETER_TESTS = "assert perimeter(2, 3) == 10\nassert DEFAULT == 4\n"


def test_tests_that_never_check_the_rest_let_outside_mutants_survive(sandbox):
    report = run_mutants(problem(AREA_BEFORE + DEFAULT, AREA_AFTER + DEFAULT, AREA_TESTS), sandbox)
    inside, outside = report.regions["inside"], report.regions["outside"]
    assert report.skipped is None and report.coverage_measured
    assert inside["run"] == 9 and inside["kill_rate"] == 1.0
    assert outside["run"] == 7 and outside["killed"] == 0 and outside["kill_rate"] == 0.0
    assert outside["survived"] == 7 and outside["uncovered"] == 0
    assert {m["line"] for m in report.mutants if m["region"] == "inside"} <= {1, 2, 3, 4}
    assert json.loads(json.dumps(report.as_dict()))["outside"]["survived"] == 7


def test_thorough_tests_kill_outside_mutants(sandbox):
    tests = AREA_TESTS + PERIMETER_TESTS
    report = run_mutants(problem(AREA_BEFORE + DEFAULT, AREA_AFTER + DEFAULT, tests), sandbox)
    assert report.regions["outside"]["kill_rate"] == 1.0
    assert report.regions["inside"]["kill_rate"] == 1.0
    assert {m["outcome"] for m in report.mutants} == {"killed"}
    assert {m["status"] for m in report.mutants} <= {"failed"}


def test_mutants_on_lines_the_tests_never_run_are_uncovered_not_survivors(sandbox):
    report = run_mutants(problem(AREA_BEFORE, AREA_AFTER, AREA_TESTS), sandbox)
    outside = report.regions["outside"]
    assert outside["run"] == 4 and outside["uncovered"] == 4  # perimeter's body: never called
    assert outside["survived"] == 0 and outside["kill_rate"] is None
    assert {m["outcome"] for m in report.mutants if m["line"] == 8} == {"uncovered"}


def test_an_infinite_loop_mutant_is_killed_by_the_scaled_timeout(sandbox):
    after = "def countdown(n):\n    while n > 0:\n        n -= 1\n    return n\n"
    before = "def countdown(n):\n    while n > 0:\n        n = n - 1\n    return n\n"
    start = time.monotonic()
    report = run_mutants(
        problem(before, after, "assert countdown(0) == 0\nassert countdown(3) == 0\n"),
        sandbox,
        min_timeout_s=0.5,
    )
    elapsed = time.monotonic() - start
    assert report.timeout_s is not None and 0.5 <= report.timeout_s < 2.0
    negated = next(m for m in report.mutants if m["operator"] == "negate")  # `while not n > 0` from 0
    assert (negated["status"], negated["outcome"]) == ("timeout", "killed")
    assert sum(m["status"] == "timeout" for m in report.mutants) >= 2  # also `n += 1`, deleted `n -= 1`
    assert report.regions["inside"]["kill_rate"] == report.regions["outside"]["kill_rate"] == 1.0
    assert elapsed < 15, f"timeouts were not scaled to the reference ({elapsed:.1f}s)"


def test_a_failing_reference_runs_no_mutant(sandbox):
    counting = CountingSandbox(sandbox)
    report = run_mutants(problem(AREA_BEFORE, AREA_BEFORE, AREA_TESTS), counting)
    assert report.skipped == "reference_fails" and "failed" in report.detail
    assert report.mutants == [] and counting.batches == [2]  # the reference and its unparsed control
    assert all(r["run"] == 0 and r["kill_rate"] is None for r in report.regions.values())
    assert report.regions["outside"]["generated"] > 0


def test_a_reference_that_only_passes_as_written_is_not_scored(sandbox):
    after = "def f():\n    return 1  # keep\n"
    tests = "import inspect\nassert '# keep' in inspect.getsource(f)\n"  # unparse drops comments
    report = run_mutants(problem("def f():\n    return 0\n", after, tests), sandbox)
    assert report.skipped == "unparse_fails" and report.mutants == []


def test_other_languages_are_skipped():
    report = run_mutants(problem("x", "y", "z", language="js"), sandbox=None)  # never touched
    assert report.skipped == "language" and report.mutants == []


CIRCLE_BEFORE = "def circle(r):\n    return 3.14 * r * r\n\n\ndef unused(x):\n    return x + 1\n"
CIRCLE_AFTER = "def circle(r):\n    return math.pi * r ** 2\n\n\ndef unused(x):\n    return x + 1\n"
CIRCLE_TESTS = "assert abs(circle(1) - math.pi) < 1e-9\nassert abs(circle(3) - 9 * math.pi) < 1e-9\n"


def test_a_prelude_shifts_coverage_lines_but_not_regions(sandbox):
    p = problem(CIRCLE_BEFORE, CIRCLE_AFTER, CIRCLE_TESTS, prelude="import math")
    assert prelude_offset(p) == 1
    report = run_mutants(p, sandbox)
    assert report.skipped is None and report.coverage_measured
    inside, outside = report.regions["inside"], report.regions["outside"]
    assert {m["line"] for m in report.mutants if m["region"] == "inside"} == {2}  # the edited line of `after`
    assert inside["kill_rate"] == 1.0 and inside["uncovered"] == 0
    # unused's body is line 6 of `after`, line 7 of the program: without the shift, line 6 of the
    # program (`def unused`, which runs) would make these plain survivors
    assert outside["uncovered"] == outside["run"] == 3 and outside["survived"] == 0


def test_prelude_offset_counts_every_prelude_line():
    assert prelude_offset(problem("", "x = 1\n", "", prelude="import math\nimport os")) == 2
    assert prelude_offset(problem("", "x = 1\n", "", prelude="import math\n")) == 2  # its own newline too
    assert prelude_offset(problem("", "x = 1\n", "")) == 0


def test_mutant_is_a_frozen_record():
    m = mutants("x = 1\n", {1})[0]
    assert isinstance(m, Mutant) and m.region == "inside" and m.source.endswith("\n")
    with pytest.raises(AttributeError):
        m.line = 2  # type: ignore[misc]
