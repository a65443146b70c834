"""Coverage measured in split verdict runs (line_probes.py): what it reports, and what a program
that tampers with it can and cannot change.

The program's lines come from probes in its own process, so a program can lie about them: that
changes its coverage, never its verdict (the tests' process decides that alone), and what it sends
is checked as untrusted data. The probe module is preloaded only by servers that run split jobs:
a program judged in its own process never finds it.
"""

from __future__ import annotations

import textwrap

import pytest

from core.sandbox import SandboxLimits, make_sandbox
from core.sandbox.line_probes import main_py_lines, measured_coverage, split_lines

LIMITS = SandboxLimits(timeout_s=6.0, memory_mb=512)
PROGRAM = "def add(a, b):\n    if a < 0:\n        return 0\n    return a + b\n"
TESTS = "def check(candidate):\n    assert candidate(2, 3) == 5\n\ncheck(add)\n"


@pytest.fixture(scope="module")
def sandbox():
    with make_sandbox("auto", limits=LIMITS, workers=1, strict=False) as sb:
        yield sb


def tampering(replacement: str) -> str:
    """A correct program that replaces, from its own process, the object collecting its lines."""
    return PROGRAM + textwrap.dedent(
        f"""
        import gc
        for obj in gc.get_objects():
            if type(obj).__name__ == "ProgramLines":
                obj.lines = {replacement}
        """
    )


def test_a_measured_split_run_reports_main_py_lines(sandbox):
    result = sandbox.run(PROGRAM, TESTS, split=True, coverage=True)
    assert result.passed and result.mode == "split"
    # main.py is program + "\n" + tests: the tests' lines follow the program's and a blank line
    assert result.coverage == {"statements": [1, 2, 3, 4, 6, 7, 9], "excluded": [], "missing": [3]}


def test_a_failing_run_carries_no_coverage(sandbox):
    result = sandbox.run(PROGRAM.replace("a + b", "a - b"), TESTS, split=True, coverage=True)
    assert not result.passed and result.coverage is None


@pytest.mark.parametrize(
    "replacement, passes",
    [
        ("lambda: list(range(1, 99))", True),  # claims every line ran: coverage lies, the verdict stands
        ("lambda: 'every line'", True),  # not line numbers: no coverage
        ("lambda: gc", True),  # a handle, not plain data: no coverage
    ],
)
def test_a_program_lying_about_its_lines_changes_coverage_never_the_verdict(sandbox, replacement, passes):
    result = sandbox.run(tampering(replacement), TESTS, split=True, coverage=True)
    assert result.passed is passes
    if "range" in replacement:
        assert result.coverage["missing"] == []
    else:
        assert result.coverage == {"error": "the run passed but sent no readable lines"}
    wrong = tampering(replacement).replace("a + b", "a - b")
    assert not sandbox.run(wrong, TESTS, split=True, coverage=True).passed


def test_a_program_that_stalls_when_asked_for_its_lines_does_not_pass(sandbox):
    limits = SandboxLimits(timeout_s=2.0, memory_mb=512)
    result = sandbox.run(
        tampering("lambda: __import__('time').sleep(60)"), TESTS, split=True, coverage=True, limits=limits
    )
    assert not result.passed and result.status == "timeout" and result.coverage is None


def test_the_probe_module_is_never_preloaded_where_a_program_is_judged_in_process(sandbox):
    assert sandbox.run(PROGRAM, TESTS, split=True, coverage=True).passed  # a probes server ran
    probe = "import sys\nassert not any(name.startswith('slipcover') for name in sys.modules)\n"
    assert sandbox.run(PROGRAM, TESTS + probe).passed
    assert sandbox.run(PROGRAM, TESTS + probe, coverage=True).passed  # coverage.py's server
    # split runs that are not measured may share a probes server: their program may use anything
    assert sandbox.run(PROGRAM, TESTS, split=True).passed


def test_a_measured_candidate_carries_slipcover_but_not_coverage_py(sandbox):
    """The host analyses a split run's lines: no probes server loads coverage.py (nor the sqlite3,
    pickle and multiprocessing it imports), so no run's process forks from a zygote that holds it."""
    for module in ("coverage", "sqlite3", "multiprocessing"):
        check = f"import sys\nassert 'slipcover' in sys.modules and {module!r} not in sys.modules\n"
        result = sandbox.run(PROGRAM + check, TESTS, split=True, coverage=True)
        assert result.passed and result.coverage["missing"] == [3], (module, result.detail)


@pytest.mark.parametrize(
    "program, offset",
    [(PROGRAM, 5), (PROGRAM.rstrip("\n"), 4), (PROGRAM.replace("\n", "\r\n"), 5), ("x = 1\rx = 2\n", 3)],
)
def test_test_lines_are_shifted_by_the_programs_lines_as_compile_counts_them(program, offset):
    assert main_py_lines(program, [1], [1, 2]) == {1, offset + 1, offset + 2}
    first_test_line = compile(program + "\n" + "1/0", "m", "exec")
    with pytest.raises(ZeroDivisionError) as caught:
        exec(first_test_line, {})
    assert caught.traceback[-1].lineno + 1 == offset + 1  # pytest's line numbers are 0-based
    assert main_py_lines(program, "1", [1]) is None
    assert main_py_lines(program, [1], [True]) is None


def test_a_malformed_outcome_is_no_coverage():
    for outcome in (b"", b"[]", b'{"lines": 3}', b'{"lines": {"program": [1]}}', b"[" * 100_000):
        assert split_lines(PROGRAM, outcome) == {"error": "the run passed but sent no readable lines"}
    assert split_lines(PROGRAM, b'{"lines": {"program": [1, 2], "tests": [1]}}') == {"executed": [1, 2, 6]}


def test_the_host_analyses_the_lines_with_its_own_texts():
    assert measured_coverage(PROGRAM, TESTS, [1, 2, 4, 6, 7, 9]) == {
        "statements": [1, 2, 3, 4, 6, 7, 9],
        "excluded": [],
        "missing": [3],
    }
    assert "error" in measured_coverage("def f(:\n", TESTS, [1])  # a text the parser cannot read


def test_lines_are_analysed_only_for_the_measured_split_run_that_sent_them():
    from core.sandbox.worker import _analysed, _to_result

    result = _to_result(
        {"status": "passed", "exit_code": 0, "mode": "split", "coverage": {"executed": [1, 2, 4]}}
    )
    assert result.passed and result.coverage == {"executed": [1, 2, 4]}
    job = {"kind": "python", "split": True, "coverage": True, "program": PROGRAM, "tests": TESTS}
    assert _analysed(result, job).coverage == {
        "statements": [1, 2, 3, 4, 6, 7, 9],
        "excluded": [],
        "missing": [3, 6, 7, 9],
    }
    for unmeasured in (
        {**job, "coverage": False},
        {**job, "split": False},
        {"kind": "command", "split": True},
    ):
        assert not _analysed(result, unmeasured).passed
    assert not _to_result({"status": "passed", "mode": "split", "coverage": {"executed": [0]}}).passed
