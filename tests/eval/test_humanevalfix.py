"""HumanEvalFix as bigcode-evaluation-harness runs it: the prompt of each variant, the import
helper, Go's and Rust's program assembly, tests that run once, and reference/identity over all
164 Python, JS, Go and Rust problems."""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from test_eval_run import HUMANEVALPACK, run_eval

from core.benchmarks import load_benchmark
from core.benchmarks.humanevalfix import GoPayload, RustPayload
from core.formats import FORMATS
from core.problems import Problem
from core.sandbox import SandboxLimits, make_sandbox
from eval.execute import program_verdicts
from eval.generate import build_requests
from eval.languages import unavailable
from eval.toolchains import sandbox_paths

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
    if doc["task_id"].startswith("Rust/") and variant != "fixdocs":  # get_prompt_base's Rust case
        prompt_base = "fn main(){}\n" + prompt_base
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


# bigcode's standard task (fixtests) for Go/23 and Rust/23 (strlen), written out in full: Go shows
# no import nor test setup, Rust starts with the `fn main(){}` of get_prompt_base.
PINNED_FIXTESTS = {
    "Go/23": (
        "## Code Before:\n"
        "\n"
        "func Strlen(str string) int {\n"
        "    return len(str) - 1\n"
        "}\n"
        "\n"
        "\n"
        "func TestStrlen(t *testing.T) {\n"
        "    assert := assert.New(t)\n"
        '    assert.Equal(0, Strlen(""))\n'
        '    assert.Equal(1, Strlen("x"))\n'
        '    assert.Equal(9, Strlen("asdasnakj"))\n'
        "}\n"
        "\n"
        "## Instruction:\n"
        "Fix bugs in Strlen.\n"
        "## Code After:\n"
    ),
    "Rust/23": (
        "## Code Before:\n"
        "fn main(){}\n"
        "\n"
        "use std::{slice::Iter, cmp::{max, self}, mem::replace, collections::{HashSet, HashMap}, ops::Index, "
        "ascii::AsciiExt};\n"
        "use rand::Rng;\n"
        "use regex::Regex;\n"
        "use md5;\n"
        "use std::any::{Any, TypeId};\n"
        "\n"
        "fn strlen(strings:String) -> i32{\n"
        "\n"
        "\n"
        "    return strings.len() as i32 - 1;\n"
        "}\n"
        "\n"
        "\n"
        "#[cfg(test)]\n"
        "mod tests {\n"
        "    use super::*;\n"
        "\n"
        " #[test]\n"
        "    fn test_strlen() {\n"
        '        assert!(strlen("".to_string()) == 0);\n'
        '        assert!(strlen("x".to_string()) == 1);\n'
        '        assert!(strlen("asdasnakj".to_string()) == 9);\n'
        "    }\n"
        "\n"
        "}\n"
        "\n"
        "## Instruction:\n"
        "Fix bugs in strlen.\n"
        "## Code After:\n"
    ),
}


@pytest.mark.parametrize("pid", list(PINNED_FIXTESTS))
def test_the_go_and_rust_prompts_are_bigcodes(pid):
    language = pid.split("/")[0].lower()
    fmt = FORMATS["editcoder"]
    problems = {
        p.id: p for p in load_benchmark("humanevalfix", str(HUMANEVALPACK), languages=[language]).problems
    }
    [request] = build_requests([problems[pid]], [language], fmt)
    assert request.prompt == PINNED_FIXTESTS[pid]
    context, instruction = bigcode_context_and_instruction(_docs(language)[pid], "fixtests")
    assert request.prompt == fmt.prompt(context, instruction)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("language", ["python", "js", "java", "go", "rust"])
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
    for language in ("python", "js", "cpp", "java", "go", "rust"):
        for doc in _docs(language).values():
            if language == "python":
                calls = [line for line in doc["test"].splitlines() if line.startswith("check(")]
                assert calls == [f"check({doc['entry_point']})"] and doc["test"].rstrip().endswith(calls[0])
            elif language == "js":
                assert doc["test"].rstrip().endswith("()")  # e.g. testStrlen()
            elif language == "go":  # go test runs each Test function once
                assert doc["test"].count("(t *testing.T)") == 1
            elif language == "rust":  # cargo test runs each #[test] once
                assert doc["test"].count("#[test]") == 1
            else:
                assert "main(" in doc["test"]


