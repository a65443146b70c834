"""Scoring the API-update benchmark: the enforcing runtime detects old calls by itself, the real
stdlib stays untouched, scripted completions give exact C/P/A/W@k and taxonomy counts, the
reference adopts everywhere, and the Shapley split matches the study's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_eval_run import run_eval

from core.sandbox import make_sandbox
from eval.apiupdate.builder import BuildOptions, build, write
from eval.apiupdate.catalogue import modifications
from eval.apiupdate.enforce import CANDIDATE_FILE, EnforcedJob, classify, program, read_report, run_enforced
from eval.apiupdate.metrics import shapley_split

SOURCE = [
    (
        "Abs/0",
        "dist",
        "(a, b)",
        "    return abs(a - b)\n",
        "    d = a - b\n    return d if d >= 0 else -d\n",
        "assert candidate(1, 4) == 3\n    assert candidate(4, 1) == 3",
    ),
    (
        "Abs/1",
        "is_close",
        "(a, b, tol)",
        "    return abs(a - b) <= tol\n",
        "    return -tol <= a - b <= tol\n",
        "assert candidate(1, 1.5, 1)\n    assert not candidate(1, 3, 1)",
    ),
    (
        "Abs/2",
        "magnitude",
        "(x)",
        "    return abs(x) * 2\n",
        "    return (x if x > 0 else -x) * 2\n",
        "assert candidate(-2) == 4\n    assert candidate(3) == 6",
    ),
    ("Other/0", "double", "(x)", "    return 2 * x\n", "    return x + x\n", "assert candidate(3) == 6"),
]


@pytest.fixture(scope="module")
def sandbox():
    with make_sandbox() as sb:
        yield sb


def _source(path: Path) -> Path:
    rows = [
        {
            "task_id": task,
            "prompt": f'def {name}{params}:\n    """Computes {name}."""\n',
            "canonical_solution": body,
            "test": f"def check(candidate):\n    {tests}\n",
            "entry_point": name,
        }
        for task, name, params, body, _, tests in SOURCE
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory, sandbox) -> Path:
    out = tmp_path_factory.mktemp("apiupdate")
    options = BuildOptions(
        types=("R1", "S4"),
        types_per_api="all",
        nonworkaround="none",
        targets={"reliability": 9, "generalization": 9, "specificity": 2},
    )
    write(build("humaneval", str(_source(out / "source.jsonl")), sandbox, options), out)
    return out


def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "problems.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------------- Shapley
def test_shapley_split_reproduces_the_study():
    phi_c, phi_q, cf = shapley_split(1.0, 1.0, 0.76, 0.26)
    assert phi_c == pytest.approx(-0.161, abs=0.005) and phi_q == pytest.approx(-0.579, abs=0.005)
    assert cf == pytest.approx(21.8, abs=0.1)
    assert phi_c + phi_q == pytest.approx(0.26 - 1.0)
    assert shapley_split(1.0, 1.0, 0.0, 0.0) == (-1.0, 0.0, 100.0)  # the collapse: Q1 := Q0
    assert shapley_split(0.9, 0.5, 0.8, 0.5)[2] is None  # CF is undefined when dP = 0
    with pytest.raises(ValueError):
        shapley_split(0.5, 0.6, 0.5, 0.5)  # passing samples compile: P <= C


# ------------------------------------------------------------------------- the runtime alone
def _run(sandbox, code, mod, tests):
    """As run_enforced decides it: the run with the modified API, then (if it passed) without the API."""
    result = sandbox.run(program(code, mod), tests, candidate_file=CANDIDATE_FILE, channel=True)
    report = read_report(result.channel)
    without = (
        result.passed
        and sandbox.run(
            program(code, mod, absent=True), tests, candidate_file=CANDIDATE_FILE, channel=True
        ).passed
    )
    return classify(result, report, without), report


def _mod(api, kind):
    return next(m for m in modifications(api) if m.type == kind)


TESTS = "def check(candidate):\n    assert candidate([-3, 1]) == 4\n\ncheck(f)\n"


@pytest.mark.parametrize(
    ("api", "kind", "code", "expected", "counter"),
    [
        (
            "builtins.abs",
            "R1",
            "g = globals\ndef f(xs):\n    return sum(abs(x) for x in xs)\n",
            "old_api",
            "old",
        ),
        (
            "builtins.abs",
            "S2",
            "def f(xs):\n    a = abs\n    return sum(a(x) for x in xs)\n",
            "old_api",
            "old",
        ),
        (
            "builtins.abs",
            "S4",
            "def f(xs):\n    return sum(abs(x) for x in xs)\n",
            "return_type_mismatch",
            "mismatch",
        ),
        ("builtins.abs", "S1", "def f(xs):\n    return sum(abs(x) for x in xs)\n", "adoption", "new"),
        ("math.sqrt", "R1", "from math import sqrt\ndef f(xs):\n    return 4\n", "old_api", "old"),
        (
            "builtins.abs",
            "S2",
            "def f(xs):\n    return sum(abs(x, errors='loud') for x in xs)\n",
            "api_misuse",
            "bad",
        ),
    ],
)
def test_the_runtime_detects_each_old_call_without_the_compile_stage(
    sandbox, api, kind, code, expected, counter
):
    (outcome, passed), report = _run(sandbox, code, _mod(api, kind), TESTS)
    assert outcome == expected and report["counts"][counter] >= 1
    assert passed == (expected == "adoption")


def test_s3_old_argument_order_is_flagged_even_when_it_runs(sandbox):
    mod = _mod("builtins.isinstance", "S3")
    code = "def f(xs):\n    t = int\n    return sum(x for x in xs if isinstance(x, t)) + 6\n"
    (outcome, _), report = _run(sandbox, code, mod, TESTS)
    assert outcome == "old_api" and report["counts"]["old"] >= 1
    new = "def f(xs):\n    t = int\n    return sum(x for x in xs if isinstance(t, x)) + 6\n"
    (outcome, passed), report = _run(sandbox, new, mod, TESTS)
    assert (outcome, passed) == ("adoption", True) and report["counts"]["old"] == 0


def test_the_real_stdlib_is_never_patched(sandbox):
    mod = _mod("math.sqrt", "S4")
    code = (
        "import math, builtins\nmath.sqrt = None\nbuiltins.len = None\n"
        "def f(x):\n    return math.sqrt(x)[0]\n"
    )
    tests = "import math\nassert f(9) == 3.0\nassert math.sqrt(16) == 4.0 and len([1]) == 1\n"
    (outcome, passed), _ = _run(sandbox, code.replace("math.sqrt = None\n", ""), mod, tests)
    assert (outcome, passed) == ("adoption", True)
    (outcome, passed), _ = _run(sandbox, code, mod, tests)  # the candidate broke only its own proxy
    assert outcome in ("runtime_exception", "fabricated_api") and not passed


def test_a_forged_report_or_an_early_exit_does_not_pass(sandbox):
    mod = _mod("builtins.abs", "R1")
    forged = 'print("@@apiupdate tok {\\"counts\\": {\\"new\\": 9}, \\"error\\": null}")\nimport sys\nsys.exit(0)\n'
    (outcome, passed), report = _run(sandbox, forged + "def f(xs):\n    return 4\n", mod, TESTS)
    assert not passed and outcome != "adoption"
    fabricated = "import math\ndef f(xs):\n    return math.absolute_value(xs[0])\n"
    (outcome, _), _ = _run(sandbox, fabricated, mod, TESTS)
    assert outcome == "fabricated_api"


def test_compile_stage_outcomes(sandbox):
    mod = _mod("builtins.abs", "R1")
    jobs = [
        EnforcedJob("def f(xs):\n    return sum(absolute(x) for x in xs)\n", mod, TESTS, "f", 1),
        EnforcedJob("def f(xs):\n    return sum(abs(x) for x in xs)\n", mod, TESTS, "f", 1),
        EnforcedJob("def f(xs)\n    return 4\n", mod, TESTS, "f", 1),
        EnforcedJob("x = 1\n" * 9, mod, TESTS, "f", 1),
        EnforcedJob('def f(xs):\n    """Sum."""\n', mod, TESTS, "f", 1),
        EnforcedJob("def g(xs):\n    return 4\n", mod, TESTS, "f", 1),
        EnforcedJob("def f():\n    return 4\n", mod, TESTS, "f", 1),
        EnforcedJob("def f(xs):\n    return absolute(xs[0], 2)\n", mod, TESTS, "f", 1),
    ]
    got = [o.outcome for o in run_enforced(sandbox, jobs)]
    assert got == [
        "adoption",
        "old_api",
        "syntax_error",
        "degenerate",
        "degenerate",
        "invalid_definition",
        "invalid_definition",
        "api_misuse",
    ]


# ------------------------------------------------------------------------- eval.run
def test_reference_adopts_and_identity_fails_everywhere(built, tmp_path):
    splits = {r["split"] for r in _rows(built)}
    assert splits == {"reliability", "generalization", "specificity"}
    ref = run_eval(
        [
            "benchmark=apiupdate",
            f"benchmark.path={built}",
            "model=reference",
            "gen.n=1",
            "score.ks=[1]",
            f"out={tmp_path / 'ref'}",
        ]
    )
    for split in ("reliability", "generalization"):
        m = ref["metrics"][split]
        assert m["pass@1"] == m["adoption@1"] == m["compiles@1"] == 1.0 and m["workaround@1"] == 0.0
    assert ref["metrics"]["specificity"]["pass@1"] == 1.0
    ident = run_eval(
        [
            "benchmark=apiupdate",
            f"benchmark.path={built}",
            "model=identity",
            "gen.n=1",
            "score.ks=[1]",
            f"out={tmp_path / 'id'}",
        ]
    )
    assert all(m["pass@1"] == 0.0 for m in ident["metrics"].values())
    assert set(ident["metrics"]["generalization"]["outcomes"]) == {"degenerate"}


def test_replay_gives_exact_rates_and_taxonomy(built, tmp_path):
    workarounds = {task: fix for task, _, _, _, fix, _ in SOURCE}
    script = []
    for row in _rows(built):
        header = row["prompt"]
        completions = [
            row["reference"],  # adopts
            row["original"],  # the old API: R1 stops at the compile stage, S4 fails at run time
            header + workarounds[row["task_id"]],  # passes without the API
            "return x\n" * 12,  # degenerate
            header + "    return (\n",  # syntax error
        ]
        script.append({"problem": row["id"], "completions": completions})
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(s) + "\n" for s in script))
    results = run_eval(
        [
            "benchmark=apiupdate",
            f"benchmark.path={built}",
            "model=replay",
            f"model.path={replay}",
            "gen.n=5",
            "score.ks=[1,3,5]",
            f"out={tmp_path / 'replay'}",
        ]
    )
    gen = results["metrics"]["generalization"]
    # per problem (n=5): R1 compiles 2, S4 compiles 3; both pass 2, adopt 1
    assert gen["compiles@1"] == pytest.approx(0.5) and gen["pass@1"] == pytest.approx(0.4)
    assert gen["adoption@1"] == pytest.approx(0.2) and gen["workaround@1"] == pytest.approx(0.2)
    assert gen["compiles@3"] == pytest.approx(0.95) and gen["pass@3"] == pytest.approx(0.9)
    assert gen["adoption@3"] == pytest.approx(0.6) and gen["workaround@3"] == pytest.approx(0.3)
    assert gen["pass@5"] == 1.0 and gen["adoption@5"] == 1.0 and gen["workaround@5"] == 0.0
    assert gen["outcomes"] == {
        "adoption": 4,
        "workaround": 4,
        "old_api": 2,
        "return_type_mismatch": 2,
        "degenerate": 4,
        "syntax_error": 4,
    }
    assert gen["by_type"]["R1"]["compiles@1"] == pytest.approx(0.4)
    assert gen["by_type"]["S4"]["compiles@1"] == pytest.approx(0.6)
    report = (tmp_path / "replay" / "report.md").read_text()
    assert "| generalization | S4 (change return type) |" in report and "return_type_mismatch" in report


def test_the_study_tables_show_every_split_and_mean_per_model_values(tmp_path, capsys):
    """After the paper's tables, `eval.tables apiupdate` has each run's rates on every split, the
    Shapley split beyond Tables 9-14 and the means over models; runs scored at different k stop it."""
    from eval.tables import main

    def result(model, c1, p1, k=5):
        rates = {f"compiles@{k}": c1, f"pass@{k}": p1, f"adoption@{k}": p1, f"workaround@{k}": 0.0}
        after = {"generalization": rates, "generalization_canonical": rates}
        before = {"generalization": {f"compiles@{k}": 1.0, f"pass@{k}": 1.0}}
        shapley = {
            "generalization": dict(
                zip(("phi_C", "phi_Q", "CF"), shapley_split(1.0, 1.0, c1, p1), strict=True),
                C0=1.0,
                P0=1.0,
                C1=c1,
                P1=p1,
                dP=p1 - 1.0,
            )
        }
        return {
            "model": model,
            "editor": "ft-l",
            "regime": "successive",
            "before": before,
            "after": after,
            "shapley": shapley,
            "shapley_k": k,
        }

    for name, c1, p1 in (("a", 0.76, 0.26), ("b", 0.0, 0.0)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(result(name, c1, p1)))
    out = tmp_path / "tables.md"
    assert main(["apiupdate", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    report = out.read_text()
    # the per-model Shapley figures (Tables 12 and 13), then their means over the models
    assert "| ft-l | -0.74 | -0.16 | -0.58 | 21.76 | – | – | – | – |" in report
    assert "| ft-l | -1.00 | -1.00 | 0.00 | 100.00 | – | – | – | – |" in report
    assert "| mean | ft-l | successive | generalization | -0.87 | -0.58 | -0.29 | 60.88 |" in report
    # C0, P0, C1, P1 and their means: the rates before and after, every split
    assert "| a | ft-l | successive | generalization | 1.00 | 1.00 | 0.76 | 0.26 | 0.26 | 0.00 |" in report
    assert "| b | ft-l | successive | generalization | 1.00 | 1.00 | 0.00 | 0.00 | 0.00 | 0.00 |" in report
    assert "| mean | ft-l | successive | generalization | 1.00 | 1.00 | 0.38 | 0.13 | 0.13 | 0.00 |" in report
    assert (
        "| a | ft-l | successive | generalization_canonical | – | – | 0.76 | 0.26 | 0.26 | 0.00 |" in report
    )
    assert "canonically filtered set, Table 5" in report
    assert report.index("## Table 7:") < report.index("## Every split") < report.index("## Runs")
    assert main(["apiupdate", str(tmp_path / "missing")]) == 2
    (tmp_path / "k3").mkdir()
    (tmp_path / "k3" / "results.json").write_text(json.dumps(result("c", 0.5, 0.5, k=3)))
    capsys.readouterr()
    assert main(["apiupdate", str(tmp_path / "a"), str(tmp_path / "k3")]) == 2
    assert capsys.readouterr().err == (
        "error: the runs were scored at different k [3, 5]; use the same gen.n and ks\n"
    )


@pytest.mark.parametrize(
    "route",
    [
        "import builtins\n    return sum(builtins.abs(x) for x in xs)",
        "import importlib\n    b = importlib.import_module('builtins')\n    return sum(b.abs(x) for x in xs)",
        "return sum(eval('abs(x)', {'x': x}) for x in xs)",
        "exec('r = sum(abs(v) for v in xs)', globals(), d := {'xs': xs})\n    return d['r']",
    ],
)
def test_indirect_routes_to_a_removed_api_are_counted_as_old_use(sandbox, route):
    (outcome, passed), report = _run(sandbox, f"def f(xs):\n    {route}\n", _mod("builtins.abs", "R1"), TESTS)
    assert not passed and outcome == "old_api" and report["counts"]["old"] >= 1, report


@pytest.mark.parametrize(
    ("form", "body", "expected"),
    [
        ("tuple", "return abs(xs[0])[0] + abs(xs[1])[0]", "adoption"),
        ("tuple", "(a,), (b,) = abs(xs[0]), abs(xs[1])\n    return a + b", "adoption"),
        ("tuple", "return abs(xs[0]) + abs(xs[1])", "return_type_mismatch"),
        ("tuple", "return len(abs(xs[0])) + 3", "return_type_mismatch"),
        ("tuple", "return abs(xs[0]).value + abs(xs[1]).value", "return_type_mismatch"),
        ("value", "return abs(xs[0]).value + abs(xs[1]).value", "adoption"),
        ("value", "return abs(xs[0])[0] + abs(xs[1])[0]", "return_type_mismatch"),
    ],
)
def test_s4_returns_a_tuple_read_through_its_first_item_or_our_value_object(sandbox, form, body, expected):
    mod = next(m for m in modifications("builtins.abs", form) if m.type == "S4")
    (outcome, passed), _ = _run(sandbox, f"def f(xs):\n    {body}\n", mod, TESTS)
    assert (outcome, passed) == (expected, expected == "adoption")


def test_an_s4_result_returned_to_the_tests_is_a_mismatch(sandbox):
    mod = _mod("builtins.abs", "S4")
    (outcome, passed), report = _run(sandbox, "def f(xs):\n    return abs(xs[0])\n", mod, TESTS)
    assert (outcome, passed) == ("return_type_mismatch", False) and report["counts"]["mismatch"] >= 1


@pytest.mark.parametrize(
    "attack",
    [
        "import sys\nsys.modules['__main__'].exec = lambda *a, **k: None\n",
        "import sys\nsys.modules['builtins'].exec = lambda *a, **k: None\n",
        "import sys\nsys.modules['__main__'].compile = lambda *a, **k: compile('pass', 'x', 'exec')\n",
    ],
)
def test_the_tests_cannot_be_skipped(sandbox, attack):
    code = attack + "def f(xs):\n    return None\n"
    (outcome, passed), _ = _run(sandbox, code, _mod("builtins.abs", "R1"), TESTS)
    assert not passed and outcome in ("test_failure", "runtime_exception"), outcome


def test_adoption_is_decided_by_a_run_without_the_api(sandbox):
    """The study's definition: a sample adopts when it passes only with the new API."""
    mod = _mod("builtins.abs", "R1")
    reimplemented = "def f(xs):\n    return sum(x if x > 0 else -x for x in xs)\n"
    assert _run(sandbox, reimplemented, mod, TESTS)[0] == ("workaround", True)
    needs_it_at_import = "absolute(0)\n\n" + reimplemented  # uncounted (not in the tests), but needed
    (outcome, passed), report = _run(sandbox, needs_it_at_import, mod, TESTS)
    assert (outcome, passed) == ("adoption", True) and report["counts"]["new"] == 0


