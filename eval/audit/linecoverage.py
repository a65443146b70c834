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
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.benchmarks.humanevalfix import RUST_MAIN
from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.excess_code import CoverageError, coverage_reports
from eval.execute import declared_unverified
from eval.languages import JS_PRELUDE, command_job
from eval.toolchains import go, rust

THRESHOLD = 75.0  # the published audit's cut: suites below it are listed
JAVA_LIB = "/usr/share/java"
JACOCO = (f"{JAVA_LIB}/org.jacoco.agent.jar", f"{JAVA_LIB}/org.jacoco.core.jar", f"{JAVA_LIB}/asm.jar")
JACOCO_CP = ":".join(
    f"{JAVA_LIB}/{jar}" for jar in ("org.jacoco.core.jar", "asm.jar", "asm-commons.jar", "asm-tree.jar")
)
# Debian ships JaCoCo's agent and core, not its command line: this small reader prints "line covered".
DUMP_SOURCE = (Path(__file__).resolve().parent / "tools" / "CoverageDump.java").read_text()


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


def diff_region(before: str, after: str) -> set[int]:
    """1-based lines of `after` the edit added or rewrote (difflib's replace and insert lines)."""
    import difflib

    matcher = difflib.SequenceMatcher(None, source_lines(before), source_lines(after), autojunk=False)
    return {
        j + 1
        for tag, _, _, j1, j2 in matcher.get_opcodes()
        if tag in ("replace", "insert")
        for j in range(j1, j2)
    }


def unavailable(language: str) -> str | None:
    """Why this machine cannot measure `language`'s coverage, or None when it can."""
    if language == "js" and shutil.which("c8") is None:
        return "c8 is not installed (npm install -g c8)"
    if language == "java" and not all(Path(p).is_file() for p in JACOCO):
        return "JaCoCo is not installed (apt-get install libjacoco-java)"
    if language == "go":
        return go.problem()
    if language == "rust":
        tools = rust.problem() or rust.coverage_tools()
        return tools if isinstance(tools, str) else None
    if language not in ("python", "cpp", "js", "java"):
        return f"no coverage tool for {language}"
    return None


def prelude_lines(problem: Problem) -> int:
    """Lines the program puts before `after` (a prelude and its separating newline, or what a
    benchmark assembles around it: Go's test setup)."""
    program = problem.program(problem.after)
    if not problem.after.strip() or not program.endswith(problem.after):
        return 0
    return program[: len(program) - len(problem.after)].count("\n")


def _python(problems: Sequence[Problem], sandbox: Sandbox, limits: SandboxLimits) -> list[LineCoverage | str]:
    jobs = [(p.program(p.after), p.tests) for p in problems]
    out: list[LineCoverage | str] = []
    unverified = declared_unverified(sandbox, problems)
    for problem, report in zip(problems, coverage_reports(sandbox, jobs, limits, unverified), strict=True):
        if isinstance(report, CoverageError):
            out.append(f"coverage failed: {report}")
            continue
        shift, n = prelude_lines(problem), len(source_lines(problem.after))
        statements = {s - shift for s in report.statements if shift < s <= shift + n}  # the reference's lines
        missing = {m - shift for m in report.missing}
        out.append(LineCoverage(frozenset(statements), frozenset(statements - missing)))
    return out


GCOV_LINE = re.compile(r"^\s*([^:]+):\s*(\d+):")


def parse_gcov(text: str) -> tuple[set[int], set[int]]:
    """(executable, covered) lines from a .gcov file."""
    executable, covered = set(), set()
    for line in text.splitlines():
        match = GCOV_LINE.match(line)
        if not match or match.group(2) == "0":
            continue
        count, number = match.group(1).strip(), int(match.group(2))
        if count == "-":
            continue
        executable.add(number)
        if count.rstrip("*").isdigit() and int(count.rstrip("*")) > 0:
            covered.add(number)
    return executable, covered


