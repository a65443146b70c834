"""ExcessCode: how much of a passing edit its tests never execute, computed as CanItEdit does.

Two metrics carry the name (their results keys and sources: `core.excess_metrics`):

- **the paper's** (CanItEdit §5.1, Table 3; the default, `excess_code`): per problem the
  median of (100 - line coverage %) over its passing completions, averaged over the problems
  that have one. The paper words it as "the median line coverage for passing completions"
  averaged across problems and prints the excess, 100 - coverage, which is the same number
  (median(100 - c) = 100 - median(c)). nuprl/CanItEdit's first `benchmark/pass_k.py` computed
  100 - mean(median coverage); today's prints it as MeanMedianCoverage.
- **the repository's** (`pass_k.py` since its v2 evaluation code, `excess_code_repo`): per
  completion uncovered lines / Differ lines, the mean per problem, the mean over problems,
  x 100, with ExcessCodeSE.

Coverage is measured as CanItEdit's `benchmark/evaluator_overlay.py` measures it (run on
MultiPL-E's evaluator), per completion that passed (status OK, exit code 0):

1. program = completion + "\\n" + tests, one file. CanItEdit's tests begin with
   "### START TESTS ###\\nif True:  # pragma: no cover", so coverage.py excludes the test
   block; plain-assert tests are measured with the program, as upstream does.
2. `coverage run` on that file, then `coverage report -m` with `.coveragerc`
   `[report] exclude_also = @(abc\\.)?abstractmethod` (an excluded decorator excludes the whole
   function), line coverage. It parses the "Cover" percent (the paper's metric uses it) and,
   below 100, the "Missing" column, expanding each range "a-b" to every line from a to b: a
   range that spans blank, comment or continuation lines between two missed statements counts
   those lines too. A run that fails or times out (60 s) records no coverage and the completion
   is left out.
3. (repository metric) ratio = len(missing) / len(list(difflib.Differ().compare(
   before.splitlines(), program_no_test.splitlines()))), program_no_test = program cut at
   "### START TESTS ###\\n" (the whole program when the tests have no such line). The Differ
   count has every line: unchanged ("  "), removed ("- "), added ("+ ") and the "? " hint lines.
   ExcessCodeSE is np.std (ddof=0) of the problem means / sqrt(#problems).

We run step 2 inside the sandbox (`ForkServerSandbox.run(..., coverage=True)`), read the same
numbers from coverage.py's analysis, and format and expand "Missing" with coverage.py's own
`format_lines`, so the counts are the ones upstream parses. Which lines ran is collected one of
two ways (`score.coverage`): ``probes`` (the default), in the verdict run itself where a sample
runs split (slipcover's probes in the program's process, the tests' lines traced in the trusted
process: core/sandbox/line_probes.py), and by a second run under coverage.py's tracer where it runs
in process; where its tests take helpers from the benchmark's text (HumanEvalFix's ``poly``: in
its verdict run the program's own copy never runs, in one file it does), by a second split run in
which the program's own functions serve the tests, as in one file (right after their verdicts, in
the same batch: eval/execute.py); ``coverage.py``, a second run under coverage.py for every passing
sample while scoring, as upstream. Both give
the same statements, exclusions and missing lines (tests/eval/test_coverage_probes.py). Usage,
as samples finish:

    reports = coverage_reports(sandbox, [(completion, problem.tests), ...], limits)
    percents[pid].append(report.percent)
    ratios[pid].append(excess_code_repo_of(problem.before, completion, problem.tests, report))
    ...
    results["excess_code"] = excess_code(percents)
    results["excess_code_repo"] = excess_code_repo(ratios)
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from coverage.results import display_covered, format_lines

from core.sandbox import Sandbox, SandboxLimits

START_TESTS = "### START TESTS ###\n"  # where CanItEdit cuts program_no_test
# CanItEdit's benchmark/.coveragerc; the sandbox applies the same exclusion (coverage_run.COVERAGE_EXCLUDE).
COVERAGERC = "[report]\nexclude_also =\n    @(abc\\.)?abstractmethod\n"


class CoverageError(RuntimeError):
    """The program with its tests failed or timed out under coverage: CanItEdit drops the sample."""


@dataclass(frozen=True)
class CoverageReport:
    """coverage.py's line coverage of the whole file (completion + "\\n" + tests), 1-based lines.

    ``statements`` are the executable statements after exclusions (coverage.py's "Stmts").
    """

    statements: list[int]
    missing: list[int]
    excluded: list[int]

    @property
    def covered(self) -> list[int]:
        missing = set(self.missing)
        return [n for n in self.statements if n not in missing]

    @property
    def percent(self) -> int:
        """coverage.py's rounded "Cover" column, the integer CanItEdit parsed and stored.

        It never rounds up to 100 or down to 0 while lines are missing or covered
        (coverage.results.display_covered at precision 0).
        """
        if not self.statements:
            return 100
        return int(display_covered(100.0 * len(self.covered) / len(self.statements), 0))

    @property
    def reported_missing(self) -> list[int]:
        """The lines CanItEdit counts: the "Missing" column with every range expanded."""
        if self.percent == 100 or not self.missing:
            return []
        lines: list[int] = []
        for part in format_lines(self.statements, self.missing).split(", "):
            start, _, end = part.partition("-")
            lines.extend(range(int(start), int(end or start) + 1))
        return lines

    @classmethod
    def from_measured(cls, measured: dict | None, file_lines: int) -> CoverageReport:
        """The coverage a passing run sent (``ExecutionResult.coverage``, or the copy an execution
        record keeps: `measured_runs`) of a ``file_lines``-line file; CoverageError when it has none
        or sent numbers that cannot be coverage (the run wrote them: it can lie about its own lines,
        not make us count a trillion)."""
        measured = measured or {"error": "the run measured no coverage"}
        if "error" in measured:
            raise CoverageError(str(measured["error"]))
        statements, missing, excluded = (set(measured[k]) for k in ("statements", "missing", "excluded"))
        in_file = all(1 <= n <= file_lines for n in statements | excluded)
        if not (in_file and missing <= statements and not excluded & statements):
            raise CoverageError(
                "the run sent inconsistent coverage (lines outside the file or not statements)"
            )
        return cls(sorted(statements), sorted(missing), sorted(excluded))


def measured_runs(
    sandbox: Sandbox,
    jobs: Sequence[tuple[str, str]],
    limits: SandboxLimits | None = None,
    unverified: bool | Sequence[bool] = False,
    split: bool | Sequence[bool] = False,
) -> list[dict]:
    """Measure each (completion, tests) pair in the sandbox, in parallel: what each run measured, as
    an execution record keeps it (`CoverageReport.from_measured` reads it back), or why it has none.
    ``unverified``: the declared unverified mode, for all jobs or per job (see Sandbox.run);
    ``split``: jobs measured by a split run's probes instead of coverage.py's tracer (the program's
    own functions serve the tests, as in one file: no helpers)."""
    results = sandbox.run_many(jobs, limits=limits, coverage=True, unverified=unverified, split=split)
    return [
        result.coverage or {"error": "the run measured no coverage"}
        if result.passed
        else {"error": f"the program did not pass under coverage ({result.status}): {result.detail}"}
        for result in results
    ]


def coverage_reports(
    sandbox: Sandbox,
    jobs: Sequence[tuple[str, str]],
    limits: SandboxLimits | None = None,
    unverified: bool | Sequence[bool] = False,
    split: bool | Sequence[bool] = False,
) -> list[CoverageReport | CoverageError]:
    """`measured_runs` as coverage reports (a CoverageError where a run measured none); job order."""
    reports: list[CoverageReport | CoverageError] = []
    measured = measured_runs(sandbox, jobs, limits, unverified, split)
    for (completion, tests), lines in zip(jobs, measured, strict=True):
        try:
            reports.append(CoverageReport.from_measured(lines, len((completion + "\n" + tests).splitlines())))
        except CoverageError as err:
            reports.append(err)
    return reports


def coverage_of(
    completion: str,
    tests: str,
    sandbox: Sandbox,
    limits: SandboxLimits | None = None,
    unverified: bool = False,
) -> CoverageReport:
    """One pair's coverage (see `coverage_reports`); raises CoverageError when it has none."""
    report = coverage_reports(sandbox, [(completion, tests)], limits, unverified)[0]
    if isinstance(report, CoverageError):
        raise report
    return report


def program_no_test(completion: str, tests: str) -> str:
    """CanItEdit's program_no_test: the program file cut where its tests start."""
    return (completion + "\n" + tests).split(START_TESTS)[0]


def differ_line_count(before: str, completion: str, tests: str = START_TESTS) -> int:
    """Lines `difflib.Differ` yields for before -> program_no_test, CanItEdit's denominator.

    With CanItEdit-style tests that is completion + "\\n", so a completion that ends in a
    newline contributes one extra empty "+ " line. Kept for comparability.
    """
    after = program_no_test(completion, tests)
    return len(list(difflib.Differ().compare(before.splitlines(), after.splitlines())))


def excess_code_repo_of(before: str, completion: str, tests: str, report: CoverageReport) -> float:
    """The repository's per-completion ExcessCode ratio (not yet x 100): reported missing / Differ lines.

    The denominator counts unchanged lines too, so the same dead helper weighs less in a long
    file; see `excess_code_changed_lines_of` for a ratio over the edit alone.
    """
    return len(report.reported_missing) / differ_line_count(before, completion, tests)


def changed_line_numbers(before: str, completion: str) -> set[int]:
    """1-based lines of `completion` that the edit added or rewrote (Differ's "+ " lines)."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), completion.splitlines())
    return {
        j + 1
        for tag, _, _, j1, j2 in matcher.get_opcodes()
        if tag in ("replace", "insert")
        for j in range(j1, j2)
    }


def excess_code_changed_lines_of(before: str, completion: str, report: CoverageReport) -> float:
    """Share of the statements the edit added or rewrote that the tests never execute, in [0, 1].

    Better than `excess_code_repo_of` for comparing edits: unchanged code neither dilutes the ratio
    nor adds to it (an old untested function is not the model's excess), test code, blank and
    comment lines never count, and 1.0 means nothing the edit wrote was exercised. An edit that
    only deletes lines writes nothing in excess: 0.0. Coverage numbers a multi-line statement
    by its first line, so a change to a continuation line counts only when that first line
    changed.
    """
    changed = changed_line_numbers(before, completion) & set(report.statements)
    if not changed:
        return 0.0
    return len(changed & set(report.missing)) / len(changed)


def excess_code_of_problem(percents: Sequence[int]) -> float | None:
    """The paper's figure for one problem: the median of (100 - "Cover" percent) over its passing,
    measured completions; None when it has none."""
    return float(np.median([100 - p for p in percents])) if len(percents) > 0 else None


def excess_code(per_problem: Mapping[str, Sequence[int]]) -> float | None:
    """The paper's ExcessCode (CanItEdit §5.1, Table 3), the default: the mean over problems of
    `excess_code_of_problem`, from each passing completion's `CoverageReport.percent`.

    Problems without a passing completion are omitted, as the paper says; None when no problem
    has one (pass_k.py prints "NA").
    """
    medians = [m for m in map(excess_code_of_problem, per_problem.values()) if m is not None]
    return float(np.mean(medians)) if medians else None


def _problem_means(per_problem: Mapping[str, Sequence[float]]) -> list[float]:
    return [float(np.mean(values)) for values in per_problem.values() if len(values) > 0]


def excess_code_repo(per_problem: Mapping[str, Sequence[float]]) -> float | None:
    """The repository's ExcessCode (nuprl/CanItEdit `pass_k.py` since v2): the mean over problems
    of the mean per-completion ratio, x 100.

    `per_problem` maps a problem id to the ratios of its passing, measured completions (from
    `excess_code_repo_of`, or `excess_code_changed_lines_of` for our variant). Problems with none
    are skipped; None when no problem has one.
    """
    means = _problem_means(per_problem)
    return float(np.mean(means) * 100) if means else None


def excess_code_repo_stderr(per_problem: Mapping[str, Sequence[float]]) -> float | None:
    """The repository's ExcessCodeSE: population std (ddof=0) of the problem means / sqrt(#problems), x 100."""
    means = _problem_means(per_problem)
    return float(np.std(means) / math.sqrt(len(means)) * 100) if means else None