GO_SETUP = (
    'package main\n\nimport (\n    "testing"\n    "math"\n    "github.com/stretchr/testify/assert"\n)\n'
)


def test_go_programs_are_assembled_as_bigcodes_process_results_assembles_them():
    code = (
        'package main\nimport (\n    "math"\n)\n'
        "func F(s string) float64 {\n"
        "    // sort.Strings is no use here\n"
        "    return math.Sqrt(float64(len(strings.TrimSpace(s)) + rand.Intn(1)))\n"
        "}\n"
    )
    tests = 'func TestF(t *testing.T) {\n    assert.New(t).Equal("2", fmt.Sprint(F("four")))\n}\n'
    assert GoPayload("F", "fixtests", GO_SETUP).assemble(code, tests) == (
        # the setup without the "math" the completion imports; the helper packages the file uses
        # (a comment's `sort.` does not count), rand by its path where bigcode writes "rand"
        'package main\n\nimport (\n    "testing"\n    \n    "github.com/stretchr/testify/assert"\n)\n\n'
        'import (\n    "strings"\n    "fmt"\n    "math/rand"\n)\n'
        '\nimport (\n    "math"\n)\nfunc F(s string) float64 {\n'  # its own `package main` dropped
        "    // sort.Strings is no use here\n"
        "    return math.Sqrt(float64(len(strings.TrimSpace(s)) + rand.Intn(1)))\n"
        "}\n"
    )


def test_rust_programs_get_the_declaration_lines_they_lack_as_bigcode_adds_them():
    declaration = "\nuse rand::Rng;\nuse md5;\n\nfn strlen(strings:String) -> i32{\n"
    payload = RustPayload("strlen", "fixtests", declaration)
    body = "fn strlen(s: String) -> i32 {\n    s.len() as i32\n}\n"
    # no main, no uses: both added; the function is there (by name), so its signature is not
    assert payload.assemble(body, "") == "fn main(){}\nuse rand::Rng;\nuse md5;\n" + body
    twice = "fn main(){}\nuse rand::Rng;\nuse md5;\n" + body + "fn main() {}\nfn other() {}\n"
    assert (
        payload.assemble(twice, "") == "fn main(){}\nuse rand::Rng;\nuse md5;\n" + body
    )  # cut at a 2nd main
    assert (
        payload.assemble("use md5;\n", "")
        == "fn main(){}\nuse rand::Rng;\nfn strlen(strings:String) -> i32{\nuse md5;\n"
    )


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


def _skip_without(language: str) -> None:
    why = unavailable(language)
    if why is not None:
        pytest.skip(f"HumanEvalFix {language} cannot run here: {why}")


def test_go_completions_run_with_the_imports_bigcode_adds(tmp_path):
    _skip_without("go")
    go = {p.id: p for p in load_benchmark("humanevalfix", str(HUMANEVALPACK), languages=["go"]).problems}
    doc = _docs("go")["Go/0"]
    bare = doc["declaration"] + doc["canonical_solution"]  # math.Abs, no import: the helper's "math"
    wrong = bare.replace("math.Abs", "math.Floor")
    status = _execute(
        tmp_path,
        "go",
        "fixtests",
        {"Go/0": go["Go/0"].program(bare), "Go/53": go["Go/53"].program(go["Go/53"].after)},
    )
    assert status == {"Go/0": "passed", "Go/53": "passed"}
    assert _execute(tmp_path, "go", "fix", {"Go/0": go["Go/0"].program(wrong)}) == {"Go/0": "failed"}
    unused = go["Go/0"].program('import (\n    "sort"\n)\n' + bare)  # Go refuses an unused import
    assert _execute(tmp_path, "go", "fix", {"Go/0": unused}) == {"Go/0": "failed"}


