"""Lines of a reference program, as its languages' coverage tools report them: what the audit's
line coverage (eval/audit/linecoverage.py) and each language's measurer share."""

from __future__ import annotations

from dataclasses import dataclass

from core.problems import Problem


@dataclass(frozen=True)
class LineCoverage:
    """Executable and covered lines of the reference (1-based lines of `after`)."""

    executable: frozenset[int]
    covered: frozenset[int]

    def percent(self, lines: set[int] | None = None) -> float | None:
        scope = self.executable if lines is None else self.executable & lines
        return None if not scope else 100.0 * len(scope & self.covered) / len(scope)


def source_lines(text: str) -> list[str]:
    """Lines as Python, coverage.py and compilers number them: split on newlines only (str.splitlines
    also breaks on form feeds, U+2028 and other separators, which would shift every number after)."""
    lines = text.replace("\r\n", "\n").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def prelude_lines(problem: Problem) -> int:
    """Lines the program puts before `after` (a prelude and its separating newline, or what a
    benchmark assembles around it: Go's test setup)."""
    program = problem.program(problem.after)
    if not problem.after.strip() or not program.endswith(problem.after):
        return 0
    return program[: len(program) - len(problem.after)].count("\n")


def shifted(problem: Problem, executable: set[int], covered: set[int], extra: int) -> LineCoverage:
    """Lines of the file -> lines of `after` (dropping the prelude's and the tests' lines)."""
    shift, n = prelude_lines(problem) + extra, len(source_lines(problem.after))
    keep = {line - shift for line in executable if shift < line <= shift + n}
    return LineCoverage(frozenset(keep), frozenset(keep & {c - shift for c in covered}))