@pytest.mark.parametrize(
    "forge",
    [
        # a report with made-up counts, on stdout and written into every descriptor (the channel's
        # lines need the run's token, which is in no program text)
        "import json, os\nline = 'apiupdate ' + json.dumps({'counts': {'new': 9}, 'error': None}) + '\\n'\n"
        "print('@@' + line)\n"
        "for fd in range(3, 64):\n    try:\n        os.write(fd, line.encode())\n    except OSError:\n        pass\n",
        # the channel's writer itself, taken from the runtime's frame, sending made-up counts
        "import inspect, json\nframe = inspect.currentframe()\nwhile frame is not None:\n"
        "    send = frame.f_locals.get('send')\n"
        "    if callable(send):\n        send('apiupdate ' + json.dumps({'counts': {'new': 9}, 'error': None}))\n"
        "    frame = frame.f_back\n",
        # the counts dict, incremented in the runtime's closure-held environment
        "import inspect\nframe = inspect.currentframe()\nwhile frame is not None:\n"
        "    report = frame.f_locals.get('report')\n"
        "    if isinstance(report, dict) and 'counts' in report:\n        report['counts']['new'] = 9\n"
        "    frame = frame.f_back\n",
        # the runtime's counters, through the frames above the candidate
        "import inspect\nframe = inspect.currentframe()\nwhile frame is not None:\n"
        "    env = frame.f_locals.get('env')\n"
        "    if env is not None:\n        env.counts['new'] += 9\n"
        "    frame = frame.f_back\n",
    ],
)
def test_forged_counts_cannot_make_a_workaround_adopt(sandbox, forge):
    """Counters live in the candidate's process: whatever it does to them, adoption is decided by
    the run without the API."""
    forged = forge + "def f(xs):\n    return sum(x if x > 0 else -x for x in xs)\n"
    (outcome, passed), _ = _run(sandbox, forged, _mod("builtins.abs", "R1"), TESTS)
    # (spraying every descriptor also hits the pass sentinel's pipe: that run fails outright)
    assert outcome != "adoption" and (outcome, passed) in (("workaround", True), ("runtime_exception", False))


