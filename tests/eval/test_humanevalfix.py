"""HumanEvalFix as bigcode-evaluation-harness runs it: the prompt of each variant, the import
helper, tests that run once, and reference/identity over all 164 Python and JS problems."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from test_eval_run import HUMANEVALPACK, run_eval

from core.benchmarks import load_benchmark
from core.formats import FORMATS
from eval.generate import build_requests

pytestmark = pytest.mark.skipif(not HUMANEVALPACK.is_dir(), reason="needs core/data/humanevalpack")
VARIANTS = ("fix", "fixtests", "fixdocs")


def _docs(language: str) -> dict[str, dict]:
    rows = [json.loads(line) for line in (HUMANEVALPACK / f"{language}.jsonl").read_text().splitlines()]
    return {row["task_id"]: row for row in rows}


def bigcode_context_and_instruction(doc: dict, variant: str) -> tuple[str, str]:
    """bigcode_eval/tasks/humanevalpack.py, HumanEvalFixBase.get_prompt: the code shown and the
    instruction (fixtests: with_docs=False, fixdocs: with_docs=True). `fix` is not a bigcode task:
    the buggy function alone, as fixtests without the tests."""
    prompt_base = doc["prompt"] if variant == "fixdocs" else doc["declaration"]
    instruction = f"Fix bugs in {doc['entry_point']}."
    context = prompt_base + doc["buggy_solution"]
    if variant == "fixtests":  # "Add tests as source of ground truth"
        context += "\n" + doc["test"]
    return context, instruction


# The EditCoder prompt of Python/23 (strlen) in each variant, written out in full.
PINNED = {
    "fix": (
        "## Code Before:\n"
        "def strlen(string: str) -> int:\n"
        "    return len(string) - 1\n"
        "\n"
        "## Instruction:\n"
        "Fix bugs in strlen.\n"
        "## Code After:\n"
    ),
    "fixtests": (
        "## Code Before:\n"
        "def strlen(string: str) -> int:\n"
        "    return len(string) - 1\n"
        "\n\n\n\n\n\n"
        "def check(strlen):\n"
        "    assert strlen('') == 0\n"
        "    assert strlen('x') == 1\n"
        "    assert strlen('asdasnakj') == 9\n"
        "\n"
        "check(strlen)\n"
        "## Instruction:\n"
        "Fix bugs in strlen.\n"
        "## Code After:\n"
    ),
    "fixdocs": (
        "## Code Before:\n"
        "\n\n"
        "def strlen(string: str) -> int:\n"
        '    """ Return length of given string\n'
        "    >>> strlen('')\n"
        "    0\n"
        "    >>> strlen('abc')\n"
        "    3\n"
        '    """\n'
        "    return len(string) - 1\n"
        "\n"
        "## Instruction:\n"
        "Fix bugs in strlen.\n"
        "## Code After:\n"
    ),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_prompt_of_each_variant_is_bigcodes(variant):
    fmt = FORMATS["editcoder"]
    problems = {
        p.id: p
        for p in load_benchmark(
            "humanevalfix", str(HUMANEVALPACK), languages=["python"], variant=variant
        ).problems
    }
    [request] = build_requests([problems["Python/23"]], ["python"], fmt)
    assert request.prompt == PINNED[variant]
    context, instruction = bigcode_context_and_instruction(_docs("python")["Python/23"], variant)
    assert request.prompt == fmt.prompt(context, instruction)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("language", ["python", "js", "java"])
def test_every_problem_shows_what_bigcode_shows(language, variant):
    docs = _docs(language)
    for problem in load_benchmark(
        "humanevalfix", str(HUMANEVALPACK), languages=[language], variant=variant
    ).problems:
        doc = docs[problem.id]
        assert (problem.shown, problem.instructions[language]) == bigcode_context_and_instruction(
            doc, variant
        )
        assert problem.tests == doc["test"]  # as given: it already calls its checks, once


def test_python_tests_call_check_once_and_other_languages_their_own_runner():
    for language in ("python", "js", "cpp", "java"):
        for doc in _docs(language).values():
            if language == "python":
                calls = [line for line in doc["test"].splitlines() if line.startswith("check(")]
                assert calls == [f"check({doc['entry_point']})"] and doc["test"].rstrip().endswith(calls[0])
            elif language == "js":
                assert doc["test"].rstrip().endswith("()")  # e.g. testStrlen()
            else:
                assert "main(" in doc["test"]


