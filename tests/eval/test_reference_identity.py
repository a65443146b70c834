"""Pins what `python -m eval.run` gives for `model=reference` and `model=identity` on every benchmark
kind: metrics and per_problem.json equal those stored in data/reference_identity/expected.json,
made by data/reference_identity/make_expected.py with the code before the evaluation refactor.
A case that fails names what changed; regenerate the expectations only for an intended change."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from test_novel_tasks import python  # noqa: F401  (fixture: the interpreter with the novlib library)

DATA = Path(__file__).resolve().parent / "data" / "reference_identity"
_spec = importlib.util.spec_from_file_location("reference_identity_make_expected", DATA / "make_expected.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
EXPECTED: dict[str, dict[str, Any]] = json.loads((DATA / "expected.json").read_text())
TOOLCHAINS = {"js": "node", "cpp": "g++", "java": "javac"}


@pytest.fixture(scope="module")
def novelapi(tmp_path_factory, python) -> Path:  # noqa: F811
    return make.novelapi_folder(tmp_path_factory.mktemp("novelapi"), python)


def differences(got: Any, want: Any, where: str = "") -> list[str]:
    """Where `got` and `want` differ, as 'path: got != want' lines (the first few suffice)."""
    if isinstance(got, dict) and isinstance(want, dict):
        return [
            line
            for key in sorted(set(got) | set(want), key=str)
            for line in (
                differences(got.get(key, "<missing>"), want.get(key, "<missing>"), f"{where}.{key}")
                if key in got and key in want
                else [f"{where}.{key}: {got.get(key, '<missing>')!r} != {want.get(key, '<missing>')!r}"]
            )
        ]
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return [
            line
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for line in differences(g, w, f"{where}[{i}]")
        ]
    same_type = type(got) is type(want) or {type(got), type(want)} <= {int, float}
    return [] if got == want and same_type else [f"{where}: {got!r} != {want!r}"]


@pytest.mark.parametrize("case", list(EXPECTED))
def test_reference_and_identity_results_are_unchanged(case, tmp_path, request):
    expected = EXPECTED[case]
    language = case.split("-")[1] if case.startswith("humanevalfix-") else "python"
    if language in TOOLCHAINS and shutil.which(TOOLCHAINS[language]) is None:
        pytest.skip(f"no {TOOLCHAINS[language]} for humanevalfix {language}")
    uses_novelapi = any("{novelapi}" in o for o in expected["overrides"])
    folder = request.getfixturevalue("novelapi") if uses_novelapi else None
    got = make.run_case(expected["overrides"], tmp_path / "out", REPO, folder)
    for part in ("metrics", "per_problem"):
        diff = differences(got[part], expected[part], part)
        assert not diff, f"{case}: {len(diff)} differences, first ones:\n" + "\n".join(diff[:20])
