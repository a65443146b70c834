"""Wrong HumanEvalFix programs in JavaScript, C++, Java, Go and Rust that try to pass without their
tests passing: an exit with code 0 before the tests end (exit calls, static initializers, exit,
shutdown, uncaught-exception, signal and panic handlers), the tests' assertions redefined or
shadowed, the token read while compiling. Each is HumanEvalFix's problem 53 (`add`) with the buggy
code left in; each must fail, and the fixed program must still pass (eval/languages.py)."""

from __future__ import annotations

import pytest

from core.benchmarks import load_benchmark
from core.sandbox import SandboxLimits, make_sandbox
from eval.execute import program_verdicts
from eval.languages import unavailable
from eval.toolchains import sandbox_paths

pytestmark = pytest.mark.slow
PROBLEM = {"js": "JavaScript/53", "cpp": "CPP/53", "java": "Java/53", "go": "Go/53", "rust": "Rust/53"}


def after(extra: str):
    return lambda before: before + "\n" + extra + "\n"


def in_class(extra: str):
    return lambda before: before.replace("class Solution {", "class Solution {\n    " + extra, 1)


def go_with_os(extra: str):
    return lambda before: 'import "os"\n' + before + "\n" + extra + "\n"


ATTACKS = {
    "js": {
        "process.exit(0) after the definitions": after("process.exit(0);"),
        "an uncaught-exception handler that exits 0": after(
            "process.on('uncaughtException', () => process.exit(0));"
        ),
        "an exit hook that sets the code to 0": after("process.on('exit', () => { process.exitCode = 0; });"),
        "console.assert replaced": after("console.assert = () => {};"),
        "console.assert redefined by a getter": after(
            "Object.defineProperty(console, 'assert', {get() { return () => {}; }});"
        ),
        "the tests' assertion rebound": after("__editforge_assert = () => {};"),
        "the tests' assertion redeclared": after("function __editforge_assert() {}"),
    },
    "cpp": {
        "exit(0) in a static initializer": after("static int editforge_attack = (exit(0), 0);"),
        "a SIGABRT handler that exits 0": after(
            "#include <signal.h>\n#include <unistd.h>\n"
            "static void on_abort(int) { _exit(0); }\n"
            "static int editforge_attack = (signal(SIGABRT, on_abort), 0);"
        ),
        "a main of its own, the tests' renamed away": after(
            "int main() { return 0; }\n#define main not_main"
        ),
        "__assert_fail redefined as a macro": after(
            "#include <assert.h>\nvoid swallow(...) {}\n#define __assert_fail(...) swallow(__VA_ARGS__)"
        ),
        "__assert_fail defined anew, returning": after(
            '#include <assert.h>\nextern "C" void __assert_fail(const char *, const char *, unsigned int, '
            "const char *) noexcept {}"
        ),
    },
    "java": {
        "System.exit(0) in a static block": in_class("static { System.exit(0); }"),
        "a shutdown hook that halts with 0": in_class(
            "static { Runtime.getRuntime().addShutdownHook(new Thread(() -> Runtime.getRuntime().halt(0))); }"
        ),
        "an uncaught-exception handler that exits 0": in_class(
            "static { Thread.setDefaultUncaughtExceptionHandler((t, e) -> System.exit(0)); }"
        ),
    },
    "go": {
        "os.Exit(0) in init": go_with_os("func init() { os.Exit(0) }"),
        "a TestMain that never runs the tests": after("func TestMain(m *testing.M) {}"),
        "a TestMain that exits 0": go_with_os("func TestMain(m *testing.M) { os.Exit(0) }"),
        "testify's import dropped by a comment, a fake assert": after(
            '// "github.com/stretchr/testify/assert"\n'
            "type fakeAssert struct{}\n"
            "func (fakeAssert) Equal(a ...interface{}) bool { return true }\n"
            "type fakePackage struct{}\n"
            "func (fakePackage) New(t *testing.T) fakeAssert { return fakeAssert{} }\n"
            "var assert fakePackage"
        ),
    },
    "rust": {
        "the assertion macros shadowed": after(
            "macro_rules! assert { ($($t:tt)*) => {} }\n"
            "macro_rules! assert_eq { ($($t:tt)*) => {} }\n"
            "macro_rules! assert_ne { ($($t:tt)*) => {} }"
        ),
        "exit(0) from .init_array": after(
            '#[used] #[link_section = ".init_array"]\n'
            'static INIT: extern "C" fn() = { extern "C" fn exit0() { std::process::exit(0) } exit0 };'
        ),
        "a panic hook that exits 0, installed from .init_array": after(
            '#[used] #[link_section = ".init_array"]\n'
            'static INIT: extern "C" fn() = { extern "C" fn hook() {\n'
            "    std::panic::set_hook(Box::new(|_| std::process::exit(0)));\n"
            "} hook };"
        ),
        "the token read while compiling, written back at start-up": after(
            'static TOKEN: &[u8] = include_bytes!("/dev/fd/3");\n'
            '#[used] #[link_section = ".init_array"]\n'
            'static INIT: extern "C" fn() = { extern "C" fn forge() {\n'
            '    let _ = std::fs::write("/dev/fd/4", TOKEN);\n'
            "    std::process::exit(0)\n"
            "} forge };"
        ),
    },
}


@pytest.fixture(scope="module")
def sandbox():
    with make_sandbox(read_only=sandbox_paths()) as box:
        yield box


def _verdicts(sandbox, language: str, programs: list[str]) -> list[dict]:
    problem = {p.id: p for p in load_benchmark("humanevalfix", None, languages=[language]).problems}[
        PROBLEM[language]
    ]
    jobs = [(problem, problem.program(code(problem) if callable(code) else code)) for code in programs]
    return program_verdicts(jobs, sandbox, SandboxLimits(timeout_s=30), 200_000)


@pytest.mark.parametrize("language", list(ATTACKS))
def test_a_wrong_program_cannot_pass_without_its_tests(sandbox, language):
    why = unavailable(language)
    if why is not None:
        pytest.skip(f"{language} cannot run here: {why}")
    names = list(ATTACKS[language])
    programs = [lambda p: p.after, lambda p: p.before] + [
        (lambda attack: lambda p: attack(p.before))(ATTACKS[language][name]) for name in names
    ]
    fixed, buggy, *attacked = _verdicts(sandbox, language, programs)
    assert fixed["status"] == "passed", fixed
    assert buggy["status"] == "failed", buggy
    passed = {name: v for name, v in zip(names, attacked, strict=True) if v["passed"]}
    assert not passed, passed
