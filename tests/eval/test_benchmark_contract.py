"""The benchmark contract: a kind registered from outside runs through `eval.run` end to end; the
runner names no kind; a run killed during execution of any kind resumes to identical results."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, install_plugin
from test_novel_tasks import python  # noqa: F401  (fixture: the interpreter with the novlib library)
from test_reference_identity import EXPECTED, make

from core.benchmarks.options import BenchmarkOptions
from core.errors import ConfigError
from core.problems import Problem
from eval.benchmarks import BenchmarkKind, register
from eval.benchmarks.base import ExecContext, Job, ScoreContext, Scored
from eval.run import APP

# ----------------------------------------------------------------------------- a kind from a test file


@dataclass
class ToyOptions(BenchmarkOptions):
    name: str = "toy"
    size: int = 3  # problems: return i + 1 for i < size


@dataclass(frozen=True)
class ToyPayload:
    answer: int


class Toy(BenchmarkKind):
    """Problems 'return <i + 1>'; a sample passes when the sandbox prints its payload's answer."""

    name = "toy"
    options = ToyOptions

    def load(self, options: ToyOptions) -> list[Problem]:
        return [
            Problem(
                id=f"toy{i}",
                name=f"toy {i}",
                before=f"def f():\n    return {i}\n",
                after=f"def f():\n    return {i + 1}\n",
                tests="print(f())\n",
                instructions={"inc": "return one more"},
                payload=ToyPayload(i + 1),
            )
            for i in range(options.size)
        ]

    def check(self, options: ToyOptions, key: str = "benchmark") -> None:
        if options.size < 1:
            raise ConfigError(f"{key}.size must be >= 1")

    def execute(self, jobs: list[Job], ctx: ExecContext) -> list[dict[str, Any]]:
        results = ctx.sandbox.run_many([(j.code, j.problem.tests) for j in jobs], limits=ctx.limits)
        return [
            {"status": r.status, "passed": r.stdout.strip() == str(j.problem.payload.answer)}
            for j, r in zip(jobs, results, strict=True)
        ]

    def score(self, ctx: ScoreContext) -> Scored:
        executions = ctx.store.of_type("execution")
        per = {pid: [executions[k]["passed"] for k in executions if k[0] == pid] for pid in ctx.problems}
        solved = sum(all(v) and bool(v) for v in per.values())
        return {
            "metrics": {"inc": {"solved": solved / len(per)}},
            "per_problem": [{"problem": p} for p in per],
        }

    def report(self, model: str, scored: Scored, ctx: ScoreContext) -> str:
        return f"# toy: {model}\n\nsolved {scored['metrics']['inc']['solved']:.2f}\n"


register(Toy())


def run_eval_app(argv: list[str]) -> None:
    from core.entry import run_app

    run_app(APP, argv)


@pytest.mark.parametrize("model, solved", [("reference", 1.0), ("identity", 0.0)])
def test_a_kind_registered_from_a_test_file_runs_through_eval_run(model, solved, tmp_path, capsys):
    out = tmp_path / "out"
    run_eval_app(["benchmark=toy", "benchmark.size=4", f"model={model}", "gen.n=2", f"out={out}"])
    results = json.loads((out / "results.json").read_text())
    assert results["benchmark"] == "toy" and results["metrics"] == {"inc": {"solved": solved}}
    assert (out / "report.md").read_text() == f"# toy: {model}\n\nsolved {solved:.2f}\n"
    assert f"solved {solved:.2f}" in capsys.readouterr().out
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert sum(r["type"] == "execution" for r in records) == 8


def test_a_kind_option_of_another_kind_is_an_unknown_key(tmp_path):
    with pytest.raises(SystemExit) as stop:
        run_eval_app(["benchmark=toy", "+benchmark.languages=[js]", f"out={tmp_path / 'out'}"])
    assert stop.value.code == 2
    with pytest.raises(SystemExit):
        run_eval_app(["benchmark=toy", "benchmark.size=0", "model=reference", f"out={tmp_path / 'out'}"])
    assert not (tmp_path / "out").exists()  # stopped before anything was written


def test_the_runner_names_no_benchmark():
    kinds = re.compile(r"apiupdate|novelapi|editbench|humanevalfix|canitedit")
    for file in ("eval/evaluation.py", "eval/run.py"):
        assert not kinds.search((REPO / file).read_text()), file


# ----------------------------------------------------------------------------- kill -9, then resume
# Each with at least three chunks of samples (64 each; two are worked on at once), so the kill lands
# while chunks remain; samples that run (EDIT-Bench's reference is empty: its samples would fail
# without running, all at once).
KILL_CASES = {
    "fixtures-reference": ["gen.n=6"],  # 168 samples
    "canitedit-reference": ["gen.n=40"],  # 160
    "humanevalfix-python-fixtests-reference": ["gen.n=6", "benchmark.limit=40"],  # 240
    "editbench-identity": ["gen.n=40"],  # 200
    "apiupdate-reference": ["gen.n=5"],  # 260
    "novelapi-reference": ["gen.n=12"],  # 216
}


