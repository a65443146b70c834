"""Our two ExcessCode metrics equal CanItEdit's on the same completions: the repository's
(`excess_code_repo`, pass_k.py's ExcessCode) and the paper's (`excess_code`, pass_k.py's
MeanMedianCoverage, its first version's ExcessCode).

The reference below re-implements, from their definitions, nuprl/CanItEdit's
`benchmark/evaluator_overlay.py` (`coverage run` + `coverage report -m` on the program file
with its `.coveragerc` in the working folder, "Cover" and the expanded "Missing" ranges parsed
from the report's last line) and `benchmark/pass_k.py` (`compute_excess_score` with
program_no_test cut at "### START TESTS ###\\n", per-problem means and medians, the mean over
problems). It runs the coverage CLI outside the sandbox on the project's own fixtures; ours
runs inside it. Both test styles are compared: CanItEdit's pragma block and plain asserts.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.benchmarks.canitedit import FIXTURES
from core.sandbox import make_sandbox
from core.sandbox.declared import unverified_flags
from eval.excess_code import (
    COVERAGERC,
    coverage_reports,
    excess_code,
    excess_code_repo,
    excess_code_repo_of,
)

DEAD_CODE = "\n\ndef _unused_helper(values):\n    total = 0\n\n    for v in values:\n        total += v\n    return total\n"


def upstream_coverage(program: str, workdir: Path) -> tuple[int, list[int]] | None:
    """evaluator_overlay.coverage(): (Cover percent, expanded Missing lines), None if it fails."""
    path = workdir / "program.py"
    path.write_text(program)
    data = workdir / "program.py.cov"
    cli = [sys.executable, "-m", "coverage"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # no outer coverage (pytest-cov) hooks in
    run = subprocess.run(
        [*cli, "run", "--data-file", str(data), str(path)],
        cwd=workdir,
        env=env,
        capture_output=True,
        timeout=60,
    )
    if run.returncode != 0:
        return None
    report = subprocess.run(
        [*cli, "report", "-m", "--data-file", str(data)],
        cwd=workdir,
        env=env,
        capture_output=True,
        timeout=60,
    )
    if report.returncode != 0:
        return None
    lines = report.stdout.decode().splitlines()
    row = lines[lines.index(next(line for line in lines if line.startswith("---------"))) + 1]
    parts = [s.strip("%") for s in row.split() if s]
    percent, missing = int(parts[3]), []
    if percent < 100:
        for r in " ".join(parts[4:]).split(", "):
            start, _, end = r.partition("-")
            missing.extend(range(int(start), int(end or start) + 1))
    return percent, missing


def upstream_excess_score(before: str, program: str, missing: list[int]) -> float:
    """pass_k.compute_excess_score."""
    after = program.split("### START TESTS ###\n")[0]
    return len(missing) / len(list(difflib.Differ().compare(before.splitlines(), after.splitlines())))


def pragma_style(tests: str) -> str:
    return "### START TESTS ###\nif True:  # pragma: no cover\n" + "".join(
        f"    {line}\n" if line.strip() else "\n" for line in tests.splitlines()
    )


def cases() -> list[tuple[str, str, str, list[str]]]:
    """(problem id, before, tests, passing completions) in both test styles."""
    rows = [json.loads(line) for line in FIXTURES.read_text().splitlines() if line.strip()]
    out = []
    for row in rows[:8]:
        completions = [row["after"], row["after"].rstrip("\n") + DEAD_CODE]
        out.append((f"{row['id']}/plain", row["before"], row["tests"], completions))
        out.append((f"{row['id']}/pragma", row["before"], pragma_style(row["tests"]), completions))
    return out


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Per completion: upstream's (percent, missing) and our CoverageReport."""
    workdir = tmp_path_factory.mktemp("upstream")
    (workdir / ".coveragerc").write_text(COVERAGERC)
    jobs = [(pid, before, tests, c) for pid, before, tests, comps in cases() for c in comps]
    with make_sandbox("auto", workers=2) as sandbox:
        # the numpy fixtures run in the declared unverified mode, as evaluation runs them
        unverified = unverified_flags(sandbox, [(before, tests) for _, before, tests, _ in jobs])
        ours = coverage_reports(sandbox, [(c, tests) for _, _, tests, c in jobs], unverified=unverified)
    theirs = [upstream_coverage(c + "\n" + tests, workdir) for _, _, tests, c in jobs]
    return jobs, theirs, ours


def test_every_completion_passes_both_ways(measured):
    jobs, theirs, ours = measured
    assert all(t is not None for t in theirs), "a fixture completion failed under upstream's coverage run"
    assert not [j[0] for j, o in zip(jobs, ours, strict=True) if isinstance(o, Exception)]


def test_per_completion_figures_equal_upstreams(measured):
    jobs, theirs, ours = measured
    for (pid, before, tests, completion), (percent, missing), report in zip(jobs, theirs, ours, strict=True):
        assert report.percent == percent, pid
        assert report.reported_missing == missing, pid
        expected = upstream_excess_score(before, completion + "\n" + tests, missing)
        assert excess_code_repo_of(before, completion, tests, report) == pytest.approx(expected), pid
    # The comparison is not vacuous: dead code was found, in ranges that span a blank line.
    assert any(len(m) > 3 for _, m in theirs)


def test_aggregates_equal_upstreams(measured):
    jobs, theirs, ours = measured
    ratios: dict[str, list[float]] = {}
    percents: dict[str, list[int]] = {}
    upstream_means, upstream_medians = [], []
    for pid in dict.fromkeys(j[0] for j in jobs):
        rows = [(j, t, o) for j, t, o in zip(jobs, theirs, ours, strict=True) if j[0] == pid]
        ratios[pid] = [excess_code_repo_of(j[1], j[3], j[2], o) for j, _, o in rows]
        percents[pid] = [o.percent for _, _, o in rows]
        # pass_k.for_file: mean of the excess scores, median of (100 - coverage)
        upstream_means.append(
            np.mean([upstream_excess_score(j[1], j[3] + "\n" + j[2], t[1]) for j, t, _ in rows])
        )
        upstream_medians.append(np.median([100 - t[0] for _, t, _ in rows]))
    # pass_k.main: ExcessCode = mean(median_excesscode) * 100; MeanMedianCoverage = mean(median_coverage)
    assert excess_code_repo(ratios) == pytest.approx(np.round(np.mean(upstream_means) * 100, 6), abs=1e-5)
    assert excess_code(percents) == pytest.approx(np.round(np.mean(upstream_medians), 6), abs=1e-5)
