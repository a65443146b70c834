"""The typed outcome of one sandboxed execution."""

from __future__ import annotations

from dataclasses import dataclass

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
    coverage.py reports them, or ``{"error": ...}``.
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

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {sorted(STATUSES)}")
        if self.passed != (self.status in PASSING):
            raise ValueError(f"passed={self.passed} contradicts status={self.status!r}")

    @property
    def verified(self) -> bool:
        """Passed in strict mode, where no program can reach the sentinel through raw memory."""
        return self.status == "passed"

    @classmethod
    def error(cls, detail: str, duration_s: float = 0.0) -> ExecutionResult:
        """A sandbox failure, which must not be mistaken for a verdict on the program."""
        return cls("error", False, None, "", "", duration_s, detail)
