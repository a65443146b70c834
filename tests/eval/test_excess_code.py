"""ExcessCode on tiny edits whose coverage, Differ lines and uncovered lines are counted by hand
below, measured inside the sandbox: the paper's metric (the default `excess_code`, CanItEdit
Table 3) and the repository's later one (`excess_code_repo`)."""

from __future__ import annotations

import math
import time

import pytest
from coverage.results import display_covered

from core.sandbox import SandboxLimits, make_sandbox
from eval.excess_code import (
    CoverageError,
    CoverageReport,
    changed_line_numbers,
    coverage_of,
    differ_line_count,
    excess_code,
    excess_code_changed_lines_of,
    excess_code_of_problem,
    excess_code_repo,
    excess_code_repo_of,
    excess_code_repo_stderr,
)


@pytest.fixture(scope="module")
def sandbox():
    with make_sandbox("auto", limits=SandboxLimits(timeout_s=10), workers=2) as sb:
        yield sb


def measure(completion: str, tests: str, sandbox, **limits) -> CoverageReport:
    return coverage_of(completion, tests, sandbox, SandboxLimits(**limits) if limits else None)


ADD_BEFORE = "def add(a, b):\n    return a + b\n"

# Example 1: the edit adds a helper nobody calls.
#   1 def add(a, b):         covered
#   2     return a + b       covered
#   3                        (blank)
#   4                        (blank)
#   5 def unused(x):         covered: the def statement runs
#   6     y = x * 2          uncovered
#   7     z = y + 1          uncovered
#   8     return z           uncovered
# Differ(before, completion + "\n"): 2 unchanged "  " lines, then "+ " for lines 3-8 and one
# "+ " for the empty line the trailing newline adds = 9 lines. ExcessCode = 3 / 9 * 100.
UNUSED_HELPER = ADD_BEFORE + "\n\ndef unused(x):\n    y = x * 2\n    z = y + 1\n    return z\n"
ADD_TESTS = "assert add(1, 2) == 3\nassert add(-1, 1) == 0\n"

# Example 2: a changed signature and body, so Differ adds "? " hint lines.
#   1 def area(w, h, scale=1):                 covered
#   2     if scale < 0:                        covered
#   3         raise ValueError("negative")     uncovered: the tests never pass a negative scale
#   4     return w * h * scale                 covered
# Differ lines:
#   "- def area(w, h):", "+ def area(w, h, scale=1):", "?              +++++++++",
#   "+     if scale < 0:", "+         raise ValueError(...)",
#   "-     return w * h", "+     return w * h * scale", "?                 ++++++++",
#   "+ " (trailing newline)                                         = 9 lines. 1 / 9 * 100.
AREA_BEFORE = "def area(w, h):\n    return w * h\n"
AREA_COMPLETION = (
    "def area(w, h, scale=1):\n"
    "    if scale < 0:\n"
    '        raise ValueError("negative")\n'
    "    return w * h * scale\n"
)
AREA_TESTS = "assert area(2, 3) == 6\nassert area(2, 3, 2) == 12\n"

# Example 3: abstract methods are excluded with their whole body (CanItEdit's .coveragerc),
# both spellings of the decorator. Everything else runs: 0 uncovered, ExcessCode 0.
SHAPE_BEFORE = "class Square:\n    def __init__(self, s):\n        self.s = s\n"
SHAPE_COMPLETION = """import abc
from abc import ABC, abstractmethod


class Shape(ABC):
    @abstractmethod
    def area(self):
        raise NotImplementedError

    @abc.abstractmethod
    def name(self):
        return "shape"


class Square(Shape):
    def __init__(self, s):
        self.s = s

    def area(self):
        return self.s**2

    def name(self):
        return "square"
"""
SHAPE_TESTS = "assert Square(3).area() == 9\nassert Square(1).name() == 'square'\n"

# Example 4: a fully covered bug fix: 0 uncovered, so ExcessCode 0 whatever the Differ count.
MAX_BEFORE = "def biggest(xs):\n    return xs[0]\n"
MAX_COMPLETION = "def biggest(xs):\n    return max(xs)\n"
MAX_TESTS = "assert biggest([3, 9, 2]) == 9\n"


def test_unused_helper_counts_its_body(sandbox) -> None:
    report = measure(UNUSED_HELPER, ADD_TESTS, sandbox)
    # Lines 10-11 are the tests (line 9 is the empty line the trailing newline leaves).
    assert report.missing == [6, 7, 8]
    assert report.covered == [1, 2, 5, 10, 11]
    assert report.percent == 62  # 5 of 8 statements
    assert report.reported_missing == [6, 7, 8]
    assert differ_line_count(ADD_BEFORE, UNUSED_HELPER) == 9
    assert excess_code_repo_of(
        ADD_BEFORE, UNUSED_HELPER, "### START TESTS ###\n", report
    ) * 100 == pytest.approx(100 / 3)


