"""How a benchmark program and its tests run, per language.

Python runs in the sandbox's interpreter harness (a pass is its sentinel). The other
HumanEvalPack languages are compiled or interpreted by their toolchains as plain commands
in the same sandbox, one command per program: compile, then run the tests. Go and Rust use what
`eval.toolchains` prepares once (Go's compiled testify, Rust's compiled crates), which the
sandbox must be shown (`eval.toolchains.sandbox_paths`).

A pass is exit code 0 **and the run token** (`Sandbox.run_command(run_token=True)`): code of ours
that runs only once the last test has passed copies the token from descriptor 3 to descriptor 4
(JavaScript: after the tests; C++: at the end of the tests' `main`, through a function compiled
apart; Java: a `main` of its own that calls the tests'; Go: a `TestMain` in a file of its own,
after `m.Run()` returned 0 with the test flags at their defaults; Rust: at the end of the test
function). The compile steps run without those descriptors, and the sources are gone before the
run step. So a program that exits with code 0 before its tests end (an exit call, an exit or
shutdown hook, an uncaught-exception, signal or panic handler that exits, a static initializer)
fails, and so does one that reruns an edited copy of its own source. The tests' assertions are
also kept out of the program's reach where a language lets a program redefine them (JavaScript:
a module constant; C++: every macro the program defines is undefined before the tests, and a
failed assertion calls a function of ours; Rust: `::std`'s macros by path; Go: testify's import
kept unless the program declares it). A program written against this protocol can still read the
token itself: these programs share their process with their tests (docs/sandbox.md).

That code of ours is in `eval/runners/` as source files (each checked by its language's own
compiler in `tests/eval/test_runner_sources.py`): whole files for the run steps, and the fragments
put before or after the program's and the tests' text.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import ConfigError
from eval.toolchains import go, rust

RUNNERS = Path(__file__).with_name("runners")  # the code of ours each language's run adds, as source files


def _runner(name: str) -> str:
    return (RUNNERS / name).read_text()


# HumanEvalPack's JavaScript tests use console.assert, which only prints on failure; and one
# solution (JavaScript/162) requires the npm package js-md5, served here by node's own crypto.
# The tests call `__editforge_assert` instead: a constant of the module scope, which a program can
# neither assign nor redeclare (a SyntaxError), unlike the console object and its methods.
JS_PRELUDE = _runner("prelude.js")
JS_RUNNER = _runner("editforge_run.js")  # reads and deletes main.js, then compiles it
JS_TOKEN = _runner("token_epilogue.js")  # after the tests: the run token from descriptor 3 to 4
# JavaScript split runs (docs/sandbox.md): the tests in a node process of their own that runs no line
# of the program (split_trusted.js), the program in another (split_candidate.js), plain data between
# them (split_channel.js, which both sides start with). The trusted side's code and the tests reach it
# on its stdin, never on a disk the program sees.
JS_CHANNEL = _runner("split_channel.js")
JS_TRUSTED = _runner("split_trusted.js")
JS_CANDIDATE = _runner("split_candidate.js")
JS_TRUSTED_ARGV = [
    "node",
    "-e",
    "const fs = require('fs'); const payload = JSON.parse(fs.readFileSync(0, 'utf8'));"
    " new Function('payload', 'require', payload.runner)(payload, require);",
]
# Before the tests: what a program may have defined to change them, the token's function, and the
# tests' assertion failures sent to a function of ours (glibc's `assert` calls `__assert_fail`,
# which a program could define anew). Both functions are declared only: their definitions are a
# file of their own (editforge_token.cpp), which the program cannot redefine (a second definition
# does not link) and whose headers cannot change how the tests' calls resolve (a header here would
# let `strlen("")` pick the C library's over the program's).
CPP_BEFORE_TESTS = _runner("before_tests.hpp")
CPP_TOKEN = "    editforge_token();\n"
CPP_TOKEN_SOURCE = _runner("editforge_token.cpp")
JAVA_RUNNER = _runner("EditforgeRun.java")
GO_RUNNER = _runner("editforge_main_test.go")
RUST_TOKEN = _runner("token.rs")  # the end of the test function's body
RUST_ASSERTS = re.compile(r"(?<![\w:])((?:debug_)?assert(?:_eq|_ne)?|panic|unreachable)!")
NO_TOKEN = "3<&- 4>&-"  # a compile step never sees the token's descriptors


# bigcode-evaluation-harness gives HumanEvalFix C++ 60 s (humanevalpack.py LANGUAGE_TO_TIMEOUT).
CPP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CommandJob:
    argv: list[str]
    files: dict[str, str]
    memory_mb: int | None = None  # a JVM reserves far more address space than it uses
    timeout_s: float | None = None  # replaces sandbox.timeout_s for this job (compile + run)
    run_token: bool = True  # the tests write the run token back once they all passed
    trusted_argv: list[str] | None = None  # a split run: the tests' own command (Sandbox.run_split_command)
    trusted_input: str = ""  # its stdin


def command_job(
    language: str, program: str, tests: str, helpers: str = "", split: bool = False
) -> CommandJob:
    """The command line and files that run ``program`` with ``tests`` (the token epilogue included;
    it does nothing where descriptors 3 and 4 are not open). ``split``: JavaScript's tests in a
    process of their own (``helpers``: benchmark text they call, bound on their side)."""
    if language == "js" and split:
        payload = json.dumps({"runner": JS_CHANNEL + JS_TRUSTED, "tests": tests, "helpers": helpers})
        files = {"main.js": program, "editforge_candidate.js": JS_CHANNEL + JS_CANDIDATE}
        argv = ["node", "editforge_candidate.js"]
        return CommandJob(argv, files, run_token=False, trusted_argv=JS_TRUSTED_ARGV, trusted_input=payload)
    if language == "js":
        source = program + "\n" + tests.replace("console.assert(", "__editforge_assert(") + JS_TOKEN
        return CommandJob(
            ["node", "editforge_run.js"], {"main.js": JS_PRELUDE + source, "editforge_run.js": JS_RUNNER}
        )
    if language == "cpp":
        undefined = "".join(f"#undef {name}\n" for name in sorted(cpp_defined_macros(program)))
        source = program + "\n" + undefined + CPP_BEFORE_TESTS + _before_last_brace(tests, CPP_TOKEN) + "\n"
        build = f"g++ -std=c++17 -O1 -o main main.cpp editforge_token.cpp -lcrypto {NO_TOKEN}"
        return CommandJob(
            ["sh", "-c", f"{build} && rm -f *.cpp && ./main"],
            {"main.cpp": source, "editforge_token.cpp": CPP_TOKEN_SOURCE},
            timeout_s=CPP_TIMEOUT_S,
        )
    if language == "java":
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
    if language == "go":  # bigcode's file name: `go test` only compiles the tests of *_test.go files
        compile_ = go.toolchain().script("test -c -o main.test main_test.go editforge_main_test.go")
        return CommandJob(
            ["sh", "-c", f"{compile_} {NO_TOKEN} && rm -f *.go && ./main.test"],
            {"main_test.go": program + "\n" + tests + "\n", "editforge_main_test.go": GO_RUNNER},
        )
    if language == "rust":
        tests = _before_last_brace(RUST_ASSERTS.sub(r"::std::\1!", tests), RUST_TOKEN, skip=1)
        return CommandJob(
            [
                "sh",
                "-c",
                f"{rust.toolchain().compile('main.rs', 'main')} {NO_TOKEN} && rm -f main.rs && ./main",
            ],
            {"main.rs": program + "\n" + tests + "\n"},
        )
    raise ValueError(f"language {language!r} is not supported (python, js, cpp, java, go, rust)")


# A comment or a string literal (skipped when looking for directives), and a #define (`%:` is the
# digraph of `#`; lines joined by a backslash and comments are removed first, as the preprocessor does).
_CPP_SKIP = re.compile(
    r'R"([^(\s]*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S
)
_CPP_DEFINE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)


def cpp_defined_macros(program: str) -> set[str]:
    """The macros ``program`` defines itself: undefined before the tests, so that a program cannot
    change what the tests' code means (`#define bool AlwaysTrue` would make glibc's
    `static_cast<bool>(expr)` true)."""
    text = program.replace("\\\n", "")
    text = _CPP_SKIP.sub(lambda m: " " if m.group().startswith("/") else '""', text)
    return set(_CPP_DEFINE.findall(text))


def _before_last_brace(tests: str, code: str, skip: int = 0) -> str:
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


TOOLS = {"js": "node", "cpp": "g++", "java": "javac"}


def unavailable(language: str) -> str | None:
    """Why ``language``'s programs cannot run on this machine, or None when they can."""
    if language == "go":
        return go.problem()
    if language == "rust":
        return rust.problem()
    tool = TOOLS.get(language)
    return f"no {tool} on PATH" if tool is not None and shutil.which(tool) is None else None


def available_languages() -> list[str]:
    return [lang for lang in ("python", *TOOLS, "go", "rust") if unavailable(lang) is None]


def check_languages(languages: Sequence[str], key: str = "benchmark") -> None:
    """Every language needs its toolchain on this machine."""
    unsupported = sorted(set(languages) - set(available_languages()))
    if unsupported:
        reasons = "; ".join(f"{lang}: {unavailable(lang) or 'not supported'}" for lang in unsupported)
        raise ConfigError(
            f"{key}.languages {unsupported} cannot run here ({reasons}); "
            f"use {key}.languages=[{','.join(available_languages())}]"
        )
