"""Rust: the test function ends with the run token, `::std`'s assertion macros by path; density
and `-C instrument-coverage` coverage. The toolchain (compiled crates) is `eval.toolchains.rust`'s."""

from __future__ import annotations

import re
import shlex

from core.benchmarks.humanevalfix import RUST_MAIN
from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.languages.base import NO_TOKEN, CommandJob, Language, before_last_brace, runner_source
from eval.languages.lines import LineCoverage, shifted, source_lines
from eval.toolchains import rust

RUST_TOKEN = runner_source("token.rs")  # the end of the test function's body
RUST_ASSERTS = re.compile(r"(?<![\w:])((?:debug_)?assert(?:_eq|_ne)?|panic|unreachable)!")


class Rust(Language):
    name = "rust"
    test_functions = re.compile(r"#\[test\]")
    assertions = re.compile(r"(?<![\w:])(?:debug_)?assert(?:_eq|_ne)?!\s*[(\[{]")

    def unavailable(self) -> str | None:
        return rust.problem()

    def job(self, program: str, tests: str, helpers: str = "", split: bool = False) -> CommandJob:
        tests = before_last_brace(RUST_ASSERTS.sub(r"::std::\1!", tests), RUST_TOKEN, skip=1)
        return CommandJob(
            [
                "sh",
                "-c",
                f"{rust.toolchain().compile('main.rs', 'main')} {NO_TOKEN} && rm -f main.rs && ./main",
            ],
            {"main.rs": program + "\n" + tests + "\n"},
        )

    def coverage_unavailable(self) -> str | None:
        tools = rust.problem() or rust.coverage_tools()
        return tools if isinstance(tools, str) else None

    def coverage_of(self, problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
        """The profile read by the `llvm-profdata` and `llvm-cov` of rustc's own LLVM version; the
        lines `llvm-cov` reports with a count, except bigcode's `fn main(){}`, which no test calls."""
        profdata, cov = rust.coverage_tools()  # coverage_unavailable() vouched for them
        job = self.job(problem.program(problem.after), problem.tests)
        script = (
            rust.toolchain().compile("main.rs", "main", "-C", "instrument-coverage")
            + " && LLVM_PROFILE_FILE=main.profraw ./main >&2"
            + f" && {shlex.quote(profdata)} merge -sparse main.profraw -o main.profdata"
            + f" && {shlex.quote(cov)} export -format=lcov -instr-profile=main.profdata main"
        )
        result = sandbox.run_command(["sh", "-c", script], job.files, limits=limits)
        if not result.passed:
            return (
                f"coverage failed: the reference did not pass under -C instrument-coverage ({result.status})"
            )
        executable, covered, ours = set(), set(), False
        for row in result.stdout.splitlines():
            if row.startswith("SF:"):
                ours = row.endswith("main.rs")
            elif ours and row.startswith("DA:"):
                number, count = (int(x) for x in row[3:].split(",")[:2])
                executable.add(number)
                if count > 0:
                    covered.add(number)
        after = source_lines(problem.after)
        main = {n for n, line in enumerate(after, 1) if line.strip() == RUST_MAIN.strip()}
        measured = shifted(problem, executable, covered, 0)
        return LineCoverage(measured.executable - main, measured.covered - main)


LANGUAGE = Rust()
