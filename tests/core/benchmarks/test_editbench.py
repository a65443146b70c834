"""EDIT-Bench loader: the hub schema mapped into `Problem`, runnability reported per row, clear errors."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import core.benchmarks.editbench as editbench
from core.benchmarks.editbench import (
    imported_modules,
    load_editbench,
    problem_from_editbench,
    requirement_names,
)
from core.problems import BenchmarkError

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "tests" / "fixtures" / "editbench_sample.jsonl"
PYTEST_REASON = "pytest suite: the harness writes original_code.py, the edit as implementation1.py"


def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


def by_id() -> dict[str, Any]:
    return {p.id: p for p in load_editbench(str(FIXTURE))}


def write(tmp_path: Path, records: list[dict[str, Any]]) -> str:
    path = tmp_path / "editbench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_python_row_maps_every_field():
    raw = rows()[2]
    p = by_id()["3"]
    assert (p.id, p.name, p.language) == ("3", "editbench_3", "python")
    assert p.before == raw["original_code"]
    assert p.after == ""  # no reference solution in EDIT-Bench
    assert p.tests == raw["test_code"]
    assert p.instructions == {"instruction": "handle a constant grid (all values equal) by returning zeros"}
    assert (p.shown_tests, p.prelude) == ("", "")
    assert p.taxonomy == {
        "programming_language": "python",
        "natural_language": None,
        "pair_id": "c2b9d8f4-7a16-4c0e-8e3d-5f9a1b6c2d47",
    }
    harness = {
        "conftest.py": raw["test_harness"]["conftest.py"],
        "test_utils.py": raw["test_harness"]["test_utils.py"],
    }
    payload = p.payload
    assert payload.highlighted_code == raw["highlighted_code"]
    assert payload.cursor_position == "6:5"
    assert (payload.requirements, payload.python_version) == ("numpy\npytest\n", "3.12")
    assert payload.test_harness == harness  # nulls (columns other rows fill) dropped
    assert payload.files == {
        "original_code.py": raw["original_code"],
        "test_code.py": raw["test_code"],
        "requirements.txt": "numpy\npytest\n",
        **harness,
    }
    assert payload.implementation_file == "implementation1.py"
    assert payload.test_command == ("python", "-m", "pytest", "test_code.py", "-v", "-s")


def test_javascript_row_maps_package_json_and_other_files():
    raw = rows()[3]
    p = by_id()["4"]
    assert (p.language, p.taxonomy["programming_language"]) == ("js", "javascript")
    assert (p.before, p.tests, p.after) == (raw["original_code"], raw["test_code"], "")
    assert p.payload.test_harness == {
        "package.json": raw["test_harness"]["package.json"],
        "jest.config.js": "module.exports = { testEnvironment: 'node' };\n",
    }
    assert (p.payload.requirements, p.payload.python_version) == ("", None)
    assert p.payload.files == {
        "original_code.js": raw["original_code"],
        "tests/test_code.test.js": raw["test_code"],
        "package.json": raw["test_harness"]["package.json"],
        "jest.config.js": raw["test_harness"]["jest.config.js"],
    }
    assert p.payload.implementation_file == "implementation1.js"
    assert p.payload.test_command == ("sh", "-c", "npm install && npm test")


def test_translation_keeps_its_instruction_and_pair():
    problems = by_id()
    assert list(problems) == ["1", "2", "3", "4", "112"]
    spanish, english = problems["112"], problems["1"]
    assert spanish.instructions == {"instruction": "devuelve 0 para una lista vacía en lugar de fallar"}
    assert spanish.taxonomy["pair_id"] == english.taxonomy["pair_id"]
    assert (spanish.before, spanish.tests) == (english.before, english.tests)


def test_natural_language_column_when_present():
    row = {**rows()[4], "natural_language": "spanish"}
    assert problem_from_editbench(row, "row").taxonomy["natural_language"] == "spanish"


def test_runnability_reasons_per_row():
    problems = by_id()
    assert all(p.not_runnable for p in problems.values())
    for pid in ("1", "112"):
        (reason,) = problems[pid].not_runnable
        assert reason.startswith(PYTEST_REASON) and "(Python 3.12)" in reason
        assert problems[pid].payload.missing_packages == ()
    game = problems["2"]
    assert game.payload.missing_packages == ("pygame",)
    assert game.not_runnable[1:] == (
        "requirements not importable here: pygame",
        "imports GUI libraries (pygame): needs a display",
    )
    numpy_here = importlib.util.find_spec("numpy") is not None
    assert problems["3"].payload.missing_packages == (() if numpy_here else ("numpy",))
    assert len(problems["3"].not_runnable) == (1 if numpy_here else 2)
    js = problems["4"]
    assert js.payload.npm_packages == ("jest", "lodash")
    assert js.not_runnable[0].startswith("jest suite: the harness writes original_code.js(x)")
    assert js.not_runnable[1] == "npm dependencies need the npm registry: jest, lodash"


def test_network_imports_url_requirements_and_react():
    row = copy.deepcopy(rows()[0])
    row["original_code"] = (
        "import json, urllib.request as ur\nfrom requests import get\n" + row["original_code"]
    )
    row["requirements"] = "requests\n-e git+https://example.org/lib.git#egg=lib\n"
    reasons = problem_from_editbench(row, "row").not_runnable
    assert reasons[1:] == (
        "requirements install from URLs or VCS: -e git+https://example.org/lib.git#egg=lib",
        "imports network libraries (requests, urllib.request): may need the network, which the sandbox "
        "blocks, unless the tests mock it",
    )
    react = {**rows()[3], "programming_language": "javascript/react", "test_harness": {"package.json": None}}
    p = problem_from_editbench(react, "row")
    assert p.language == "js" and p.payload.implementation_file == "implementation1.jsx"
    assert set(p.payload.files) == {"original_code.jsx", "tests/test_code.test.js"}
    assert p.not_runnable[1] == "test_harness has no valid package.json: `npm test` has nothing to run"


def test_requirement_names_and_imports():
    text = (
        "# pinned\nNumPy==1.26.4\nscikit-learn>=1.3  # ml\npygame ; python_version >= '3.8'\n"
        "-r base.txt\n--index-url https://pypi.org/simple\nrequests[socks]\n"
        "lib @ https://example.org/lib.whl\nhttps://example.org/other.whl\nnumpy\n"
    )
    assert requirement_names(text) == ["NumPy", "scikit-learn", "pygame", "requests", "lib"]
    code = "import os, sys as system\nfrom . import local\n  from a.b import c\nx = 1  # import not_this\n"
    assert imported_modules(code) == {"os", "sys", "a.b"}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.pop("instruction"), "problem 1 lacks field 'instruction'"),
        (lambda r: r.pop("test_harness"), "problem 1 lacks field 'test_harness'"),
        (lambda r: r.update(test_code=7), "problem 1 field 'test_code' must be str, got int"),
        (lambda r: r.update(problem_id=True), "problem True field 'problem_id' must be int or str, got bool"),
        (lambda r: r.update(requirements=["pytest"]), "field 'requirements' must be str or null, got list"),
        (lambda r: r.update(programming_language="rust"), "field 'programming_language' is 'rust'"),
        (
            lambda r: r["test_harness"].update({"conftest.py": 3}),
            "'test_harness'['conftest.py'] must be str or null",
        ),
    ],
)
def test_malformed_row_names_row_and_field(tmp_path, edit, message):
    records = rows()
    edit(records[0])
    path = write(tmp_path, records)
    with pytest.raises(BenchmarkError, match=r"editbench\.jsonl:1: ") as err:
        load_editbench(path)
    assert message in str(err.value)


def test_unknown_split_is_refused():
    with pytest.raises(BenchmarkError, match="split 'train'"):
        load_editbench(str(FIXTURE), split="train")


@pytest.mark.parametrize(
    ("path", "split", "ref"),
    [
        (None, "test", "hub:copilot-arena/editbench"),
        ("hub:copilot-arena/EditBench", "complete", "hub:copilot-arena/EditBench"),
    ],
)
def test_hub_path_goes_through_load_hub_dataset(monkeypatch, path, split, ref):
    calls = []

    def fake_hub(*args):
        calls.append(args)
        return rows()

    monkeypatch.setattr(editbench, "load_hub_dataset", fake_hub)
    problems = load_editbench(path, split)
    assert calls == [(ref, None, split, "benchmark.path")]
    assert problems == load_editbench(str(FIXTURE))


def test_hub_row_error_names_split_and_index(monkeypatch):
    broken = rows()
    del broken[1]["highlighted_code"]
    monkeypatch.setattr(editbench, "load_hub_dataset", lambda *args: broken)
    with pytest.raises(
        BenchmarkError, match=r"copilot-arena/editbench:test\[1\]: problem 2 lacks field 'highlighted_code'"
    ):
        load_editbench(None)


def test_offline_hub_is_one_user_error(tmp_path):
    """A fresh interpreter (the hub switches are read at import), offline, with empty caches."""
    script = (
        "from core.benchmarks.editbench import load_editbench\n"
        "from core.errors import UserError\n"
        "try:\n"
        "    load_editbench('hub:copilot-arena/EditBench')\n"
        "except UserError as err:\n"
        "    print('USER_ERROR', err)\n"
        "    raise SystemExit(3)\n"
    )
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
        "HF_DATASETS_CACHE": str(tmp_path / "datasets"),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, done.stderr[-2000:]
    (line,) = [out for out in done.stdout.splitlines() if out.startswith("USER_ERROR")]
    assert "benchmark.path: cannot load hub dataset copilot-arena/EditBench" in line
    assert "hub is offline" in line
