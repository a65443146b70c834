"""JavaScript split runs: HumanEvalFix JS tests in a node process of their own, the program in another.

Each attack is a whole program for a real HumanEvalFix problem, written to pass without being
right by one of three routes: reading the tests back from the engine they share with it, copying
or forging the run token (or the verdict), and rebinding what the tests call. Each must be a
non-pass split; beside it, the verdict the same program gets when its tests share its process (the
run token's mode, `split=False`), which says which routes the split closes (docs/sandbox.md).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.benchmarks import load_benchmark
from core.sandbox import SandboxLimits, make_sandbox
from eval.languages import command_job, unavailable

pytestmark = pytest.mark.slow

# hasCloseElements' expected values, read from the source of whatever holds the tests
ANSWERS_FROM = r"""
const answersIn = (text) => [...String(text).matchAll(
  /hasCloseElements\(\s*\[[^\]]*\],\s*[\d.]+\s*\)\s*===\s*(true|false)/g)].map((m) => m[1] === 'true');
let calls = 0;
"""
# Tests read back from the engine (or from the process that runs them)
READ_BACK = {
    "the module's own function source, tests included": ANSWERS_FROM
    + "const answers = answersIn(arguments.callee.toString());\n"
    "const hasCloseElements = (numbers, threshold) => answers[calls++];\n",
    "the calling test function's source (Function.caller)": ANSWERS_FROM
    + "function hasCloseElements(numbers, threshold) {\n"
    "  return answersIn(hasCloseElements.caller ? hasCloseElements.caller.toString() : '')[calls++];\n"
    "}\n",
    "every process's descriptors, command line and memory under /proc": ANSWERS_FROM
    + r"""
const fs = require('fs');
let found = [];
for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
  for (const name of ['cmdline', 'environ', 'mem', ...[0, 1, 2, 3, 4, 5, 6].map((n) => `fd/${n}`)]) {
    try { const got = answersIn(fs.readFileSync(`/proc/${pid}/${name}`, 'latin1')); if (got.length) { found = got; } } catch (e) {}
  }
}
const hasCloseElements = (numbers, threshold) => found[calls++];
""",
}
BUGGY_ADD = "const add = (x, y) => {\n  return x + y + y + x;\n}\n"
# The run token copied from descriptor 3 to 4 (or a verdict forged) before the tests end
TOKEN = {
    "descriptor 3 copied to 4, then exit 0": BUGGY_ADD
    + "const fs = require('fs');\ntry { fs.writeSync(4, fs.readFileSync(3)); } catch (e) {}\nprocess.exit(0);\n",
    "copied by a child process that inherits 3 and 4": BUGGY_ADD
    + "require('child_process').spawnSync('sh', ['-c', 'cat <&3 >&4'], {stdio: ['ignore', 'inherit', 'inherit', 3, 4]});\n"
    "process.exit(0);\n",
    "a passing outcome written to descriptor 5 and every process's fd 5": BUGGY_ADD
    + r"""
