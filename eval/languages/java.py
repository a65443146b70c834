"""Java (javac): a `main` of ours calls the tests' and then writes the run token; density (with
HumanEvalPack's guarded check lists) and JaCoCo coverage."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.languages.base import NO_TOKEN, CommandJob, Language, runner_source, strip_c_comments
from eval.languages.lines import LineCoverage, shifted

JAVA_RUNNER = runner_source("EditforgeRun.java")
JAVA_LIB = "/usr/share/java"
JACOCO = (f"{JAVA_LIB}/org.jacoco.agent.jar", f"{JAVA_LIB}/org.jacoco.core.jar", f"{JAVA_LIB}/asm.jar")
JACOCO_CP = ":".join(
    f"{JAVA_LIB}/{jar}" for jar in ("org.jacoco.core.jar", "asm.jar", "asm-commons.jar", "asm-tree.jar")
)
# Debian ships JaCoCo's agent and core, not its command line: this small reader prints "line covered".
DUMP_SOURCE = (Path(__file__).resolve().parents[1] / "audit" / "tools" / "CoverageDump.java").read_text()
_JAVA_CHECK_LIST = re.compile(r"\bList\s*<\s*Boolean\s*>\s+(\w+)\s*=\s*Arrays\.asList\s*\(")


def _list_elements(code: str, start: int) -> int:
    """Top-level comma-separated elements of the argument list that opens just before `start`."""
    depth, elements, pending = 0, 0, False
    for ch in code[start:]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            elements, pending = elements + 1, False
            continue
        pending = pending or not ch.isspace()
    return elements + pending


def _java_list_checks(code: str) -> int:
    """Assertions a guarded `List<Boolean> x = Arrays.asList(...)` adds beyond its one `throw`."""
    extra = 0
    for match in _JAVA_CHECK_LIST.finditer(code):
        if re.search(rf"\b{match.group(1)}\s*\.\s*contains\s*\(\s*false\s*\)", code):
            extra += _list_elements(code, match.end()) - 1
    return extra


class Java(Language):
    name = "java"
    tool = "javac"
    test_functions = re.compile(r"\bpublic\s+static\s+void\s+main\s*\(|@Test\b")
    assertions = re.compile(
        r"\bthrow\s+new\s+AssertionError\b|\bassert(?:[A-Z]\w*)?\s*\(|\bassert\s+(?![\s(])"
    )

    def job(self, program: str, tests: str, helpers: str = "", split: bool = False) -> CommandJob:
        return CommandJob(
            [
                "sh",
                "-c",
                f"javac -J-Xmx256m Main.java EditforgeRun.java {NO_TOKEN} "
                "&& rm -f *.java && java -Xmx256m -XX:+UseSerialGC EditforgeRun",
            ],
            {"Main.java": program + "\n" + tests + "\n", "EditforgeRun.java": JAVA_RUNNER},
            memory_mb=8192,
        )

    def test_counts(self, tests: str) -> tuple[int, int]:
        functions, assertions = super().test_counts(tests)
        return functions, assertions + _java_list_checks(strip_c_comments(tests))

    def coverage_unavailable(self) -> str | None:
        if not all(Path(p).is_file() for p in JACOCO):
            return "JaCoCo is not installed (apt-get install libjacoco-java)"
        return None

    def coverage_of(self, problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
        """JaCoCo's agent from Debian's `libjacoco-java`, read back by `CoverageDump.java`."""
        job = self.job(problem.program(problem.after), problem.tests)
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
        return shifted(problem, executable, covered, 0)


LANGUAGE = Java()
