"""CanItEdit problems that import what its execution image installs (the `[eval]` extra) pass
with `model=reference` and fail with `model=identity`, through the command line: flask's, z3's and
scikit-learn's split (their values cross as plain data, so ctypes and numpy in the program decide
nothing: verified), autograd's in process in the declared unverified mode (its tests use inspect),
which the report counts apart."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "canitedit_deps.jsonl"
MODULES = ("z3", "sklearn", "flask", "autograd", "numpy")
MISSING = [m for m in MODULES if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(bool(MISSING), reason=f"not importable: {MISSING}; pip install -e '.[eval]'")
@pytest.mark.parametrize("model, expected", [("reference", 1.0), ("identity", 0.0)])
def test_problems_needing_canitedits_packages_check_themselves(tmp_path, model, expected):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eval.run",
            "benchmark=canitedit",
            f"benchmark.path={FIXTURE}",
            f"model={model}",
            "gen.n=1",
            "score.excess_code=false",
            f"out={tmp_path}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "results.json").read_text())["metrics"]
    assert {split: m["pass@1"] for split, m in metrics.items()} == {"descriptive": expected, "lazy": expected}
    assert all(m["problems"] == 4 for m in metrics.values())
    if model == "reference":
        # z3 and scikit-learn run split (their values cross as data: verified); autograd's tests read a
        # signature with inspect, so that problem runs in process, in the declared unverified mode
        assert all(m["statuses"] == {"passed": 3, "passed_unverified": 1} for m in metrics.values()), metrics
    records = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    unverified = {
        r["problem"] for r in records if r["type"] == "execution" and r["status"] == "passed_unverified"
    }
    if model == "reference":
        names = {
            str(json.loads(line)["id"]): json.loads(line)["name"] for line in FIXTURE.read_text().splitlines()
        }
        assert {names[p] for p in unverified} == {"autograd_newton_step"}
        modes = {names[r["problem"]]: r["mode"] for r in records if r["type"] == "execution"}
        assert modes == {
            "z3_two_sums": "split",
            "sklearn_line_intercept": "split",
            "autograd_newton_step": "in_process",
            **{
                n: "split"
                for n in names.values()
                if n not in ("z3_two_sums", "sklearn_line_intercept", "autograd_newton_step")
            },
        }
