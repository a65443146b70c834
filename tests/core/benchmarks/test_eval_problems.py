"""Benchmark loading: CanItEdit schema errors name the problem and field; HumanEvalFix mapping."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from core.benchmarks import humanevalfix, load_benchmark
from core.errors import ConfigError
from core.problems import BenchmarkError
from eval.samples import SampleStore

HUMANEVALPACK = REPO / "core" / "data" / "humanevalpack"  # shipped (MIT)


def test_fixtures_load_with_two_splits():
    bench = load_benchmark("fixtures")
    assert len(bench.problems) >= 12 and bench.splits == ["descriptive", "lazy"]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: r.pop("tests"), "lacks field 'tests'"),
        (lambda r: r.update(before=3), "field 'before' must be str"),
    ],
)
def test_a_bad_canitedit_file_names_the_problem_and_field(tmp_path, change, message):
    record = json.loads((REPO / "tests" / "fixtures" / "canitedit_sample.jsonl").read_text().splitlines()[0])
    change(record)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(BenchmarkError, match=f"stack_peek.*{message}"):
        load_benchmark("canitedit", str(path))
    path.write_text("{not json\n")
    with pytest.raises(BenchmarkError, match="bad.jsonl:1"):
        load_benchmark("canitedit", str(path))


@pytest.mark.skipif(not HUMANEVALPACK.is_dir(), reason="needs core/data/humanevalpack")
def test_humanevalfix_maps_into_the_contract():
    bench = load_benchmark("humanevalfix", str(HUMANEVALPACK), languages=["python", "js"])
    assert len(bench.problems) == 328 and bench.splits == ["python", "js"]
    p = bench.problems[0]
    assert p.before.startswith(p.payload.entry_point[:0] or "from typing import List")
    assert p.tests.rstrip().endswith("check(has_close_elements)")
    assert p.instructions == {"python": "Fix bugs in has_close_elements."}
    assert p.shown == p.before + "\n" + p.tests and p.prelude.startswith("import math\n")  # fixtests
    js = bench.problems[164]
    assert js.language == "js" and js.prelude == "" and js.tests.rstrip().endswith("testHasCloseElements()")
    with pytest.raises(ConfigError, match="fixdocs"):
        load_benchmark("humanevalfix", str(HUMANEVALPACK), languages=["python"], variant="docs")


def test_humanevalfix_helpers_are_the_declared_functions_the_tests_call():
    problems = load_benchmark("humanevalfix", str(HUMANEVALPACK)).problems
    assert {p.id: p.helpers.split("(")[0] for p in problems if p.helpers} == {
        "Python/32": "import math\n\ndef poly",
        "Python/38": "def encode_cyclic",
        "Python/50": "def encode_shift",
    }
    record = {
        "declaration": "import math\n\n@cache\ndef unit(x):\n    return x\n\ndef f(x):\n",
        "canonical_solution": "    return unit(x)\n",
        "test": "def check(f):\n    assert f(1) == unit(1)\n",
        "entry_point": "f",
    }
    assert humanevalfix.test_helpers(record) == "import math\n\n@cache\ndef unit(x):\n    return x\n"
    assert (
        humanevalfix.test_helpers({**record, "test": "def check(f):\n    assert f(1) == 1  # unit\n"}) == ""
    )
    assert humanevalfix.test_helpers({**record, "declaration": "def f(x):\n"}) == ""


@pytest.mark.skipif(not HUMANEVALPACK.is_dir(), reason="needs core/data/humanevalpack")
def test_humanevalfix_import_helper_without_and_with_numpy():
    """strict (default): bigcode's helper minus its numpy lines, which no problem uses; bigcode: all 16."""
    strict = load_benchmark("humanevalfix", str(HUMANEVALPACK)).problems
    bigcode = load_benchmark("humanevalfix", str(HUMANEVALPACK), import_helper="bigcode").problems
    assert "numpy" not in strict[0].prelude and len(strict[0].prelude.splitlines()) == 14
    assert bigcode[0].prelude.splitlines()[11:13] == ["import numpy", "import numpy as np"]
    assert not any("np." in p.after + p.tests or "numpy" in p.after + p.tests for p in strict)
    with pytest.raises(ConfigError, match="import_helper"):
        load_benchmark("humanevalfix", str(HUMANEVALPACK), import_helper="none")


def test_a_torn_last_line_is_dropped_on_resume(tmp_path):
    store = SampleStore(tmp_path / "s.jsonl")
    store.append({"type": "sample", "problem": "a", "split": "x", "index": 0, "code": "1"})
    store.close()
    with (tmp_path / "s.jsonl").open("a") as fh:
        fh.write('{"type": "sample", "problem": "a", "spl')
    again = SampleStore(tmp_path / "s.jsonl")
    assert again.count("a", "x") == 1
    again.append({"type": "sample", "problem": "a", "split": "x", "index": 1, "code": "2"})
    again.close()
    assert SampleStore(tmp_path / "s.jsonl").count("a", "x") == 2
