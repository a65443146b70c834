"""RL tasks: every candidate is kept or counted as dropped with its reason, in the manifest."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from core.errors import ConfigError
from core.sandbox.config import SandboxConfig
from data_pipeline.config import DecontamOptions
from train.rl_tasks import TasksConfig, build_tasks

REPO_FIXTURES = "core/benchmarks/fixtures.jsonl"
IN_PROCESS = {
    "id": "mine-1",
    "name": "reads_globals",
    "before": "def f():\n    return 1\n",
    "after": "def f():\n    return 2\n",
    "instruction_descriptive": "Return 2.",
    "instruction_lazy": "Return 2.",
    "tests": "assert globals()['f']() == 2\n",  # introspects the program's namespace: in process only
}


@pytest.fixture(scope="module")
def sandbox():
    config = SandboxConfig(workers=1)
    with config.open() as pool:
        yield config, pool


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_in_process_and_contaminated_tasks_are_dropped_and_counted(sandbox, tmp_path):
    config, pool = sandbox
    copied = json.loads((REPO / REPO_FIXTURES).read_text().splitlines()[0])  # a benchmark problem, verbatim
    copied["id"] = "mine-2"
    own = _write(tmp_path / "own.jsonl", [IN_PROCESS, copied])
    tasks = TasksConfig(
        sources=[{"name": "canitedit", "path": own}],
        synthetic=8,
        splits=["descriptive"],
        decontaminate=DecontamOptions(benchmarks=[{"name": "fixtures"}]),
    )
    built = build_tasks(tasks, tmp_path, pool, config.limits)
    manifest = built.manifest
    assert manifest["dropped"] == {"contaminated_code": 1, "in_process": 1}
    assert manifest["contaminated_by_benchmark"] == {"fixtures": 1}
    assert manifest["kept"] == 8 and len(built.tasks) == 8
    assert manifest["kept"] + sum(manifest["dropped"].values()) == manifest["candidates"]
    tasks.include_in_process = True
    kept = build_tasks(tasks, tmp_path, pool, config.limits)
    assert "mine-1/descriptive" in kept.tasks and "in_process" not in kept.manifest["dropped"]


def test_two_sources_with_one_problem_id_are_refused(sandbox, tmp_path):
    config, pool = sandbox
    first = _write(tmp_path / "a.jsonl", [IN_PROCESS])
    second = _write(tmp_path / "b.jsonl", [IN_PROCESS])
    tasks = TasksConfig(
        sources=[{"name": "canitedit", "path": first}, {"name": "canitedit", "path": second}],
        decontaminate=DecontamOptions(enabled=False),
    )
    with pytest.raises(ConfigError, match="both hold problem 'mine-1'"):
        build_tasks(tasks, tmp_path, pool, config.limits)


def test_a_kind_judged_in_the_programs_process_is_left_out_unless_asked(sandbox, tmp_path):
    """API-update problems are judged by a spy inside the program's process: RL drops them by
    default; kept on request, the reference passes and the unchanged code fails, judged in_process."""
    import sys

    sys.path.append(str(REPO / "tests" / "eval"))
    from test_apiupdate_eval import _source

    from core.formats import get_format
    from eval.apiupdate.builder import BuildOptions, build, write
    from train.rl_rewards import RewardConfig, VerdictRewards

    config, pool = sandbox
    options = BuildOptions(types=("R1",), types_per_api="all", nonworkaround="none",
                           targets={"reliability": 3, "generalization": 0, "specificity": 0})  # fmt: skip
    write(build("humaneval", str(_source(tmp_path / "source.jsonl")), pool, options), tmp_path / "bench")
    source = {"name": "apiupdate", "path": str(tmp_path / "bench")}
    tasks = TasksConfig(sources=[source], decontaminate=DecontamOptions(enabled=False))
    with pytest.raises(ConfigError, match=r"no task left to train on \(dropped: \{'in_process': \d+\}\)"):
        build_tasks(tasks, tmp_path, pool, config.limits)
    tasks.include_in_process = True
    built = build_tasks(tasks, tmp_path, pool, config.limits)
    n = len(built.tasks)
    assert n >= 1 and built.manifest["kept"] == built.manifest["candidates"] == n
    fmt, ids = get_format("editcoder"), list(built.tasks)
    rewards = VerdictRewards(built.tasks, fmt, lambda python: pool, config.limits, RewardConfig())
    after = [fmt.completion(built.tasks[t].problem.after) for t in ids]
    before = [fmt.completion(built.tasks[t].problem.before) for t in ids]
    assert rewards.rewards("pass", ids, after) == [1.0] * n
    assert rewards.monitor(rewards.verdicts(ids, after))["judged/in_process"] == 1.0
    assert rewards.rewards("pass", ids, before) == [0.0] * n


# The class of route: a reward decided in the candidate's own process. Three variants of it, each
# left out of RL by default: tests that reach into the program (three static reasons), a kind that
# judges with its own spy (above: API-update), and a kind plugged in without declaring split verdicts.
REACHING_TESTS = {
    "reads-namespace": "assert globals()['f']() == 2\n",
    "imports-the-program": "from main import f\nassert f() == 2\n",
    "patches-the-program": "from unittest import mock\nassert f() == 2\nassert mock\n",
}


def test_every_problem_whose_tests_reach_into_the_program_is_in_process(sandbox, tmp_path):
    config, pool = sandbox
    rows = [{**IN_PROCESS, "id": f"reach-{name}", "tests": tests} for name, tests in REACHING_TESTS.items()]
    tasks = TasksConfig(
        sources=[{"name": "canitedit", "path": _write(tmp_path / "reach.jsonl", rows)}],
        synthetic=2,
        splits=["descriptive"],
        decontaminate=DecontamOptions(enabled=False),
    )
    built = build_tasks(tasks, tmp_path, pool, config.limits)
    assert built.manifest["dropped"] == {"in_process": 3} and len(built.tasks) == 2


def test_a_plugged_in_kind_is_in_process_unless_it_declares_split_verdicts(sandbox, tmp_path):
    from dataclasses import dataclass

    from core.benchmarks import KINDS
    from core.benchmarks.options import BenchmarkOptions
    from core.problems import Problem
    from eval.benchmarks import BenchmarkKind, register

    @dataclass
    class HomeOptions(BenchmarkOptions):
        name: str = "home-made"

    class HomeMade(BenchmarkKind):  # judges program and tests together: its own choice
        name, options = "home-made", HomeOptions

        def load(self, options):
            return [Problem("h", "h", "x = 1\n", "x = 2\n", "assert x == 2\n", {"only": "Set x to 2."})]

        def execute(self, jobs, ctx):
            results = ctx.sandbox.run_many([(j.code, j.problem.tests) for j in jobs], limits=ctx.limits)
            return [{"status": r.status, "passed": r.passed} for r in results]

        def score(self, ctx):
            return {"metrics": {}, "per_problem": []}

        def report(self, model, scored, ctx):
            return ""

    config, pool = sandbox
    register(HomeMade())
    try:
        tasks = TasksConfig(
            sources=[{"name": "home-made"}], synthetic=1, decontaminate=DecontamOptions(enabled=False)
        )
        built = build_tasks(tasks, tmp_path, pool, config.limits)
        assert built.manifest["dropped"] == {"in_process": 1} and "h/only" not in built.tasks
    finally:
        KINDS.pop("home-made")
