"""What a language declares (`Language`), and what the languages' runs share.

A language is one object in one module: whether this machine can run it (`unavailable`: its
toolchain), how a program and its tests run in the sandbox (`job`, a `CommandJob`: the command
line and files, whose tests write the run token back after their last assertion), how its tests
are counted for the audit's test density (`test_functions` and `assertions`, counted on the
tests with comments and string contents blanked), and how the audit measures a reference's line
coverage (`coverage_unavailable`, `coverage`). Python is the exception that runs in the sandbox's
interpreter harness instead of a command (`eval/languages/python.py`).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from core.problems import Problem
    from core.sandbox import Sandbox, SandboxLimits
    from eval.languages.lines import LineCoverage

RUNNERS = Path(__file__).parents[1] / "runners"  # the code of ours each language's run adds, as source files
NO_TOKEN = "3<&- 4>&-"  # a compile step never sees the token's descriptors


def runner_source(name: str) -> str:
    return (RUNNERS / name).read_text()


@dataclass(frozen=True)
class CommandJob:
    argv: list[str]
    files: dict[str, str]
    memory_mb: int | None = None  # a JVM reserves far more address space than it uses
    timeout_s: float | None = None  # replaces sandbox.timeout_s for this job (compile + run)
    run_token: bool = True  # the tests write the run token back once they all passed
    trusted_argv: list[str] | None = None  # a split run: the tests' own command (Sandbox.run_split_command)
    trusted_input: str = ""  # its stdin


# A string literal (kept as empty quotes) or a comment (dropped), in C-like languages.
_C_TOKENS = re.compile(
    r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|`(?:\\.|[^`\\])*`|//[^\n]*|/\*.*?\*/', re.DOTALL
)


def strip_c_comments(code: str) -> str:
    """`code` without comments and with every string literal emptied (JS, C++, Java, Go, Rust)."""
    return _C_TOKENS.sub(lambda m: "" if m.group()[0] == "/" else m.group()[0] * 2, code)


def before_last_brace(tests: str, code: str, skip: int = 0) -> str:
    """``tests`` with ``code`` before its last closing brace but ``skip`` (the end of C++'s ``main``;
    of Rust's test function, inside ``mod tests``). The tests are the benchmark's own text; a shape
    other than braces closing at the end is refused rather than guessed at."""
    end = len(tests.rstrip())
    for _ in range(skip + 1):
        if end == 0 or tests[end - 1] != "}":
            raise ValueError(f"the tests do not end with {skip + 1} closing braces: {tests[-200:]!r}")
        brace = end - 1
        end = len(tests[:brace].rstrip())
    return tests[:brace] + code + tests[brace:]


class Language(ABC):
    """One language's knowledge: see the module docstring."""

    name: ClassVar[str]
    tool: ClassVar[str | None] = None  # the command its runs need on PATH (None: see `unavailable`)
    test_functions: ClassVar[re.Pattern[str] | None] = None  # the audit's test-density rules
    assertions: ClassVar[re.Pattern[str] | None] = None

    def unavailable(self) -> str | None:
        """Why this machine cannot run the language's programs, or None when it can."""
        import shutil

        return (
            f"no {self.tool} on PATH" if self.tool is not None and shutil.which(self.tool) is None else None
        )

    @abstractmethod
    def job(self, program: str, tests: str, helpers: str = "", split: bool = False) -> CommandJob:
        """The command line and files that run ``program`` with ``tests`` (the token epilogue
        included; ``split``: the tests in a process of their own, where the language has such runs)."""

    def test_counts(self, tests: str) -> tuple[int, int]:
        """(test functions, assertions) of ``tests`` (eval/audit/density.py's rules)."""
        if self.test_functions is None or self.assertions is None:
            raise ValueError(f"no test-density rules for language {self.name!r}")
        code = strip_c_comments(tests)
        return len(self.test_functions.findall(code)), len(self.assertions.findall(code))

    def coverage_unavailable(self) -> str | None:
        """Why this machine cannot measure the language's line coverage, or None when it can."""
        return f"no coverage tool for {self.name}"

    def coverage(
        self, problems: Sequence[Problem], sandbox: Sandbox, limits: SandboxLimits, threads: Executor
    ) -> list[LineCoverage | str]:
        """Each reference's line coverage by its own tests (or why not): one run per problem, on
        ``threads`` (one per sandbox worker)."""
        return list(threads.map(lambda p: self.coverage_of(p, sandbox, limits), problems))

    def coverage_of(self, problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
        """One reference's line coverage by its own tests, or why it was not measured."""
        return f"no coverage tool for {self.name}"