def test_hint_lines_count_in_the_denominator(sandbox) -> None:
    tests = "### START TESTS ###\n" + AREA_TESTS
    report = measure(AREA_COMPLETION, tests, sandbox)
    assert report.missing == [3]
    assert differ_line_count(AREA_BEFORE, AREA_COMPLETION, tests) == 9
    assert excess_code_repo_of(AREA_BEFORE, AREA_COMPLETION, tests, report) * 100 == pytest.approx(100 / 9)


def test_abstract_methods_are_excluded(sandbox) -> None:
    report = measure(SHAPE_COMPLETION, SHAPE_TESTS, sandbox)
    assert report.excluded == [6, 7, 8, 10, 11, 12]
    assert report.missing == []
    assert report.percent == 100
    assert excess_code_repo_of(SHAPE_BEFORE, SHAPE_COMPLETION, SHAPE_TESTS, report) == 0.0


def test_fully_covered_fix_scores_zero(sandbox) -> None:
    report = measure(MAX_COMPLETION, MAX_TESTS, sandbox)
    assert report.missing == []
    # The two return lines are 76% alike (Differ's cutoff is 75%), so each gets a hint line:
    # "  def biggest(xs):", "-     return xs[0]", "?              ^^^", "+     return max(xs)",
    # "?            ++++  ^", "+ " (trailing newline) = 6 lines.
    assert differ_line_count(MAX_BEFORE, MAX_COMPLETION) == 6
    assert excess_code_repo_of(MAX_BEFORE, MAX_COMPLETION, "### START TESTS ###\n", report) == 0.0


def test_test_code_counts_as_upstream_counts_it(sandbox) -> None:
    """CanItEdit measures the whole file: an uncalled helper in plain-assert tests is missing
    (and the tests are part of program_no_test); its `if True:  # pragma: no cover` block is not."""
    helper = "\n\ndef never_called():\n    x = 1\n    return x\n"
    plain = ADD_TESTS + helper
    report = measure(ADD_BEFORE, plain, sandbox)
    assert report.reported_missing == [9, 10]
    # Differ: 2 unchanged lines, then the empty line and the 7 test lines added = 10 lines.
    assert differ_line_count(ADD_BEFORE, ADD_BEFORE, plain) == 10
    assert excess_code_repo_of(ADD_BEFORE, ADD_BEFORE, plain, report) == pytest.approx(2 / 10)
    pragma = "### START TESTS ###\nif True:  # pragma: no cover\n" + "".join(
        "    " + line + "\n" for line in plain.splitlines()
    )
    report = measure(ADD_BEFORE, pragma, sandbox)
    assert report.reported_missing == []
    assert excess_code_changed_lines_of(ADD_BEFORE, ADD_BEFORE, report) == 0.0


def test_missing_ranges_expand_over_blank_lines(sandbox) -> None:
    """Upstream expands "Missing" ranges: "6-9" counts the blank line 8 between two missed statements."""
    completion = ADD_BEFORE + "\n\ndef unused(x):\n    y = x\n\n    return y\n"
    report = measure(completion, ADD_TESTS, sandbox)
    assert report.missing == [6, 8]
    assert report.reported_missing == [6, 7, 8]


def test_program_without_trailing_newline_keeps_its_line_range(sandbox) -> None:
    report = measure(UNUSED_HELPER.rstrip("\n"), "assert add(1, 2) == 3\n", sandbox)
    assert report.missing == [6, 7, 8]


def test_differ_count_includes_unchanged_lines() -> None:
    # Identical code: every line "  ", plus "+ " for the empty line of the trailing newline.
    assert differ_line_count(ADD_BEFORE, ADD_BEFORE) == 3
    assert differ_line_count(ADD_BEFORE, ADD_BEFORE.rstrip("\n")) == 2


def test_failing_program_has_no_coverage(sandbox) -> None:
    with pytest.raises(CoverageError, match="AssertionError"):
        measure(ADD_BEFORE, "assert add(1, 2) == 4\n", sandbox)


def test_hanging_program_is_killed_at_the_deadline(sandbox) -> None:
    start = time.monotonic()
    with pytest.raises(CoverageError, match="timeout"):
        measure("while True:\n    pass\n", "", sandbox, timeout_s=1.0)
    assert time.monotonic() - start < 10


def test_percent_rounds_like_coverage_report() -> None:
    for total in range(1, 120):
        for covered in range(total + 1):
            report = CoverageReport(list(range(1, total + 1)), list(range(covered + 1, total + 1)), [])
            assert report.percent == int(display_covered(100.0 * covered / total, 0)), (covered, total)
    assert CoverageReport([], [], []).percent == 100


