"""C++ (g++): the tests' `main` ends with the run token, the program's macros undefined before the
tests; density and gcov coverage."""

from __future__ import annotations

import re
from dataclasses import replace

from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.languages.base import NO_TOKEN, CommandJob, Language, before_last_brace, runner_source
from eval.languages.lines import LineCoverage, shifted

# Before the tests: what a program may have defined to change them, the token's function, and the
# tests' assertion failures sent to a function of ours (glibc's `assert` calls `__assert_fail`,
# which a program could define anew). Both functions are declared only: their definitions are a
# file of their own (editforge_token.cpp), which the program cannot redefine (a second definition
# does not link) and whose headers cannot change how the tests' calls resolve (a header here would
# let `strlen("")` pick the C library's over the program's).
CPP_BEFORE_TESTS = runner_source("before_tests.hpp")
CPP_TOKEN = "    editforge_token();\n"
CPP_TOKEN_SOURCE = runner_source("editforge_token.cpp")
# bigcode-evaluation-harness gives HumanEvalFix C++ 60 s (humanevalpack.py LANGUAGE_TO_TIMEOUT).
CPP_TIMEOUT_S = 60.0

# A comment or a string literal (skipped when looking for directives), and a #define (`%:` is the
# digraph of `#`; lines joined by a backslash and comments are removed first, as the preprocessor does).
_CPP_SKIP = re.compile(
    r'R"([^(\s]*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S
)
_CPP_DEFINE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)
GCOV_LINE = re.compile(r"^\s*([^:]+):\s*(\d+):")


# What g++ reads as a line end (a lone carriage return too), as blank inside a directive (form feed,
# vertical tab), and as a line splice (a backslash, blanks, then a line end).
_CPP_LINE_ENDS = re.compile(r"\r\n?")
_CPP_SPLICE = re.compile(r"\\[ \t\f\v]*\n")


def cpp_defined_macros(program: str) -> set[str]:
    """The macros ``program`` defines itself: undefined before the tests, so that a program cannot
    change what the tests' code means (`#define bool AlwaysTrue` would make glibc's
    `static_cast<bool>(expr)` true). The text is read as g++ reads it: its line ends, splices and
    blanks first, then comments and literals."""
    text = _CPP_SPLICE.sub("", _CPP_LINE_ENDS.sub("\n", program)).replace("\f", " ").replace("\v", " ")
    text = _CPP_SKIP.sub(lambda m: " " if m.group().startswith("/") else '""', text)
    return set(_CPP_DEFINE.findall(text))


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


class Cpp(Language):
    name = "cpp"
    tool = "g++"
    test_functions = re.compile(r"\bint\s+main\s*\(|\bTEST(?:_F|_P)?\s*\(")
    assertions = re.compile(r"(?<![\w.])(?:static_assert|assert|ASSERT_\w+|EXPECT_\w+)\s*\(")

    def job(self, program: str, tests: str, helpers: str = "", split: bool = False) -> CommandJob:
        undefined = "".join(f"#undef {name}\n" for name in sorted(cpp_defined_macros(program)))
        source = program + "\n" + undefined + CPP_BEFORE_TESTS + before_last_brace(tests, CPP_TOKEN) + "\n"
        build = f"g++ -std=c++17 -O1 -o main main.cpp editforge_token.cpp -lcrypto {NO_TOKEN}"
        return CommandJob(
            ["sh", "-c", f"{build} && rm -f *.cpp && ./main"],
            {"main.cpp": source, "editforge_token.cpp": CPP_TOKEN_SOURCE},
            timeout_s=CPP_TIMEOUT_S,
        )

    def coverage_unavailable(self) -> str | None:
        return None

    def coverage_of(self, problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
        """gcov: compiled with `--coverage`, run, `main.cpp.gcov` read back (a line with a count is
        executable; `#####` means never run)."""
        job = self.job(problem.program(problem.after), problem.tests)
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
        return shifted(problem, *parse_gcov(result.stdout), 0)


LANGUAGE = Cpp()