def test_rust_completions_run_with_rand_04_and_the_declaration_bigcode_adds(tmp_path):
    _skip_without("rust")
    rust = {p.id: p for p in load_benchmark("humanevalfix", str(HUMANEVALPACK), languages=["rust"]).problems}
    add = _docs("rust")["Rust/53"]  # its test draws with rand::thread_rng() and Rng::gen
    bare = "fn add(x:i32, y:i32) -> i32{" + add["canonical_solution"]  # no main, no `use rand::Rng;`
    status = _execute(
        tmp_path,
        "rust",
        "fixtests",
        {
            "Rust/53": rust["Rust/53"].program(bare),
            "Rust/32": rust["Rust/32"].program(rust["Rust/32"].after),  # rand 0.4's gen_range(low, high)
            "Rust/162": rust["Rust/162"].program(rust["Rust/162"].after),  # md5
            "Rust/91": rust["Rust/91"].program(rust["Rust/91"].after),  # regex
        },
    )
    assert status == {"Rust/53": "passed", "Rust/32": "passed", "Rust/162": "passed", "Rust/91": "passed"}
    # right if additions wrapped; cargo test's dev profile checks overflow, and so do these runs
    overflow = bare.replace("return x + y", "return x + i32::MAX + 1 + y - i32::MAX - 1")
    assert _execute(tmp_path, "rust", "fix", {"Rust/53": rust["Rust/53"].program(overflow)}) == {
        "Rust/53": "failed"
    }


# A string literal (kept) or a comment (dropped) in Go or Rust source.
_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|`[^`]*`|//[^\n]*|/\*.*?\*/', re.S)
# The comments that change what Go compiles; HumanEvalPack has none, so comments never matter.
_DIRECTIVE = re.compile(r"^\s*//(?:go:|line |export | \+build)", re.M)


def without_comments(code: str) -> str:
    """``code`` without comments, blank lines and indentation: what the compiler sees of it."""
    code = _TOKENS.sub(lambda m: "" if m.group().startswith("/") else m.group(), code)
    return "\n".join(line.strip() for line in code.split("\n") if line.strip())


@pytest.mark.slow
@pytest.mark.parametrize("language", ["go", "rust"])
def test_go_and_rust_reference_passes_all_164_and_identity_fails_all_in_every_variant(language):
    """Every variant's reference and unedited programs through the verdicts `eval.run` gives them. A
    program is compiled and run once for all the variants that show it: fix and fixtests the same
    code, fixdocs the same save its docstring (programs equal but for comments, blank lines and
    indentation count as one)."""
    _skip_without(language)
    programs: dict[tuple[str, str], tuple[Problem, str]] = {}
    cases = []
    for variant in VARIANTS:
        for p in load_benchmark(
            "humanevalfix", str(HUMANEVALPACK), languages=[language], variant=variant
        ).problems:
            for side in ("after", "before"):
                program = p.program(getattr(p, side))
                assert not _DIRECTIVE.search(program), (p.id, variant)
                key = (without_comments(program), p.tests)
                programs.setdefault(key, (p, program))
                cases.append((variant, side, key))
    keys = list(programs)
    with make_sandbox(read_only=sandbox_paths()) as sandbox:
        verdicts = program_verdicts([programs[k] for k in keys], sandbox, SandboxLimits(timeout_s=5), 200_000)
    status = {k: v["status"] for k, v in zip(keys, verdicts, strict=True)}
    for variant in VARIANTS:
        reference = Counter(status[k] for v, side, k in cases if (v, side) == (variant, "after"))
        identity = Counter(status[k] for v, side, k in cases if (v, side) == (variant, "before"))
        assert reference == {"passed": 164}, (variant, reference)
        assert identity["passed"] == 0 and identity.total() == 164, (variant, identity)
    # each problem's reference and unedited code once; Go's twice where its docstring prompt
    # imports in another order than bigcode's added imports, or holds the helper elsewhere
    assert len(keys) == {"go": 2 * 164 + 45, "rust": 2 * 164}[language]


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
    # every pass judged by a process that ran none of the program (JavaScript: where Landlock is)
    from core.sandbox.native import landlock_abi

    if language == "python" or landlock_abi() >= 1:
        assert ref["passes_by_mode"] == {"split": 164}, ref["passes_by_mode"]
    if language == "python":
        assert ident["statuses"].get("timeout", 0) == 3  # three buggy programs never end