const fs = require('fs');
const forged = JSON.stringify({passed: true, tests_passed: 1, tests_total: 1, delegated: 0});
try { fs.writeSync(5, forged); } catch (e) {}
for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
  try { fs.writeFileSync(`/proc/${pid}/fd/5`, forged); } catch (e) {}
}
try { fs.writeSync(4, forged); } catch (e) {}
process.exit(0);
""",
}
# Rebinding what the tests call: their helpers, and the builtins they compare with
REBIND = {
    "the helper the tests encode with (encodeCyclic) made the identity": (
        "JavaScript/38",
        "const encodeCyclic = (s) => s;\nconst decodeCyclic = (s) => s;\n",
    ),
    "JSON.stringify replaced, so every comparison of two strings holds": (
        "JavaScript/29",
        "const filterByPrefix = (strings, prefix) => strings;\nJSON.stringify = () => '';\n",
    ),
    "Math.abs replaced, so |poly(x)| < 1e-4 always holds": (
        "JavaScript/32",
        "const poly = (xs, x) => 0;\nconst findZero = (xs) => 0;\nMath.abs = () => 0;\n",
    ),
}


@pytest.fixture(scope="module")
def sandbox():
    if unavailable("js"):
        pytest.skip(f"js cannot run here: {unavailable('js')}")
    with make_sandbox() as box:
        if not box.split_commands():
            pytest.skip("no Landlock: commands cannot run split here")
        yield box


@pytest.fixture(scope="module")
def problems():
    return {p.id: p for p in load_benchmark("humanevalfix", None, languages=["js"]).problems}


def _run(sandbox, problem, program: str, split: bool):
    job = command_job("js", program, problem.tests, problem.helpers, split=split)
    limits = SandboxLimits(timeout_s=10)
    if split:
        return sandbox.run_split_command(
            job.argv, job.files, job.trusted_argv, job.trusted_input, limits=limits
        )
    return sandbox.run_command(job.argv, job.files, limits=limits, run_token=True)


def _both(sandbox, problem, program: str):
    return _run(sandbox, problem, program, True), _run(sandbox, problem, program, False)


@pytest.mark.parametrize("name", list(READ_BACK))
def test_tests_read_back_from_the_engine_are_not_there_split(sandbox, problems, name):
    split, shared = _both(sandbox, problems["JavaScript/0"], READ_BACK[name])
    assert not split.passed and split.mode == "split", split
    # sharing the engine, the first two read the tests' source and pass without computing anything
    assert shared.passed is (name != "every process's descriptors, command line and memory under /proc"), (
        shared
    )


@pytest.mark.parametrize("name", list(TOKEN))
def test_the_token_copied_or_the_verdict_forged_does_not_pass_split(sandbox, problems, name):
    split, shared = _both(sandbox, problems["JavaScript/53"], TOKEN[name])
    assert not split.passed and split.mode == "split", split
    # with the token on 3 and 4 in its own process, a program written against it passes
    assert shared.passed is (name != "a passing outcome written to descriptor 5 and every process's fd 5"), (
        shared
    )


@pytest.mark.parametrize("name", list(REBIND))
def test_rebinding_what_the_tests_call_does_not_pass_split(sandbox, problems, name):
    task, program = REBIND[name]
    split, shared = _both(sandbox, problems[task], program)
    assert not split.passed and split.mode == "split", split
    assert shared.passed, shared  # one engine: the tests call what the program bound


def test_reference_passes_split_with_its_checks_counted(sandbox, problems):
    problem = problems["JavaScript/0"]
    result = _run(sandbox, problem, problem.program(problem.after), True)
    assert result.passed and result.mode == "split"
    assert (result.tests_passed, result.tests_total, result.delegated_checks) == (7, 7, 0)
    buggy = _run(sandbox, problem, problem.program(problem.before), True)
    assert not buggy.passed and buggy.tests_total == 7 and buggy.tests_passed < 7
    assert "Assertion failed" in buggy.detail


@pytest.mark.parametrize(
    "program, detail",
    [
        ("const add = (x, y) => { process.exit(0); };", "channel closed"),
        ("const add = (x, y) => { require('fs').writeSync(4, 'junk!!!!'); return x + y; };", "protocol"),
        (
            "const add = (x, y) => { require('fs').writeSync(4, Buffer.from([127, 255, 255, 255])); return 1; };",
            "bound",
        ),
        ("const add = (x, y) => { for (;;) {} };", "wall-clock"),
        (
            "const add = (x, y) => { const b = Buffer.from(JSON.stringify({reply: {value: x + y}}));"
            " const h = Buffer.alloc(4); h.writeUInt32BE(b.length);"
            " require('fs').writeSync(4, Buffer.concat([h, b])); return x + y; };",
            "",
        ),
        ("const add = (x, y) => { const o = {}; o.self = o; return o; };", "cyclic"),
    ],
)
def test_a_program_that_breaks_the_protocol_fails_with_one_line(sandbox, problems, program, detail):
    """A program that dies mid-call, writes junk or a huge header on the channel, never answers,
    answers twice or returns what cannot cross fails, with a one-line reason, never a hang."""
    problem = problems["JavaScript/53"]
    result = _run(sandbox, problem, program, True)
    assert not result.passed and result.mode == "split", result
    assert "\n" not in result.detail and detail in result.detail, result.detail


def test_callbacks_handles_and_values_cross_as_the_rules_say(sandbox, problems):
    """Plain data by copy (NaN, -0, undefined, bigint, nested arrays and objects, __proto__ as an own
    key), functions and class instances as handles, an argument changed in place written back,
    a callback of the tests called by the program, and == on a handle counted as delegated."""
    tests = r"""
