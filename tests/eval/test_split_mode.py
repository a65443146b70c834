"""Which problems run split (eval/split_mode.py), and the verdicts of split runs through the
evaluation's own path (eval.execute.program_verdicts): HumanEvalFix Python all split, reference
164/164 and identity 0/164; every CanItEdit-schema problem in the repository split but a listed set."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from core.benchmarks.canitedit import load_canitedit
from core.benchmarks.humanevalfix import load_humanevalfix
from core.problems import Problem
from core.sandbox import SandboxLimits, make_sandbox
from eval.execute import program_verdicts
from eval.scoring import _judged
from eval.split_mode import RunMode, main, outcome, run_modes, static_reason

REPO = Path(__file__).resolve().parents[2]
LIMITS = SandboxLimits(timeout_s=5.0)  # HumanEvalFix: three buggy programs never end
SLOW_IMPORTS = SandboxLimits(timeout_s=20.0)  # scikit-learn and z3 imports are slow on a busy machine
# Every CanItEdit-schema file in the repository, and its problems that run in process, with why.
IN_PROCESS = {
    "core/benchmarks/fixtures.jsonl": {"14": "the tests subclass the program's class Shape"},
    "tests/fixtures/canitedit_sample.jsonl": {},
    "tests/fixtures/canitedit_deps.jsonl": {"4": "the tests introspect the program's namespace"},  # inspect
    "tests/fixtures/audit_cases.jsonl": {
        "3": "the tests introspect the program's namespace",  # dir()
        "6": "outcomes differ",  # the tests change a dict the program returned (copies cross)
    },
}
FLAKY = {("tests/fixtures/audit_cases.jsonl", "7")}  # random tests: either way on a given run


@pytest.fixture(scope="module")
def sandbox():
    with make_sandbox(workers=2) as sb:
        yield sb


def problem(tests: str, before: str = "def f(x):\n    return x\n", language: str = "python") -> Problem:
    return Problem("p", "p", before, before, tests, {"s": "fix"}, language=language)


@pytest.mark.parametrize(
    ("tests", "reason"),
    [
        ("assert f(1) == 1\n", ""),
        ("import main\nassert main.f(1) == 1\n", "the tests import the program as a module"),
        ("from main import f\n", "the tests import the program as a module"),
        ("src = open(__file__).read()\n", "the tests load the program by path"),
        ("assert 'f' in dir()\n", "the tests introspect the program's namespace"),
        ("assert 'f' in globals()\n", "the tests introspect the program's namespace"),
        ("from unittest import mock\n", "the tests patch the program"),
        ("class G(Base):\n    pass\n", "the tests subclass the program's class Base"),
        ("class G(Other):\n    pass\n", ""),
        ("assert (\n", "the tests do not parse"),
        ("assert sum([1]) == 1\n", "the tests call sum, a builtin's name the program defines"),
        ("assert max([1]) == 1\n", ""),
        ("q = eval(repr(f(1)))\n", "the tests evaluate text or data the program produced"),
        (
            "import pickle\nassert pickle.loads(f(1))\n",
            "the tests evaluate text or data the program produced",
        ),
        (
            "import doctest\ndoctest.run_docstring_examples(f, {})\n",
            "the tests evaluate text or data the program produced",
        ),
        ("exec(f(1))\n", "the tests evaluate text or data the program produced"),
        ("import re\nassert re.compile('a').match(f('a'))\n", ""),
    ],
)
def test_static_reasons(tests, reason):
    before = "class Base:\n    pass\n\ndef f(x):\n    return x\n\ndef sum(xs):\n    return 0\n"
    assert static_reason(problem(tests, before)).startswith(reason) and (
        reason or not static_reason(problem(tests, before))
    )


def test_other_languages_never_run_split():
    assert static_reason(problem("assert 1\n", language="js")).startswith("not Python")


@pytest.mark.parametrize("path", list(IN_PROCESS))
def test_every_canitedit_schema_problem_runs_split_but_a_listed_set(sandbox, path):
    problems = load_canitedit(str(REPO / path))
    modes = run_modes(sandbox, problems, SLOW_IMPORTS)
    for p in problems:
        if (path, p.id) in FLAKY:
            continue
        expected = IN_PROCESS[path].get(p.id)
        if expected is None:
            assert modes[p.id].split, f"{path} {p.id} ({p.name}) runs in process: {modes[p.id].reason}"
        else:
            assert not modes[p.id].split and modes[p.id].reason.startswith(expected), (p.id, modes[p.id])


def test_humanevalfix_python_runs_split_reference_passes_identity_fails(sandbox):
    problems = load_humanevalfix(None, ["python"])
    assert len(problems) == 164
    modes = run_modes(sandbox, problems, LIMITS)
    assert [p.id for p in problems if not modes[p.id].split] == []
    reference = program_verdicts([(p, p.after) for p in problems], sandbox, LIMITS, 100_000)
    assert sum(v["passed"] for v in reference) == 164
    assert {(v["status"], v["mode"]) for v in reference} == {("passed", "split")}
    assert all(v["tests_total"] >= 1 and v["tests_passed"] == v["tests_total"] for v in reference)
    assert sum(v["delegated_checks"] for v in reference) == 0  # every check compares plain data
    identity = program_verdicts([(p, p.before) for p in problems], sandbox, LIMITS, 100_000)
    assert sum(v["passed"] for v in identity) == 0
    assert {v["mode"] for v in identity} == {"split"}


def test_helpers_come_from_the_benchmark_not_the_program(sandbox):
    """HumanEvalFix/32 checks find_zero with the declaration's poly: a program that redefines poly
    to answer 0 everywhere passes in process and fails split."""
    (p,) = [p for p in load_humanevalfix(None, ["python"]) if p.id == "Python/32"]
    cheat = "def poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    return 0.0\n"
    (split,) = program_verdicts([(p, cheat)], sandbox, LIMITS, 100_000)
    local = sandbox.run(p.program(cheat), p.tests, limits=LIMITS)
    assert local.passed and not split["passed"] and split["mode"] == "split"


def test_a_sample_that_breaks_the_protocol_fails_and_leaves_its_problem_split(sandbox):
    p = replace(load_canitedit(str(REPO / "tests/fixtures/canitedit_sample.jsonl"))[0], id="broken-protocol")
    assert run_modes(sandbox, [p], LIMITS)[p.id].split
    hostile = (
        "import os\n"
        "for fd in range(3, 32):\n"
        "    try:\n"
        "        os.write(fd, b'\\xff\\xff\\xff\\xffjunk')\n"
        "    except OSError:\n"
        "        pass\n"
    )
    (verdict,) = program_verdicts([(p, p.after + "\n" + hostile)], sandbox, LIMITS, 100_000)
    assert not verdict["passed"] and verdict["mode"] == "split" and "\n" not in verdict["detail"]
    assert run_modes(sandbox, [p], LIMITS)[p.id].split


def test_outcome_ignores_the_unverified_mark_and_keeps_the_failing_line(sandbox):
    ok = sandbox.run("x = 1\n", "assert x == 1\n", limits=LIMITS)
    bad = sandbox.run("x = 1\n", "assert x == 1\nassert x == 2\n", limits=LIMITS)
    bad_split = sandbox.run("x = 1\n", "assert x == 1\nassert x == 2\n", limits=LIMITS, split=True)
    assert outcome(ok) == ("passed", "")
    assert outcome(bad) == outcome(bad_split) == ("failed", "2")


def test_passes_are_counted_by_how_they_were_judged():
    assert _judged({"passed": True, "mode": "split", "delegated_checks": 0}) == "split"
    assert _judged({"passed": True, "mode": "split", "delegated_checks": 2}) == "split, delegated"
    assert _judged({"passed": True, "mode": "in_process"}) == "in_process"
    assert _judged({"passed": True}) == "in_process"  # records from before split runs


def test_the_command_prints_the_share_of_split_problems(capsys):
    main(["canitedit", "--path", str(REPO / "core/benchmarks/fixtures.jsonl")])
    out = capsys.readouterr().out
    assert out.startswith("13 of 14 Python problems of canitedit run split (92.9%)")
    assert "in process: 14 (shape_perimeter): the tests subclass the program's class Shape" in out


def test_a_stored_decision_holds_only_for_the_code_that_made_it(tmp_path, monkeypatch, sandbox):
    """A stored decision's key holds this module's source (a decision made by other rules is made
    again)."""
    from eval import split_mode

    monkeypatch.setenv("EDITFORGE_CACHE", str(tmp_path / "cache"))
    p = problem("assert f(1) == 1\n")
    key = split_mode._key(p, split_mode._salt(sandbox, LIMITS))
    split_mode._store(key, split_mode.RunMode(True))
    assert split_mode._stored(key) == split_mode.RunMode(True)
    edited = tmp_path / "split_mode.py"
    edited.write_text(Path(split_mode.__file__).read_text() + "# another rule\n")
    with monkeypatch.context() as patched:
        patched.setattr(split_mode, "__file__", str(edited))
        assert split_mode._key(p, split_mode._salt(sandbox, LIMITS)) != key


@pytest.mark.parametrize(
    ("tests", "reason"),
    [
        ("assert 'f' in dir()\n", "the tests introspect the program's namespace"),
        ("src = open(__file__).read()\nassert f(1) == 1\n", "the tests load the program by path"),
        ("class G(Base):\n    kind = 1\n", "the tests subclass the program's class Base"),
    ],
)
def test_a_record_left_in_the_cache_never_moves_a_problem_its_text_keeps_in_process(
    tmp_path, monkeypatch, sandbox, tests, reason
):
    """Files left for a later run: whoever can write the cache may plant a decision under a problem's
    key; the problem's own text is checked first, so the plant changes nothing."""
    from eval import split_mode

    monkeypatch.setenv("EDITFORGE_CACHE", str(tmp_path / "cache"))
    planted = problem(tests, "class Base:\n    kind = 0\n\ndef f(x):\n    return x\n")
    split_mode._store(split_mode._key(planted, split_mode._salt(sandbox, LIMITS)), split_mode.RunMode(True))
    sandbox.__dict__.pop("_split_run_modes", None)
    assert run_modes(sandbox, [planted], LIMITS)[planted.id] == split_mode.RunMode(False, reason)


def test_a_problem_whose_outcomes_differ_once_is_decided_again(sandbox):
    """Its first confirmation runs differ (here the tests fail the first time they run split: they
    leave a mark on a module the trusted process keeps, as an earlier run's damage would): the problem
    is run again once and, agreeing then, runs split; one that differs twice stays in process."""
    from eval.split_mode import confirm

    first_split_only = (
        "import json\nfirst = not hasattr(json, 'seen_by_split_mode_test')\n"
        "json.seen_by_split_mode_test = True\nassert not (first and type(f).__name__ == 'Proxy')\n"
    )
    assert confirm(sandbox, [problem(first_split_only)], LIMITS) == [RunMode(True)]
    always = "assert type(f).__name__ != 'Proxy'\n"
    [mode] = confirm(sandbox, [problem(always)], LIMITS)
    assert not mode.split and mode.reason.startswith("outcomes differ: reference: ('failed'"), mode
