"""ExcessCode: how much of a passing edit its tests never execute, computed as CanItEdit does.

CanItEdit (nuprl/CanItEdit, `benchmark/evaluator_overlay.py` + `benchmark/pass_k.py`, run on
MultiPL-E's evaluator) does, per completion that passed (status OK, exit code 0):

1. program = completion + "\\n" + tests, one file (MultiPL-E `main.py`; the prompt is "").
   Its tests begin with "### START TESTS ###\\nif True:  # pragma: no cover", so coverage.py
   excludes the whole test block and only the program's lines can be missing.
2. `coverage run` on that file, `coverage report -m` with `.coveragerc`
   `[report] exclude_also = @(abc\\.)?abstractmethod` (an excluded decorator excludes the whole
   function), line coverage; the "Missing" column gives the uncovered lines. A run that fails
   or times out records no coverage and the completion is left out of ExcessCode.
3. ratio = len(missing) / len(list(difflib.Differ().compare(before.splitlines(),
   program_no_test.splitlines()))), program_no_test = program cut at "### START TESTS ###\\n",
   i.e. completion + "\\n". The Differ count has every line: unchanged ("  "), removed ("- "),
   added ("+ ") and the "? " hint lines it writes under similar replaced lines.
4. mean of the ratios over a problem's passing completions; problems without one are skipped;
   mean over problems, x 100 (`excess_code`). ExcessCodeSE is np.std (ddof=0) / sqrt(#problems).

`coverage_of` reproduces 1-2 for tests in any form: it runs program + "\\n" + tests with the same
exclusions and counts only the program's line range (what the pragma achieves upstream), so
helpers in plain-assert tests never count. Usage, as samples finish:

    report = coverage_of(completion, problem["tests"])   # CoverageError: leave the sample out
    ratio = excess_code_of(problem["before"], completion, len(report.uncovered_line_numbers))
    ...
    results["excess_code"] = excess_code({pid: ratios_of_passing_samples, ...})
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# CanItEdit's benchmark/.coveragerc: `exclude_also` keeps the default "pragma: no cover" rule.
COVERAGERC = "[report]\nexclude_also =\n    @(abc\\.)?abstractmethod\n"


class CoverageError(RuntimeError):
    """The program with its tests failed or timed out under coverage: CanItEdit drops the sample."""


@dataclass(frozen=True)
class CoverageReport:
    """Line coverage of the program's own lines (1-based line numbers; the tests are not counted).

    `total_lines` counts executable statements after exclusions, as coverage.py's "Stmts".
    """

    total_lines: int
    covered_lines: int
    uncovered_line_numbers: list[int]
    excluded: list[int]
    covered_line_numbers: list[int]

    @property
    def percent(self) -> int:
        """coverage.py's rounded "Cover" column, the integer CanItEdit parsed and stored.

        It never rounds up to 100 or down to 0 while lines are missing or covered
        (coverage.results.display_covered at precision 0).
        """
        if self.total_lines == 0:
            return 100
        pc = 100.0 * self.covered_lines / self.total_lines
        if 0 < pc < 1:
            return 1
        if 99 < pc < 100:
            return 99
        return round(pc)


def coverage_of(program: str, tests: str, *, timeout_s: float = 10.0) -> CoverageReport:
    """Run `program` + "\\n" + `tests` under `coverage run` and report the program's lines.

    Only passing completions should reach this (the program runs for real): it runs in a fresh
    temporary directory under `python -I` with a minimal environment, in its own session that is
    killed as a whole at the deadline. It is not the sandbox and does not limit memory or files.
    """
    program_lines = program.count("\n") + (0 if program.endswith("\n") else 1)
    with tempfile.TemporaryDirectory(prefix="editforge-coverage-") as tmp:
        workdir = Path(tmp)
        (workdir / "program.py").write_text(program + "\n" + tests)
        (workdir / ".coveragerc").write_text(COVERAGERC)
        coverage_cmd = [sys.executable, "-I", "-m", "coverage"]
        common = ["--rcfile=.coveragerc", "--data-file=.coverage"]
        _run([*coverage_cmd, "run", *common, "program.py"], workdir, timeout_s)
        _run([*coverage_cmd, "json", *common, "-o", "coverage.json"], workdir, timeout_s)
        measured = json.loads((workdir / "coverage.json").read_text())["files"]["program.py"]

    def in_program(lines: list[int]) -> list[int]:
        return sorted(n for n in lines if n <= program_lines)

    covered = in_program(measured["executed_lines"])
    uncovered = in_program(measured["missing_lines"])
    return CoverageReport(
        total_lines=len(covered) + len(uncovered),
        covered_lines=len(covered),
        uncovered_line_numbers=uncovered,
        excluded=in_program(measured["excluded_lines"]),
        covered_line_numbers=covered,
    )


def _run(cmd: list[str], cwd: Path, timeout_s: float) -> None:
    # No COVERAGE_*/PYTHON* variables: an outer coverage run (pytest-cov) must not hook in.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # it may have exited at the deadline
            os.killpg(proc.pid, signal.SIGKILL)  # the program's own children go with it
        proc.communicate()
        raise CoverageError(f"`coverage {cmd[4]}` timed out after {timeout_s} s") from None
    if proc.returncode != 0:
        tail = stderr.decode(errors="replace")[-2000:]
        raise CoverageError(
            f"`coverage {cmd[4]}` exited with {proc.returncode}; only passing programs have a coverage:\n{tail}"
        )


def differ_line_count(before: str, completion: str) -> int:
    """Lines `difflib.Differ` yields for before -> completion, CanItEdit's ExcessCode denominator.

    CanItEdit diffs `completion + "\\n"` (its program cut where the tests begin), so a completion
    that ends in a newline contributes one extra empty "+ " line. Kept for comparability.
    """
    after = completion + "\n"
    return len(list(difflib.Differ().compare(before.splitlines(), after.splitlines())))


def excess_code_of(before: str, completion: str, uncovered: int) -> float:
    """CanItEdit's per-completion ExcessCode ratio (not yet x 100): uncovered / Differ lines.

    The denominator counts unchanged lines too, so the same dead helper weighs less in a long
    file; see `excess_code_changed_lines_of` for a ratio over the edit alone.
    """
    return uncovered / differ_line_count(before, completion)


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

    Better than `excess_code_of` for comparing edits: unchanged code neither dilutes the ratio
    nor adds to it (an old untested function is not the model's excess), blank and comment
    lines do not count, and 1.0 means nothing the edit wrote was exercised. An edit that only
    deletes lines writes nothing in excess: 0.0. Coverage numbers a multi-line statement by its
    first line, so a change to a continuation line counts only when that first line changed.
    """
    uncovered = set(report.uncovered_line_numbers)
    statements = uncovered | set(report.covered_line_numbers)
    changed = changed_line_numbers(before, completion) & statements
    if not changed:
        return 0.0
    return len(changed & uncovered) / len(changed)