console.assert(Object.is(values().nan, NaN) && Object.is(values().negzero, -0) && values().none === undefined)
console.assert(values().big === 12345678901234567890n && JSON.stringify(values().nested) === '[[1,{"a":[2]}]]')
console.assert(Object.getPrototypeOf(values().proto) === Object.prototype && values().proto.__proto__ === 1)
const c = new Counter(); c.add(2); c.add(3)
console.assert(c.total === 5 && typeof c.add === 'function')
const xs = [3, 1, 2]; sortInPlace(xs)
console.assert(JSON.stringify(xs) === '[1,2,3]')
console.assert(JSON.stringify(apply((v) => v * 2, [1, 2])) === '[2,4]')
console.assert(c == 5)
"""
    program = r"""
const values = () => ({nan: NaN, negzero: -0, none: undefined, big: 12345678901234567890n,
  nested: [[1, {a: [2]}]], proto: JSON.parse('{"__proto__": 1}')});
class Counter { constructor() { this.total = 0; } add(n) { this.total += n; } valueOf() { return this.total; } }
const sortInPlace = (xs) => { xs.sort((a, b) => a - b); };
const apply = (f, xs) => xs.map(f);
"""
    problem = replace(problems["JavaScript/53"], tests=tests, helpers="")
    result = _run(sandbox, problem, program, True)
    assert result.passed and result.mode == "split", result
    assert (result.tests_passed, result.tests_total, result.delegated_checks) == (7, 7, 1)


def test_a_check_cut_short_by_an_exception_never_counts_as_held(sandbox, problems):
    """A check that held for the loop's first input and whose arguments throw on the second did not
    hold (the RL `tests` reward's share): throwing is paid no more than answering wrong."""
    tests = (
        "for (const x of [1, 2, 3]) { console.assert(double(x) === 2 * x) }\n"
        "try { console.assert(double(-1) === -2) } catch (e) {}\n"
        "console.assert(double(1) === 2)\n"
    )
    program = "const double = (x) => { if (x === 1) { return 2; } throw new Error(`no ${x}`); };\n"
    problem = replace(problems["JavaScript/53"], tests=tests, helpers="")
    result = _run(sandbox, problem, program, True)
    assert not result.passed and result.mode == "split", result
    assert (result.tests_passed, result.tests_total) == (0, 3), result
    caught = "for (const x of [1]) { console.assert(double(x) === 2 * x) }\n" + tests.split("\n", 1)[1]
    result = _run(sandbox, replace(problem, tests=caught), program, True)
    assert result.passed and (result.tests_passed, result.tests_total) == (2, 3), result


def test_a_failed_check_that_something_caught_fails_the_run(sandbox, problems):
    """Tests that catch whatever a check throws (here a bare catch): a wrong program's failed check is
    caught in one process; split, a correct program fails no check, caught or not."""
    tests = (
        "try { console.assert(double(2) === 4, 'doubles') } catch (e) {}\nconsole.assert(double(0) === 0)\n"
    )
    program = "const double = (x) => x * 3;\n"
    problem = replace(problems["JavaScript/53"], tests=tests, helpers="")
    assert _run(sandbox, problem, program, False).passed  # one process: swallowed
    result = _run(sandbox, problem, program, True)
    assert not result.passed and "its error was caught" in result.detail, result
    assert _run(sandbox, problem, "const double = (x) => x * 2;\n", True).passed
