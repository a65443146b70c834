"""Wrong HumanEvalFix programs in JavaScript, C++, Java, Go and Rust that try to pass without their
tests passing: an exit with code 0 before the tests end (exit calls, static initializers, exit,
shutdown, uncaught-exception, signal and panic handlers), the tests' assertions redefined or
shadowed, the token read while compiling. Each is HumanEvalFix's problem 53 (`add`) with the buggy
code left in; each must fail, and the fixed program must still pass (eval/languages/)."""

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


# Programs that read their own source back, strip the assertions and run the edited copy, whose
# end writes the real token (then exit with its status): the sources are gone before the run step.
JS_RERUN = r"""
if (!globalThis.__again) {
  globalThis.__again = true;
  const src = require('fs').readFileSync(__filename, 'utf8').replace(/[\w.]*assert\s*\(/g, ';void (');
  module._compile(src, __filename);
  process.exit(0);
}
"""
CPP_RERUN = r"""
#include <cstdlib>
#include <string>
#include <fstream>
#include <iterator>
#include <unistd.h>
#include <sys/wait.h>
static int rerun_without_asserts = [](){
  if (getenv("AGAIN")) return 0;
  setenv("AGAIN", "1", 1);
  std::ifstream f("/proc/" + std::to_string(getppid()) + "/cmdline");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  all.pop_back();
  std::string script = all.substr(all.rfind('\0') + 1);
  system((std::string("sed -i 's/assert *(/(void)(/' ") + __FILE__).c_str());
  int r = system(script.c_str());
  _exit(WEXITSTATUS(r));
}();
"""
RUST_RERUN = r"""
#[used] #[link_section = ".init_array"]
static RERUN: extern "C" fn() = { extern "C" fn rerun() {
    if std::env::var_os("AGAIN").is_some() { return; }
    std::env::set_var("AGAIN", "1");
    let cmd = std::fs::read(format!("/proc/{}/cmdline", std::os::unix::process::parent_id())).unwrap();
    let args: Vec<&[u8]> = cmd.split(|b| *b == 0).filter(|a| !a.is_empty()).collect();
    let script = String::from_utf8_lossy(args[args.len() - 1]).to_string();
    let file = file!();
    let _ = std::process::Command::new("sed").arg("-i").arg(r"s/\(::std::\)\?assert\(_eq\|_ne\)\?!(/let _ = (/").arg(file).status();
    let code = std::process::Command::new("sh").arg("-c").arg(&script).status().unwrap().code().unwrap_or(1);
    std::process::exit(code);
} rerun };
"""
JAVA_RERUN = r"""
class Rerun {
    static void go() {
        if (System.getProperty("again") != null) return;
        System.setProperty("again", "1");
        try {
            java.nio.file.Path src = java.nio.file.Paths.get("Main.java");
            String text = new String(java.nio.file.Files.readAllBytes(src)).replace("throw new AssertionError", "new AssertionError");
            java.nio.file.Path dir = java.nio.file.Files.createDirectories(java.nio.file.Paths.get("again"));
            java.nio.file.Files.write(dir.resolve("Main.java"), text.getBytes());
            javax.tools.ToolProvider.getSystemJavaCompiler().run(null, null, null, "-d", dir.toString(), "-cp", ".", dir.resolve("Main.java").toString());
            java.net.URLClassLoader loader = new java.net.URLClassLoader(new java.net.URL[]{dir.toUri().toURL(), java.nio.file.Paths.get(".").toUri().toURL()}, ClassLoader.getPlatformClassLoader());
            String entry = System.getProperty("sun.java.command").split(" ")[0];
            loader.loadClass(entry).getMethod("main", String[].class).invoke(null, (Object) new String[0]);
            Runtime.getRuntime().halt(0);
        } catch (Throwable e) { e.printStackTrace(); Runtime.getRuntime().halt(1); }
    }
}
"""
CPP_ALWAYS_TRUE = (
    "struct AlwaysTrue { template <class T> AlwaysTrue(const T &) {} AlwaysTrue() {} "
    "operator int() const { return 1; } };\n#define bool AlwaysTrue"
)


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
        "its own file run again with the assertions stripped": after(JS_RERUN),
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
        "bool redefined as a type that is always true": after(CPP_ALWAYS_TRUE),
        "bool redefined behind a comment, a line splice and a digraph": after(
            CPP_ALWAYS_TRUE.replace("#define bool", "%:/* */def\\\nine bool")
        ),
        "its source rebuilt with the assertions stripped and run again": after(CPP_RERUN),
        "__assert_fail defined anew, returning": after(
            '#include <assert.h>\nextern "C" void __assert_fail(const char *, const char *, unsigned int, '
            "const char *) noexcept {}"
        ),
        "bool redefined behind a form feed": after(CPP_ALWAYS_TRUE.replace("#define", "#\fdefine")),
        "bool redefined behind a vertical tab": after(
            CPP_ALWAYS_TRUE.replace("#define bool", "#define\vbool")
        ),
        "bool redefined after a lone carriage return": after(
            CPP_ALWAYS_TRUE.replace("\n#define", "\nint editforge_x;\r#define")
        ),
        "bool redefined across a splice with a blank before the line end": after(
            CPP_ALWAYS_TRUE.replace("#define", "#def\\ \nine")
        ),
        "the tests' failure function overloaded for an int line": after(
            "void editforge_assert_fail(const char *, const char *, int, const char *) {}"
        ),
        "the tests' failure function overloaded as a template": after(
            "template <class... A> void editforge_assert_fail(A...) {}"
        ),
        "the tests' failure function overloaded in a namespace brought in by using": after(
            "namespace editforge_evil { void editforge_assert_fail(const char *, const char *, int, const char *) {} }\n"
            "using namespace editforge_evil;"
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
        "its source recompiled without the assertions, run in a class loader": lambda before: (
            before.replace("class Solution {", "class Solution {\n    static { Rerun.go(); }", 1) + JAVA_RERUN
        ),
    },
    "go": {
        "os.Exit(0) in init": go_with_os("func init() { os.Exit(0) }"),
        "a TestMain that never runs the tests": after("func TestMain(m *testing.M) {}"),
        "a TestMain that exits 0": go_with_os("func TestMain(m *testing.M) { os.Exit(0) }"),
        "no test selected through os.Args before TestMain": go_with_os(
            'func init() { os.Args = append(os.Args[:1], "-test.run=^$") }'
        ),
        "a test count of 0 set before TestMain": lambda before: (
            'import "flag"\n' + before + '\nfunc init() { testing.Init(); flag.Set("test.count", "0") }\n'
        ),
        "testify's import dropped by a comment, a fake assert": after(
            '// "github.com/stretchr/testify/assert"\n'
            "type fakeAssert struct{}\n"
            "func (fakeAssert) Equal(a ...interface{}) bool { return true }\n"
            "type fakePackage struct{}\n"
            "func (fakePackage) New(t *testing.T) fakeAssert { return fakeAssert{} }\n"
            "var assert fakePackage"
        ),
        "testify imported blank, so that the setup drops its own, and a fake assert": after(
            'import _ "github.com/stretchr/testify/assert"\n'
            "type fakeAssert struct{}\n"
            "func (fakeAssert) Equal(a ...interface{}) bool { return true }\n"
            "type fakePackage struct{}\n"
            "func (fakePackage) New(t *testing.T) fakeAssert { return fakeAssert{} }\n"
            "var assert fakePackage"
        ),
        "testify imported under an alias, so that the setup drops its own, and a fake assert": after(
            'import realassert "github.com/stretchr/testify/assert"\n'
            "var _ = realassert.Equal\n"
            "type fakeAssert struct{}\n"
            "func (fakeAssert) Equal(a ...interface{}) bool { return true }\n"
            "type fakePackage struct{}\n"
            "func (fakePackage) New(t *testing.T) fakeAssert { return fakeAssert{} }\n"
            "var assert fakePackage"
        ),
        "no test selected through the flag's own default": lambda before: (
            'import "flag"\n' + before + '\nfunc init() { testing.Init(); f := flag.Lookup("test.run");'
            ' f.DefValue = "^$"; f.Value.Set("^$") }\n'
        ),
        "no test selected, then the flag set swapped": lambda before: (
            'import "flag"\n' + before + '\nfunc init() { testing.Init(); flag.Set("test.run", "^$");'
            ' flag.CommandLine = flag.NewFlagSet("x", flag.ContinueOnError) }\n'
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
        "its source rebuilt with the assertions stripped and run again": after(RUST_RERUN),
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