def _execute(tmp_path: Path, language: str, variant: str, codes: dict[str, str]) -> dict[str, str]:
    """Execute hand-written samples (stage=execute); {problem: status}."""
    out = Path(tempfile.mkdtemp(prefix=f"{language}-{variant}-", dir=tmp_path))
    with (out / "samples.jsonl").open("w") as fh:
        for problem, code in codes.items():
            record = {"type": "sample", "problem": problem, "split": language, "index": 0}
            fh.write(json.dumps({**record, "prompt": "", "completion": code, "code": code}) + "\n")
    run_eval(
        [
            "benchmark=humanevalfix",
            f"benchmark.path={HUMANEVALPACK}",
            f"benchmark.languages=[{language}]",
            f"benchmark.variant={variant}",
            "model=identity",
            "gen.n=1",
            "score.excess_code=false",
            f"out={out}",
        ],
        stages=("execute",),
    )
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {r["problem"]: r["status"] for r in records if r["type"] == "execution"}


def test_the_import_helper_runs_before_the_program_and_echoed_tests_run_once(tmp_path):
    py = {p.id: p for p in load_benchmark("humanevalfix", str(HUMANEVALPACK), languages=["python"]).problems}
    strlen = py["Python/23"]
    uses_helper = "def strlen(string: str) -> int:\n    return int(math.floor(len(string)))\n"
    calls = strlen.tests.count("strlen(")  # calls in one run of the tests
    counted = (
        strlen.after + f"_inner, _calls = strlen, []\n\ndef strlen(s):\n    _calls.append(s)\n"
        f"    assert len(_calls) <= {calls}, 'the tests ran twice'\n    return _inner(s)\n"
    )
    status = _execute(
        tmp_path,
        "python",
        "fixtests",
        {
            "Python/23": strlen.program(uses_helper),  # math comes from bigcode's helper
            "Python/53": py["Python/53"].program(py["Python/53"].after),
            "Python/0": py["Python/0"].program(py["Python/0"].after + "\n" + py["Python/0"].tests),  # echoed
        },
    )
    assert status == {"Python/23": "passed", "Python/53": "passed", "Python/0": "passed"}
    assert _execute(tmp_path, "python", "fix", {"Python/23": counted}) == {"Python/23": "passed"}
    assert _execute(tmp_path, "python", "fixdocs", {"Python/23": counted.replace("<=", "<")}) == {
        "Python/23": "failed"
    }
    js = {p.id: p for p in load_benchmark("humanevalfix", str(HUMANEVALPACK), languages=["js"]).problems}
    echo = js["JavaScript/23"].after + "\n" + js["JavaScript/23"].tests  # a model that repeats what it saw
    assert js["JavaScript/23"].program(echo) == js["JavaScript/23"].after + "\n"
    assert _execute(tmp_path, "js", "fixtests", {"JavaScript/23": js["JavaScript/23"].program(echo)}) == {
        "JavaScript/23": "passed"
    }
    assert _execute(tmp_path, "js", "fix", {"JavaScript/23": echo}) == {"JavaScript/23": "failed"}


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("language", ["python", "js"])
def test_reference_passes_all_164_and_identity_fails_all(tmp_path, language, variant):
    from eval.languages import available_languages

    if language not in available_languages():
        pytest.skip(f"no toolchain for {language}")
    common = [
        "benchmark=humanevalfix",
        f"benchmark.path={HUMANEVALPACK}",
        f"benchmark.languages=[{language}]",
        f"benchmark.variant={variant}",
        "gen.n=1",
        "score.excess_code=false",
        "sandbox.limits.timeout_s=5",
    ]
    ref = run_eval([*common, "model=reference", f"out={tmp_path}/ref"])["metrics"][language]
    ident = run_eval([*common, "model=identity", f"out={tmp_path}/id"])["metrics"][language]
    assert (ref["problems"], ref["pass@1"], ref["statuses"]) == (164, 1.0, {"passed": 164})
    assert (ident["problems"], ident["pass@1"]) == (164, 0.0)
    if language == "python":
        assert ident["statuses"].get("timeout", 0) == 3  # three buggy programs never end
