"""The lines a split run executed, collected where they run, at close to native speed.

ExcessCode needs the lines of main.py (program + "\\n" + tests) that a passing run executed. A
tracer (coverage.py's) makes a traced program 3-6x slower on CPython 3.11, and was a second run
after the verdict run. A split run measures in the verdict run itself instead:

- the candidate's process instruments the program's code with slipcover's probes (bytecode probes
  removed once they have fired; ``sys.monitoring`` on 3.12+) and sends the lines that fired, as
  plain data, when the trusted side asks (``ProgramLines``);
- the trusted process traces the frames of the tests' own file only (``TestLines``): a few lines
  per check, and no candidate code ever runs there;
- the server maps both onto main.py (``split_lines``), and the host computes coverage.py's analysis
  from its own copy of the texts (statements, exclusions, missing lines: ``measured_coverage``), so
  ExcessCode keeps coverage.py's numbers and no server loads coverage.py to measure split runs.

Not reward-grade: the candidate's process may report any lines it likes (docs/sandbox.md). Loaded
only by servers that measure split runs ("probes" servers): slipcover's probe module writes into
code objects, a primitive a program judged in its own process must not find preloaded.
"""

from __future__ import annotations

import json
import re
import sys
import types
from typing import TypeGuard

try:  # in the sandbox the harness loads this file from its own folder
    from coverage_run import analysis, exclusion
except ImportError:
    from core.sandbox.coverage_run import analysis, exclusion

NEWLINE = re.compile(r"\r\n|\r|\n")  # the line breaks compile() counts


def prepared_probes() -> None:
    """Import slipcover before the fork, so no run pays for it. Its tables of each file's lines are
    not built: the statements come from coverage.py's parser, and building them was half of the
    time instrumenting a program takes."""
    import slipcover

    slipcover.Slipcover.lines_from_code = staticmethod(_no_lines)
    slipcover.Slipcover.branches_from_code = staticmethod(_no_lines)
    slipcover.Slipcover().instrument(compile("x = 1\n", "<warm-up>", "exec"))


def _no_lines(code: types.CodeType) -> tuple:
    return ()


class ProgramLines:
    """The program's executed lines, from slipcover's probes in the candidate's process."""

    def __init__(self) -> None:
        import slipcover

        self.slipcover = slipcover.Slipcover()

    def instrument(self, code: types.CodeType) -> types.CodeType:
        return self.slipcover.instrument(code)

    def lines(self) -> list[int]:
        seen: set[int] = set()
        for table in (self.slipcover.all_seen, self.slipcover.newly_seen):
            for lines in list(table.values()):
                seen.update(n for n in lines if type(n) is int)
        return sorted(seen)


class TestLines:
    """The lines of one file (the tests') that ran in this thread while in the ``with`` block."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.lines: set[int] = set()

    def __enter__(self) -> TestLines:
        self.previous = sys.gettrace()
        sys.settrace(self._call)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self.previous)

    def _call(self, frame: types.FrameType, event: str, arg: object):
        return self._line if frame.f_code.co_filename == self.filename else None

    def _line(self, frame: types.FrameType, event: str, arg: object):
        if event == "line":
            self.lines.add(frame.f_lineno)
        return self._line


def main_py_lines(program: str, program_lines: object, test_lines: object) -> set[int] | None:
    """Both sides' lines as lines of main.py (program + "\\n" + tests); None where either side sent
    something that is not a list of line numbers (one past its text only names no statement)."""
    offset = len(NEWLINE.findall(program + "\n"))
    if not (is_line_list(program_lines) and is_line_list(test_lines)):
        return None
    return set(program_lines) | {n + offset for n in test_lines}


def is_line_list(value: object) -> TypeGuard[list[int]]:
    return type(value) is list and all(type(n) is int and 0 < n < 10_000_000 for n in value)


def split_lines(program: str, outcome: bytes) -> dict:
    """The executed lines of main.py of a passing split run, from what its trusted side reported
    (its own lines and the candidate's), or why there are none: ``{"executed": [...]}``, which the
    host turns into coverage.py's analysis (`measured_coverage`)."""
    try:
        reported = json.loads(outcome).get("lines") or {}
        executed = main_py_lines(program, reported.get("program"), reported.get("tests"))
    except (ValueError, AttributeError, RecursionError):
        executed = None
    if executed is None:
        return {"error": "the run passed but sent no readable lines"}
    return {"executed": sorted(executed)}


def measured_coverage(program: str, tests: str, executed: list[int]) -> dict:
    """coverage.py's analysis of main.py (program + "\n" + tests) given the lines that ran, on the
    host: the texts are the host's own copies, the lines are checked numbers (`is_line_list`), and
    the parser never runs in the sandbox's processes (no server loads coverage.py to measure)."""
    try:
        return analysis(program + "\n" + tests, set(executed), exclusion())
    except Exception as exc:  # coverage.py's parser on a text that compiled but that it cannot read
        return {"error": f"coverage.py cannot analyse the program: {type(exc).__name__}: {exc}"[:500]}