def _eval(overrides: list[str], out: Path) -> subprocess.Popen:
    env = {**os.environ, **make.OFFLINE, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-m", "eval.run", *overrides, f"out={out}"]
    return subprocess.Popen(
        args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def _executions(out: Path) -> int:
    path = out / "samples.jsonl"
    return path.read_text().count('"type": "execution"') if path.is_file() else 0


@pytest.mark.slow
@pytest.mark.parametrize("case", KILL_CASES)
def test_kill_during_execution_then_resume_gives_identical_results(case, tmp_path, python):  # noqa: F811
    folder = make.novelapi_folder(tmp_path / "novelapi", python) if case.startswith("novelapi") else None
    stored = make.resolve(EXPECTED[case]["overrides"], folder)
    overrides = [o for o in stored if not o.startswith(("gen.n=", "benchmark.limit="))]
    overrides += [*KILL_CASES[case], "score.ks=[1,2]"]
    out = tmp_path / "killed"
    assert _eval([*overrides, "stage=generate"], out).wait(timeout=300) == 0
    proc = _eval([*overrides, "stage=execute"], out)
    deadline = time.monotonic() + 300
    while _executions(out) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert _executions(out) < len(json.loads("[" + ",".join(_samples(out)) + "]"))  # killed mid-way
    assert _eval(overrides, out).wait(timeout=600) == 0
    whole = tmp_path / "whole"
    assert _eval(overrides, whole).wait(timeout=600) == 0
    for name in ("results.json", "per_problem.json"):
        got, want = (make.strip(json.loads((o / name).read_text())) for o in (out, whole))
        if name == "results.json":
            got, want = got["metrics"], want["metrics"]
        assert got == want, name


def _samples(out: Path) -> list[str]:
    return [line for line in (out / "samples.jsonl").read_text().splitlines() if '"type": "sample"' in line]


PLUGIN = """
from dataclasses import dataclass

from core.benchmarks.options import BenchmarkOptions
from core.problems import Problem
from eval.benchmarks import BenchmarkKind


@dataclass
class PluggedOptions(BenchmarkOptions):
    name: str = "plugged"


class Plugged(BenchmarkKind):
    name = "plugged"
    options = PluggedOptions

    def load(self, options):
        return [Problem("p", "p", "x = 1\\n", "x = 2\\n", "assert x == 2\\n", {"only": "set x to 2"})]

    def execute(self, jobs, ctx):
        results = ctx.sandbox.run_many([(j.code, j.problem.tests) for j in jobs], limits=ctx.limits)
        return [{"status": r.status, "passed": r.passed} for r in results]

    def score(self, ctx):
        passed = [e["passed"] for e in ctx.store.of_type("execution").values()]
        return {"metrics": {"only": {"passed": sum(passed)}}, "per_problem": []}

    def report(self, model, scored, ctx):
        return f"plugged {scored['metrics']['only']['passed']}\\n"


KIND = Plugged()
"""


def _install_plugin(tmp_path: Path) -> Path:
    """A site folder holding an installed package that declares the `plugged` kind: one module."""
    return install_plugin(
        tmp_path, "plugged_bench", PLUGIN, "[editforge.benchmarks]\nplugged = plugged_bench:KIND\n"
    )


def test_an_installed_package_declares_a_kind_by_entry_point(tmp_path):
    site = _install_plugin(tmp_path)
    env = {**os.environ, **make.OFFLINE, "PYTHONPATH": f"{site}{os.pathsep}{REPO}"}
    out = tmp_path / "out"
    args = [sys.executable, "-m", "eval.run", "benchmark=plugged", "model=reference", "gen.n=3", f"out={out}"]
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "plugged 3" in done.stdout
    assert json.loads((out / "results.json").read_text())["metrics"] == {"only": {"passed": 3}}


def test_decontamination_reads_the_kinds_installed_packages_declare(tmp_path, monkeypatch):
    """One registry: the kind a plugin declares is one that decontamination reads (and evaluation
    runs), by the same name and with the same loader."""
    import core.benchmarks
    from data_pipeline.config import DecontamOptions, DedupOptions
    from data_pipeline.decontam import BenchmarkIndex, load_benchmarks
    from eval.benchmarks import get_kind

    monkeypatch.syspath_prepend(str(_install_plugin(tmp_path)))
    monkeypatch.setattr(core.benchmarks.PLUGINS, "done", False)
    try:
        with pytest.raises(ConfigError, match="choose one of"):
            core.benchmarks.options_from({"name": "unplugged"}, "decontam.benchmarks")
        (bench,) = load_benchmarks([{"name": "plugged"}])
        assert (bench.programs(), bench.instructions()) == (["x = 1\n", "x = 2\n"], ["set x to 2"])
        index = BenchmarkIndex([bench], DecontamOptions(benchmarks=[{"name": "plugged"}]), DedupOptions())
        assert index.instructions == {"set x to 2": bench.name}
        kind = core.benchmarks.KINDS["plugged"]
        assert get_kind("plugged") is kind.evaluation and kind.load == kind.evaluation.load
    finally:
        core.benchmarks.KINDS.pop("plugged", None)