def _problem_means(per_problem: Mapping[str, Sequence[float]]) -> list[float]:
    return [float(np.mean(values)) for values in per_problem.values() if len(values) > 0]


def excess_code(per_problem: Mapping[str, Sequence[float]]) -> float | None:
    """Mean over problems of the mean per-completion ratio, x 100 (CanItEdit's ExcessCode).

    `per_problem` maps a problem id to the ratios of its passing, measured completions (from
    `excess_code_of`, or `excess_code_changed_lines_of` for the variant). Problems with none
    are skipped; None when no problem has one (CanItEdit prints "NA").
    """
    means = _problem_means(per_problem)
    return float(np.mean(means) * 100) if means else None


def excess_code_stderr(per_problem: Mapping[str, Sequence[float]]) -> float | None:
    """CanItEdit's ExcessCodeSE: population std (ddof=0) of the problem means / sqrt(#problems), x 100."""
    means = _problem_means(per_problem)
    return float(np.std(means) / math.sqrt(len(means)) * 100) if means else None


def mean_median_coverage(per_problem: Mapping[str, Sequence[int]]) -> float | None:
    """CanItEdit v1's coverage figure: per problem the median `CoverageReport.percent` of its
    passing completions, then the mean over problems that have one.

    v1 reported ExcessCode = 100 - this value, and the current pass_k.py still prints that
    number as "MeanMedianCoverage" (the mean of the medians of 100 - coverage); its ExcessCode
    is now `excess_code`. None when no problem has a passing completion.
    """
    medians = [float(np.median(values)) for values in per_problem.values() if len(values) > 0]
    return float(np.mean(medians)) if medians else None
