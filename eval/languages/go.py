"""Go: bigcode's `main_test.go` with a `TestMain` of ours that writes the run token; density and
`go test -coverprofile` coverage. The toolchain (compiled testify) is `eval.toolchains.go`'s."""

from __future__ import annotations

import re
import secrets

from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.languages.base import NO_TOKEN, CommandJob, Language, runner_source
from eval.languages.lines import LineCoverage, shifted, source_lines
from eval.toolchains import go

GO_RUNNER = runner_source("editforge_main_test.go")
GO_BLOCK = re.compile(r"^(.+):(\d+)\.\d+,(\d+)\.\d+ (\d+) (\d+)$")
GO_TEST = re.compile(r"\bfunc\s+(Test\w*)\s*\(\s*\w+\s+\*testing\.T\s*\)")
GO_TEST_BODY = re.compile(r"\bfunc\s+Test\w*\s*\(\s*\w+\s+\*testing\.T\s*\)\s*\{")


def parse_go_profile(profile: str, source: str) -> tuple[set[int], set[int]]:
    """(executable, covered) lines of main.go from a `go test -coverprofile` profile."""
    lines = source_lines(source)
    executable, covered = set(), set()
    for row in profile.splitlines():
        match = GO_BLOCK.match(row.strip())
        if not match or not match.group(1).endswith("main.go") or match.group(4) == "0":
            continue
        span = range(int(match.group(2)), int(match.group(3)) + 1)
        code = {n for n in span if n <= len(lines) and lines[n - 1].strip() not in ("", "}", ")")}
        code = {n for n in code if not lines[n - 1].strip().startswith("//")}
        executable |= code
        if match.group(5) != "0":
            covered |= code
    return executable, covered


class Go(Language):
    name = "go"
    test_functions = GO_TEST
    assertions = re.compile(r"\b(?:assert|require)\.(?!New\b)[A-Z]\w*\s*\(|\bt\.(?:Error|Fatal|Fail)\w*\s*\(")

    def unavailable(self) -> str | None:
        return go.problem()

    def job(self, program: str, tests: str, helpers: str = "", split: bool = False) -> CommandJob:
        """Each of the tests' test functions counts itself in a variable whose name no program knows
        (drawn per job): the token is written only where m.Run returned 0 and every one of them ran,
        whatever a program did to the test flags (a `-test.run` that selects none, a count of 0, a
        flag set swapped before TestMain)."""
        ran = f"editforge_ran_{secrets.token_hex(8)}"
        counted = GO_TEST_BODY.sub(lambda m: f"{m.group()} {ran}++;", tests)
        count = f"const editforge_tests = {len(GO_TEST.findall(tests))}"
        runner = GO_RUNNER.replace("editforge_ran", ran).replace("const editforge_tests = 0", count)
        # bigcode's file name: `go test` only compiles the tests of *_test.go files
        compile_ = go.toolchain().script("test -c -o main.test main_test.go editforge_main_test.go")
        return CommandJob(
            ["sh", "-c", f"{compile_} {NO_TOKEN} && rm -f *.go && ./main.test"],
            {"main_test.go": program + "\n" + counted + "\n", "editforge_main_test.go": runner},
        )

    def coverage_unavailable(self) -> str | None:
        return go.problem()

    def coverage_of(self, problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
        """Go instruments only a package's non-test files, so the program and its tests go to `main.go`
        and a `main_test.go` calls the test functions; a line of a block with statements is
        executable (blank, comment and lone-brace lines aside), covered when a block that ran holds it."""
        source = problem.program(problem.after) + "\n" + problem.tests + "\n"
        calls = "".join(f"    {name}(t)\n" for name in GO_TEST.findall(problem.tests))
        runner = (
            f'package main\n\nimport "testing"\n\nfunc TestEditforgeCoverage(t *testing.T) {{\n{calls}}}\n'
        )
        script = go.toolchain().script(
            "test -count=1 -covermode=set -coverprofile=cover.out main.go main_test.go >&2"
        )
        files = {"main.go": source, "main_test.go": runner}
        result = sandbox.run_command(["sh", "-c", script + " && cat cover.out"], files, limits=limits)
        if not result.passed:
            return f"coverage failed: the reference did not pass under go test -cover ({result.status})"
        return shifted(problem, *parse_go_profile(result.stdout, source), 0)


LANGUAGE = Go()
