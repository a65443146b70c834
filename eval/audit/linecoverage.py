"""Statement coverage of each reference by its own tests: the whole file, and the diff region.

The diff region is the set of lines of the reference (`after`) that the edit added or rewrote
(`diff_region`: difflib's replace/insert lines, lines numbered as Python numbers them). Whole-file coverage
counts the reference's executable lines only (not the tests' own lines), diff-region coverage
the executable lines inside the region (None when the edit only deleted lines or touched no
executable line).

- **Python**: coverage.py inside the sandbox (`eval.excess_code.coverage_reports`), statements
  after its exclusions.
- **C++**: gcov: the program is compiled with `--coverage`, run, and `main.cpp.gcov` read back
  (a line with a count is executable; `#####` means never run).
- **JavaScript**: c8 (V8's coverage; `npm install -g c8`), its line counts as it reports them.
- **Java**: JaCoCo's agent from Debian's `libjacoco-java`, read back by `tools/CoverageDump.java`
  (Debian ships no JaCoCo command line).
- **Go**: `go test -coverprofile` (statement blocks, as `go tool cover` shows them). Go instruments
  only a package's non-test files, so the program and its tests go to `main.go` and a `main_test.go`
  calls the test functions; a line of a block with statements is executable (blank, comment and
  lone-brace lines aside), and covered when a block that ran holds it.
- **Rust**: `-C instrument-coverage`, its profile read by the `llvm-profdata` and `llvm-cov` of
  rustc's own LLVM version (rustup's llvm-tools or Debian's llvm-<version>); the lines `llvm-cov`
  reports with a count, except bigcode's `fn main(){}`, which no test calls. It needs a rustc with
  the profiler runtime: Debian's has none, and the reason is reported instead.
A tool that is not installed is reported as unavailable with the install hint, never guessed.
Each language's measurer is its `Language.coverage` (eval/languages/).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.languages import Language, get_language
from eval.languages.lines import LineCoverage, prelude_lines, source_lines

__all__ = [
    "THRESHOLD",
    "LineCoverage",
    "diff_region",
    "measure",
    "prelude_lines",
    "source_lines",
    "unavailable",
]

THRESHOLD = 75.0  # the published audit's cut: suites below it are listed


def diff_region(before: str, after: str) -> set[int]:
    """1-based lines of `after` the edit added or rewrote (difflib's replace and insert lines)."""
    matcher = difflib.SequenceMatcher(None, source_lines(before), source_lines(after), autojunk=False)
    return {
        j + 1
        for tag, _, _, j1, j2 in matcher.get_opcodes()
        if tag in ("replace", "insert")
        for j in range(j1, j2)
    }


def unavailable(language: str) -> str | None:
    """Why this machine cannot measure `language`'s coverage, or None when it can."""
    found = get_language(language)
    return found.coverage_unavailable() if found is not None else f"no coverage tool for {language}"


def measure(
    problems: Sequence[Problem], sandbox: Sandbox, limits: SandboxLimits
) -> dict[str, dict[str, Any]]:
    """Per problem id: whole-file and diff-region coverage (percent), the region, or why not measured."""
    found: dict[str, LineCoverage | str] = {}
    groups: dict[str, tuple[Language, list[Problem]]] = {}
    for problem in problems:
        language = get_language(problem.language)
        if not problem.after.strip():
            found[problem.id] = "no reference to measure"
        elif language is None:
            found[problem.id] = f"no coverage tool for {problem.language}"
        elif (why := language.coverage_unavailable()) is not None:
            found[problem.id] = why
        else:
            groups.setdefault(language.name, (language, []))[1].append(problem)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as threads:  # one per sandbox worker
        for language, group in groups.values():
            found.update(
                zip((p.id for p in group), language.coverage(group, sandbox, limits, threads), strict=True)
            )
    return {p.id: _row(p, found[p.id]) for p in problems}


def _row(problem: Problem, measured: LineCoverage | str) -> dict[str, Any]:
    region = diff_region(problem.before, problem.after)
    if isinstance(measured, str):
        return {
            "coverage": None,
            "diff_coverage": None,
            "coverage_error": measured,
            "diff_lines": len(region),
        }
    return {
        "coverage": measured.percent(),
        "diff_coverage": measured.percent(region),
        "diff_lines": len(region),
        "executable_lines": len(measured.executable),
        "executable": sorted(measured.executable),  # for the scope check; audit.json keeps the count
        "uncovered_lines": sorted(measured.executable - measured.covered),
        "coverage_error": None,
    }