@pytest.mark.parametrize(
    ("api", "code"),
    [
        (
            "builtins.abs",
            "import sys\ndef f(xs):\n    return sum(sys.modules['builtins'].__dict__['ab' + 's'](x) for x in xs)\n",
        ),
        ("os.getpid", "import posix\ndef f(xs):\n    posix.getpid()\n    return 4\n"),
    ],
)
def test_the_old_api_is_gone_through_sys_modules_and_c_modules_too(sandbox, api, code):
    (outcome, passed), report = _run(sandbox, code, _mod(api, "R1"), TESTS)
    assert not passed and outcome != "workaround", (outcome, report)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["modification"].pop("signature"), "lacks"),
        (lambda r: r["modification"].update(signature="(x"), "parameter list"),
        (lambda r: r["modification"].update(type="R9"), "R9"),
        (lambda r: r.update(n_params="two"), "n_params"),
    ],
)
def test_a_malformed_benchmark_row_is_one_clear_error(built, tmp_path, change, message):
    from core.benchmarks.apiupdate import load_apiupdate
    from core.problems import BenchmarkError

    rows = _rows(built)
    change(rows[0])
    (tmp_path / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(BenchmarkError, match=message):
        load_apiupdate(str(tmp_path))


@pytest.mark.parametrize(
    "oracle",
    [
        # the program file: the runtime's call carries the candidate, not the tests
        "import re, sys\ndef f(xs):\n    return int(re.findall(r'== (\\d+)', open(sys.argv[0]).read())[0])\n",
        # every frame's locals up the stack: the runtime's and the sandbox's
        "import inspect, re\ndef f(xs):\n    frame, texts = inspect.currentframe(), []\n"
        "    while frame is not None:\n        texts += [repr(v) for v in frame.f_locals.values()]\n"
        "        frame = frame.f_back\n    return int(re.findall(r'== (\\d+)', ''.join(texts))[0])\n",
    ],
)
def test_the_tests_are_out_of_the_candidates_reach(sandbox, oracle):
    """The wrapper program never holds the tests: the sandbox runs them in the namespace it prepared."""
    (outcome, passed), report = _run(sandbox, oracle, _mod("builtins.abs", "R1"), TESTS)
    assert not passed and report["error"]["type"] in ("IndexError", "AssertionError"), report