def _cpp(problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
    job = command_job("cpp", problem.program(problem.after), problem.tests)
    argv = [
        "sh",
        "-c",
        # main.cpp compiled apart, so that its notes are main.gcno (gcc names them main-main.gcno
        # when one command compiles and links several sources)
        "g++ -std=c++17 -O0 --coverage -c main.cpp -o main.o "
        "&& g++ -std=c++17 -O0 -c editforge_token.cpp -o editforge_token.o "
        "&& g++ --coverage -o main main.o editforge_token.o -lcrypto && ./main "
        "&& gcov main.cpp >/dev/null "
        "&& cat main.cpp.gcov",
    ]
    result = sandbox.run_command(
        argv, job.files, limits=replace(limits, timeout_s=job.timeout_s or limits.timeout_s)
    )
    if not result.passed:
        return f"coverage failed: the reference did not pass under gcov ({result.status})"
    return _shifted(problem, *parse_gcov(result.stdout), 0)


def _js(problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
    """c8 (V8's coverage) reports every line of a block as a statement; its line counts, as reported."""
    job = command_job("js", problem.program(problem.after), problem.tests)
    argv = ["sh", "-c", "c8 --reporter=json --report-dir=cov node main.js >&2 && cat cov/coverage-final.json"]
    result = sandbox.run_command(argv, job.files, limits=limits)
    if not result.passed:
        return f"coverage failed: the reference did not pass under c8 ({result.status})"
    try:
        report = next(iter(json.loads(result.stdout).values()))
    except (ValueError, StopIteration):
        return "coverage failed: c8 wrote no report"
    executable, covered = set(), set()
    for key, span in report["statementMap"].items():
        for line in range(span["start"]["line"], span["end"]["line"] + 1):
            executable.add(line)
            if report["s"].get(key):
                covered.add(line)
    return _shifted(problem, executable, covered, JS_PRELUDE.count("\n"))


def _java(problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
    job = command_job("java", problem.program(problem.after), problem.tests)
    script = (
        "mkdir classes tool && javac -J-Xmx256m -d classes Main.java "
        f"&& jar xf {JAVA_LIB}/org.jacoco.agent.jar jacocoagent.jar "
        "&& java -Xmx256m -XX:+UseSerialGC -javaagent:jacocoagent.jar=destfile=jacoco.exec -cp classes Main "
        f"&& javac -J-Xmx256m -cp {JACOCO_CP} -d tool CoverageDump.java "
        f"&& java -Xmx256m -cp {JACOCO_CP}:tool CoverageDump"
    )
    files = {**job.files, "CoverageDump.java": DUMP_SOURCE}
    result = sandbox.run_command(
        ["sh", "-c", script], files, limits=replace(limits, memory_mb=job.memory_mb or 8192)
    )
    if not result.passed:
        return f"coverage failed: the reference did not pass under JaCoCo ({result.status})"
    executable, covered = set(), set()
    for line in result.stdout.splitlines():
        number, _, hit = line.partition(" ")
        if number.isdigit():
            executable.add(int(number))
            if hit.strip() == "1":
                covered.add(int(number))
    return _shifted(problem, executable, covered, 0)


GO_BLOCK = re.compile(r"^(.+):(\d+)\.\d+,(\d+)\.\d+ (\d+) (\d+)$")
GO_TEST = re.compile(r"\bfunc\s+(Test\w*)\s*\(\s*\w+\s+\*testing\.T\s*\)")


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


def _go(problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
    source = command_job("go", problem.program(problem.after), problem.tests).files["main_test.go"]
    calls = "".join(f"    {name}(t)\n" for name in GO_TEST.findall(problem.tests))
    runner = f'package main\n\nimport "testing"\n\nfunc TestEditforgeCoverage(t *testing.T) {{\n{calls}}}\n'
    script = go.toolchain().script(
        "test -count=1 -covermode=set -coverprofile=cover.out main.go main_test.go >&2"
    )
    files = {"main.go": source, "main_test.go": runner}
    result = sandbox.run_command(["sh", "-c", script + " && cat cover.out"], files, limits=limits)
    if not result.passed:
        return f"coverage failed: the reference did not pass under go test -cover ({result.status})"
    return _shifted(problem, *parse_go_profile(result.stdout, source), 0)


def _rust(problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
    profdata, cov = rust.coverage_tools()  # unavailable() vouched for them
    job = command_job("rust", problem.program(problem.after), problem.tests)
    script = (
        rust.toolchain().compile("main.rs", "main", "-C", "instrument-coverage")
        + " && LLVM_PROFILE_FILE=main.profraw ./main >&2"
        + f" && {shlex.quote(profdata)} merge -sparse main.profraw -o main.profdata"
        + f" && {shlex.quote(cov)} export -format=lcov -instr-profile=main.profdata main"
    )
    result = sandbox.run_command(["sh", "-c", script], job.files, limits=limits)
    if not result.passed:
        return f"coverage failed: the reference did not pass under -C instrument-coverage ({result.status})"
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
    measured = _shifted(problem, executable, covered, 0)
    return LineCoverage(measured.executable - main, measured.covered - main)


def _shifted(problem: Problem, executable: set[int], covered: set[int], extra: int) -> LineCoverage:
    """Lines of the file -> lines of `after` (dropping the prelude's and the tests' lines)."""
    shift, n = prelude_lines(problem) + extra, len(source_lines(problem.after))
    keep = {line - shift for line in executable if shift < line <= shift + n}
    return LineCoverage(frozenset(keep), frozenset(keep & {c - shift for c in covered}))


def measure(
    problems: Sequence[Problem], sandbox: Sandbox, limits: SandboxLimits
) -> dict[str, dict[str, Any]]:
    """Per problem id: whole-file and diff-region coverage (percent), the region, or why not measured."""
    found: dict[str, LineCoverage | str] = {}
    python = [p for p in problems if p.language == "python" and p.after.strip()]
    found.update({p.id: c for p, c in zip(python, _python(python, sandbox, limits), strict=True)})
    commands = []
    for problem in problems:
        if problem.id in found:
            continue
        if not problem.after.strip():
            found[problem.id] = "no reference to measure"
        elif (why := unavailable(problem.language)) is not None:
            found[problem.id] = why
        else:
            commands.append(problem)
    measurers = {"cpp": _cpp, "js": _js, "java": _java, "go": _go, "rust": _rust}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as threads:  # one per sandbox worker
        results = threads.map(lambda p: measurers[p.language](p, sandbox, limits), commands)
        found.update({p.id: r for p, r in zip(commands, results, strict=True)})
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