def test_changed_lines_variant(sandbox) -> None:
    assert changed_line_numbers(ADD_BEFORE, UNUSED_HELPER) == {3, 4, 5, 6, 7, 8}
    # Of the changed lines, 5-8 are statements and 6-8 uncovered.
    report = measure(UNUSED_HELPER, ADD_TESTS, sandbox)
    assert excess_code_changed_lines_of(ADD_BEFORE, UNUSED_HELPER, report) == pytest.approx(3 / 4)
    # All four lines of the area edit changed; line 3 is uncovered.
    report = measure(AREA_COMPLETION, AREA_TESTS, sandbox)
    assert excess_code_changed_lines_of(AREA_BEFORE, AREA_COMPLETION, report) == pytest.approx(1 / 4)
    # A pure deletion writes nothing in excess.
    report = measure(ADD_BEFORE, ADD_TESTS, sandbox)
    assert excess_code_changed_lines_of(UNUSED_HELPER, ADD_BEFORE, report) == 0.0


def test_old_untested_code_is_not_the_edits_excess(sandbox) -> None:
    before = "def add(a, b):\n    return a + b\n\n\ndef old(x):\n    return x\n"
    completion = before.replace("a + b", "b + a")
    report = measure(completion, ADD_TESTS, sandbox)
    assert report.missing == [6]
    assert excess_code_repo_of(before, completion, ADD_TESTS, report) > 0  # the exact metric charges it
    assert excess_code_changed_lines_of(before, completion, report) == 0.0


def test_repo_aggregate_is_mean_of_problem_means() -> None:
    per_problem = {"a": [0.1, 0.3], "b": [0.5], "no_pass": []}
    assert excess_code_repo(per_problem) == pytest.approx((0.2 + 0.5) / 2 * 100)
    # population std of [0.2, 0.5] is 0.15
    assert excess_code_repo_stderr(per_problem) == pytest.approx(0.15 / math.sqrt(2) * 100)
    assert excess_code_repo({"x": [], "y": []}) is None
    assert excess_code_repo_stderr({}) is None


def test_paper_excess_code_equals_a_hand_computation_on_fixed_coverage() -> None:
    """CanItEdit §5.1: the median line coverage of each problem's passing completions, averaged
    over problems that have one, printed as the excess 100 - coverage (Table 3)."""
    percents = {"a": [100, 50, 80], "b": [60, 70], "c": [62], "no_pass": []}
    # a: coverage median 80 -> 20; b: median of 60, 70 = 65 -> 35; c: 62 -> 38; no_pass omitted.
    assert [excess_code_of_problem(v) for v in percents.values()] == [20.0, 35.0, 38.0, None]
    assert excess_code(percents) == pytest.approx((20 + 35 + 38) / 3)  # 31.0
    # the paper's wording: 100 - (the mean over problems of the median coverage)
    assert excess_code(percents) == pytest.approx(100 - (80 + 65 + 62) / 3)
    # a median, not a mean: the mean excess of a would be (0 + 50 + 20) / 3 = 23.3, giving 32.1
    assert excess_code(percents) != pytest.approx((70 / 3 + 35 + 38) / 3)
    assert excess_code({"x": []}) is None and excess_code({}) is None


def test_both_metrics_from_measured_coverage(sandbox) -> None:
    """The two published metrics on the same sandboxed completions, each computed by hand."""
    helper, plain = measure(UNUSED_HELPER, ADD_TESTS, sandbox), measure(ADD_BEFORE, ADD_TESTS, sandbox)
    fixed = measure(MAX_COMPLETION, MAX_TESTS, sandbox)
    assert (helper.percent, plain.percent, fixed.percent) == (62, 100, 100)
    # paper: add -> median(38, 0) = 19; max -> 0; mean 9.5
    assert excess_code({"add": [helper.percent, plain.percent], "max": [fixed.percent]}) == 9.5
    # repository: add -> mean(3/9, 0/3) = 1/6 (ADD_BEFORE unchanged: 3 Differ lines, none missing);
    # max -> 0; mean 1/12, x 100
    ratios = {
        "add": [
            excess_code_repo_of(ADD_BEFORE, UNUSED_HELPER, "### START TESTS ###\n", helper),
            excess_code_repo_of(ADD_BEFORE, ADD_BEFORE, "### START TESTS ###\n", plain),
        ],
        "max": [excess_code_repo_of(MAX_BEFORE, MAX_COMPLETION, "### START TESTS ###\n", fixed)],
    }
    assert excess_code_repo(ratios) == pytest.approx(100 / 12)
