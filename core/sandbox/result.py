"""The typed outcome of one sandboxed execution."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TESTS_FRAME = re.compile(r'File "<tests>", line (\d+)')

# Every status an ExecutionResult can carry, with what it means.
STATUSES: dict[str, str] = {
    "passed": "the harness observed the run's private pass sentinel (python) or exit code 0 "
    "and the pass marker (commands)",
    "passed_unverified": "a python run of the declared unverified mode (modules with raw memory "
    "access allowed) reported its sentinel: it passed as far as a program that could have read the "
    "sentinel from memory lets anyone know",
    "failed": "the program ran to an end without passing: an exception, a failed assert, an exit "
    "(even with code 0) before the tests finished, or a non-zero exit code",
    "timeout": "the wall-clock limit expired; the parent killed every process of the run",
    "memory": "the run hit its memory limit (MemoryError under RLIMIT_AS, or an OOM kill in its cgroup)",
    "killed": "the program died from a signal it did not get from the sandbox's limits, or it "
    "killed the sandbox's server (local backend)",
    "output_limit": "stdout or stderr exceeded max_output_bytes; the run was stopped",
    "error": "the sandbox itself failed (could not start, lost its server, protocol error); "
    "says nothing about the program",
}

PASSING = frozenset({"passed", "passed_unverified"})
# How a Python run was judged: "split" (the tests ran in a process of their own, the program behind a
# plain-data boundary), "in_process" (program and tests in one interpreter); None for commands.
MODES = ("split", "in_process", None)


@dataclass(frozen=True)
class ExecutionResult:
    """What happened to one program: a status from ``STATUSES``, its output and its timing.

    ``passed`` is True only when the status is ``"passed"`` or ``"passed_unverified"``, i.e. the
    sentinel was observed (``verified`` tells the two apart);
    an exit code of 0 alone never passes. ``stdout``/``stderr`` hold at most
    ``max_output_bytes`` bytes each, decoded as UTF-8 with ``errors="replace"``.
    ``duration_s`` is the wall-clock time from the program's start to its end (or to the
    kill), measured by its parent, excluding queueing. ``detail`` explains a non-pass, e.g.
    ``"SystemExit(0) before the tests finished"``. ``coverage`` is set for runs that asked for
    it and passed: main.py's 1-based ``statements``, ``excluded`` and ``missing`` lines as
    coverage.py reports them, or ``{"error": ...}``. ``mode`` says how a Python run was judged:
    ``"split"`` (the tests in a process that runs no candidate code; ``tests_passed``/``tests_total``
    count its assert statements, ``delegated_checks`` the truth values that only the program's code
    could produce, such as ``==`` between two of its objects) or ``"in_process"``.
    ``fresh_scratch``: nothing of an earlier run could reach this one through /tmp or /dev/shm.
    """

    status: str
    passed: bool
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    detail: str = ""
    coverage: dict[str, list[int]] | dict[str, str] | None = None
    channel: str = ""  # records a wrapper program reported (Sandbox.run(channel=True)), one per line
    mode: str | None = None  # "split" or "in_process" for Python runs (MODES); None for commands
    tests_passed: int | None = None  # split runs: assert statements that held (see docs/sandbox.md)
    tests_total: int | None = None  # split runs: assert statements in the tests
    delegated_checks: int | None = None  # split runs: truth values only the program's code produced
    fresh_scratch: bool = False  # /tmp and /dev/shm were new mounts for this run (bwrap), not emptied

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {sorted(STATUSES)}")
        if self.passed != (self.status in PASSING):
            raise ValueError(f"passed={self.passed} contradicts status={self.status!r}")

    @property
    def failed_test_lines(self) -> list[int]:
        """The lines of the tests' frames in the run's traceback, outermost first (a split or
        in-process Python run compiles its tests as `<tests>`): where the tests stopped."""
        return [int(n) for n in _TESTS_FRAME.findall(self.stderr)]

    @property
    def verified(self) -> bool:
        """Passed in strict mode, where no program can reach the sentinel through raw memory."""
        return self.status == "passed"

    @classmethod
    def error(cls, detail: str, duration_s: float = 0.0) -> ExecutionResult:
        """A sandbox failure, which must not be mistaken for a verdict on the program."""
        return cls("error", False, None, "", "", duration_s, detail)
