"""The project's own CanItEdit-format benchmark: schema, and every problem proves itself.

For each problem `after` + tests must pass and `before` + tests must fail, run as one file
(program, a newline, then the tests) the way the evaluator runs a completion. This is data
validation with a plain subprocess, not the sandbox.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.benchmarks.canitedit import FIXTURES

FIELDS = {
    "id": int,
    "name": str,
    "before": str,
    "after": str,
    "instruction_descriptive": str,
    "instruction_lazy": str,
    "tests": str,
    "taxonomy": dict,
}
CHANGE_KINDS = {"adaptive", "perfective", "corrective"}
PROBLEMS = [json.loads(line) for line in FIXTURES.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_program(program: str, tests: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "program.py"
    path.write_text(program + "\n" + tests, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-I", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )


def test_schema() -> None:
    assert len(PROBLEMS) >= 12
    for problem in PROBLEMS:
        where = problem.get("name", problem.get("id"))
        assert set(problem) == set(FIELDS), where
        for field, kind in FIELDS.items():
            assert isinstance(problem[field], kind), (where, field)
            if kind is str:
                assert problem[field].strip(), (where, field)
        assert not isinstance(problem["id"], bool), where
        taxonomy = problem["taxonomy"]
        assert set(taxonomy) == {"change_kind", "topic", "libraries"}, where
        assert taxonomy["change_kind"] in CHANGE_KINDS, where
        assert isinstance(taxonomy["topic"], str) and taxonomy["topic"], where
        assert isinstance(taxonomy["libraries"], list), where
        assert all(isinstance(lib, str) for lib in taxonomy["libraries"]), where
        assert problem["before"] != problem["after"], where
        assert problem["instruction_descriptive"] != problem["instruction_lazy"], where
        assert len(problem["instruction_lazy"]) < len(problem["instruction_descriptive"]), where


def test_ids_and_names_are_unique() -> None:
    ids = [p["id"] for p in PROBLEMS]
    names = [p["name"] for p in PROBLEMS]
    assert len(set(ids)) == len(ids)
    assert len(set(names)) == len(names)


def test_coverage_of_kinds_and_libraries() -> None:
    kinds = {p["taxonomy"]["change_kind"] for p in PROBLEMS}
    assert kinds == CHANGE_KINDS
    numpy_problems = [p for p in PROBLEMS if "numpy" in p["taxonomy"]["libraries"]]
    assert len(numpy_problems) >= 2
    for problem in numpy_problems:
        assert "import numpy" in problem["after"], problem["name"]
    assert any("class " in p["before"] for p in PROBLEMS)


@pytest.mark.parametrize("problem", PROBLEMS, ids=[p["name"] for p in PROBLEMS])
def test_after_passes_and_before_fails(problem: dict, tmp_path: Path) -> None:
    after = run_program(problem["after"], problem["tests"], tmp_path)
    assert after.returncode == 0, f"after + tests must pass:\n{after.stderr}"
    before = run_program(problem["before"], problem["tests"], tmp_path)
    assert before.returncode != 0, "before + tests must fail: the tests do not exercise the change"
    # The before code must fail on the tests' checks, not on a broken file.
    assert "SyntaxError" not in before.stderr and "IndentationError" not in before.stderr, before.stderr
