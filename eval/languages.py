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
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import ConfigError
from eval.toolchains import go, rust

# HumanEvalPack's JavaScript tests use console.assert, which only prints on failure; and one
# solution (JavaScript/162) requires the npm package js-md5, served here by node's own crypto.
# The tests call `__editforge_assert` instead: a constant of the module scope, which a program can
# neither assign nor redeclare (a SyntaxError), unlike the console object and its methods.
JS_PRELUDE = (
    "const __editforge_assert = (ok, ...msg) => { if (!ok) { throw new Error('Assertion failed ' + msg.join(' ')); } };\n"
    "console.assert = __editforge_assert;\n"
    "{ const M = require('module'); const load = M._load;\n"
    "  M._load = function (name, ...rest) {\n"
    "    if (name === 'js-md5') { return (s) => require('crypto').createHash('md5').update(s).digest('hex'); }\n"
    "    return load.call(this, name, ...rest); }; }\n"
)
# The JavaScript run step: main.js is read and deleted before it is compiled, so the program cannot
# read its tests back from the file and run an edited copy whose end writes the token.
JS_RUNNER = """const fs = require('fs');
const path = require('path');
const Module = require('module');
const file = path.resolve('main.js');
const source = fs.readFileSync(file, 'utf8');
fs.unlinkSync(file);
fs.unlinkSync(__filename);
const main = new Module(file, null);
main.filename = file;
main.paths = Module._nodeModulePaths(path.dirname(file));
process.mainModule = main;
main._compile(source, file);
"""
JS_TOKEN = "\n;{ try { const fs = require('fs'); fs.writeSync(4, fs.readFileSync(3)); } catch (e) {} }\n"
# Before the tests: what a program may have defined to change them, the token's function, and the
# tests' assertion failures sent to a function of ours (glibc's `assert` calls `__assert_fail`,
# which a program could define anew). Both functions are declared only: their definitions are a
# file of their own, which the program cannot redefine (a second definition does not link) and
# whose headers cannot change how the tests' calls resolve (a header here would let `strlen("")`
# pick the C library's over the program's).
CPP_BEFORE_TESTS = (
    "#undef main\n#undef __assert_fail\n#undef editforge_token\n#undef editforge_assert_fail\n"
    "void editforge_token();\n"
    'extern "C" void editforge_assert_fail(const char *, const char *, unsigned int, const char *) noexcept\n'
    "    __attribute__((__noreturn__));\n"
    "#define __assert_fail editforge_assert_fail\n"
)
CPP_TOKEN = "    editforge_token();\n"
CPP_TOKEN_SOURCE = """#include <unistd.h>

#include <cstdio>

void editforge_token() {
    char token[64];
    ssize_t n = read(3, token, sizeof token);
    if (n > 0 && write(4, token, (size_t)n) != n) {
        _exit(1);
    }
}

extern "C" [[noreturn]] void editforge_assert_fail(const char *expression, const char *file, unsigned int line,
                                                  const char *function) noexcept {
    std::fprintf(stderr, "%s:%u: %s: Assertion `%s' failed.\\n", file, line, function, expression);
    std::fflush(stderr);
    _exit(134);
    __builtin_trap();  // only if a program's own _exit returned
}
"""
JAVA_RUNNER = (
    "public class EditforgeRun {\n"
    "    public static void main(String[] args) throws Throwable {\n"
    "        Main.main(args);\n"
    '        try (java.io.FileInputStream key = new java.io.FileInputStream("/dev/fd/3");\n'
    '             java.io.FileOutputStream report = new java.io.FileOutputStream("/dev/fd/4")) {\n'
    "            byte[] token = new byte[64];\n"
    "            int n = key.read(token);\n"
    "            if (n > 0) {\n"
    "                report.write(token, 0, n);\n"
    "            }\n"
    "        } catch (java.io.IOException e) {\n"
    "        }\n"
    "    }\n"
    "}\n"
)
# Go's TestMain, in a file of its own: the test flags back at their defaults first (a program's
# init could have pushed `-test.run=^$` into os.Args, or set a count of 0, so that no test runs
# and m.Run returns 0), then the token once m.Run returned 0.
GO_RUNNER = """package main

import (
\teditforge_flag "flag"
\teditforge_os "os"
\teditforge_strings "strings"
\teditforge_testing "testing"
)

func TestMain(m *editforge_testing.M) {
\teditforge_os.Args = editforge_os.Args[:1]
\teditforge_flag.VisitAll(func(f *editforge_flag.Flag) {
\t\tif editforge_strings.HasPrefix(f.Name, "test.") {
\t\t\t_ = f.Value.Set(f.DefValue)
\t\t}
\t})
\tif m.Run() != 0 {
\t\teditforge_os.Exit(1)
\t}
\tif token, err := editforge_os.ReadFile("/dev/fd/3"); err == nil {
\t\t_ = editforge_os.WriteFile("/dev/fd/4", token, 0)
\t}
\teditforge_os.Exit(0)
}
"""
RUST_TOKEN = (
    '        if let Ok(editforge_token) = ::std::fs::read("/dev/fd/3") {\n'
    '            let _ = ::std::fs::write("/dev/fd/4", editforge_token);\n'
    "        }\n"
)
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


def command_job(language: str, program: str, tests: str) -> CommandJob:
    """The command line and files that run ``program`` with ``tests`` (the token epilogue included;
    it does nothing where descriptors 3 and 4 are not open)."""
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
