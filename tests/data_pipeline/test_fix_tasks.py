"""pipeline=fix-tasks: bugs injected into code whose tests catch them, judged in the sandbox.

The build runs as users run it (`python -m data_pipeline.build`), on a package generated here and on
a real package's sdist from PyPI; every kept row is judged again here, independently: its buggy
module fails its tests and its original passes them, split, in the sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from fix_task_tree import write_tree

from core.sandbox import make_sandbox
from data_pipeline.config import BuildConfig, DecontamOptions, PipelineConfig, SourceConfig
from data_pipeline.fix_tasks import stage as fix_stage
from data_pipeline.fix_tasks.units import discover

BUILD = [sys.executable, "-m", "data_pipeline.build", "pipeline=fix-tasks"]
ENV = {k: v for k, v in os.environ.items() if k != "EDITFORGE_DEBUG"}
FIXTURES_ONLY = "pipeline.decontaminate.benchmarks=[{name: fixtures}, {name: humanevalfix}]"


def _build(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*BUILD, *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout)


def _tasks(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]


def assert_every_row_is_caught(out: Path) -> list[dict]:
    """Each task's buggy module fails its tests and its original passes, both split."""
    tasks = _tasks(out)
    assert tasks
    with make_sandbox(workers=2) as sandbox:
        jobs = [(code, t["tests"]) for t in tasks for code in (t["before"], t["after"])]
        results = sandbox.run_many(jobs, split=True)
    for i, task in enumerate(tasks):
        before, after = results[2 * i], results[2 * i + 1]
        assert before.status == "failed", (task["name"], before.status, before.detail)
        assert after.passed and after.mode == "split", (task["name"], after.status, after.detail)
    return tasks


def assert_balanced(manifest: dict) -> None:
    assert manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values())
    extra = manifest["stages"][0]["extra"]
    units, modules = dict(extra["units"]), dict(extra["modules"])
    assert units.pop("found") == sum(units.values()), extra
    assert modules.pop("found") == sum(modules.values()), extra


def test_discovery_reads_pytest_files_and_doctests(tmp_path):
    found = discover(write_tree(tmp_path), "minicalc", max_lines=600)
    by_module = {s.path: {u.name: u for u in s.units} for s in found.subjects}
    assert set(by_module) == {"src/minicalc/stats.py", "src/minicalc/text.py"}
    assert found.modules["imports_its_tree"] == 1  # report.py imports minicalc.stats
    stats = by_module["src/minicalc/stats.py"]
    assert set(stats) == {"mean", "median", "clamp", "Running.__init__", "Running.add", "Running.average"}
    assert found.units["untested"] == 1  # `untested`
    mean = stats["mean"].tests
    assert "test_mean()" in mean and "assert (mean([1, 2, 3])) == 2.0" in mean  # a literal: by value
    assert "numbers" not in mean  # a test that needs a fixture is not run
    assert "for _case in [([1, 3, 2], 2)" in stats["median"].tests
    assert "TestRunning().test_average()" in stats["Running.add"].tests
    assert "clamp" not in stats["median"].tests  # a unit's tests are those that name it
    text = by_module["src/minicalc/text.py"]
    assert "slugify('Hello, World!')" in text["slugify"].tests  # `t.slugify` unqualified
    assert "import minicalc" not in text["slugify"].tests
    legacy = text["chunks"].tests  # a unittest.TestCase of any name: an instance per test, setUp, the test
    assert "_case = ChunkChecks('test_pairs')\n_case.setUp()\n_case.test_pairs()\n_case.tearDown()" in legacy
    doctests = text["pairs"].tests  # no import, no +SKIP; a printout over two lines compared as a value
    assert doctests == (
        "assert (pairs({'b': 2, 'a': 1})) == [('a', 1), ('b', 2)], \"pairs({'b': 2, 'a': 1})\"\n"
        "assert (pairs({'z': 0, 'y': 1})) == [('y', 1), ('z', 0)], \"pairs({'z': 0, 'y': 1})\"\n"
    )


def test_a_git_clone_is_read_as_git_tracks_it(tmp_path):
    tree = write_tree(tmp_path / "clone")
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "add", "src", "tests"], check=True)
    env = tree / "myenv" / "lib" / "site.py"  # a virtualenv under a name the folder walk would read
    env.parent.mkdir(parents=True)
    env.write_text("def helper():\n    return 1\n")
    assert not any("myenv" in s.path for s in discover(tree, "clone", max_lines=600).subjects)
    assert discover(tree, "clone", max_lines=600).modules["found"] == 4


def test_a_build_keeps_only_bugs_the_tests_catch_and_balances(tmp_path):
    out = tmp_path / "out"
    ran = _build(
        "source=tree", f"source.paths=[{write_tree(tmp_path / 'tree')}]", f"out={out}", FIXTURES_ONLY
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "rows/s" in ran.stderr and "rows per unit" in ran.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert_balanced(manifest)
    assert manifest["dropped"].get("source:survived", 0) > 0  # candidates the tests let through
    assert manifest["stages"][0]["extra"]["bugs_left_out"].get("uncovered", 0) > 0  # lines the tests skip
    tasks = assert_every_row_is_caught(out)
    assert len({t["taxonomy"]["topic"] for t in tasks}) >= 6  # the operators and the bug patterns
    for task in tasks:  # a bug report: the test's own line that failed, without its assert message
        assert task["instruction_descriptive"].startswith(f"`{task['name'].split(':')[1]}` has a bug: ")
        assert "` fails." in task["instruction_descriptive"] or "` raises " in task["instruction_descriptive"]
    shown = next(t["instruction_descriptive"] for t in tasks if "pairs" in t["name"])
    assert "`assert pairs(" in shown and '"pairs(' not in shown  # the doctest's assert, not its message
    row = tasks[0]
    changed = [
        a for a, b in zip(row["before"].splitlines(), row["after"].splitlines(), strict=False) if a != b
    ]
    assert 1 <= len(changed) <= 4  # one bug, written into the module's own text
    assert "# keep x within [low, high]" in next(t["before"] for t in tasks if "clamp" in t["name"])
    # both trainers read it: SFT the build folder (before -> after), RL the tasks file as CanItEdit
    from core.benchmarks import load_benchmark
    from train.config import DatasetSpec
    from train.edit_data import load_one

    sft = load_one(DatasetSpec(path=str(out)), seed=0)
    assert len(sft) == len(tasks) and set(sft[0]) >= {"before", "after", "instruction"}
    problems = load_benchmark("canitedit", str(out / "tasks.jsonl")).problems
    assert len(problems) == len(tasks) and problems[0].instructions["lazy"].startswith("Fix the bug in")


def test_a_killed_stage_resumes_with_the_units_it_had_not_finished(tmp_path, monkeypatch):
    tree = write_tree(tmp_path / "tree")
    cfg = BuildConfig(
        source=SourceConfig(kind="tree", paths=[str(tree)]),
        pipeline=PipelineConfig(
            name="fix-tasks", kind="fix_tasks", decontaminate=DecontamOptions(enabled=False)
        ),
    )
    cfg.validate()
    whole, _ = fix_stage.fix_tasks_stage(cfg, None, None, tmp_path / "whole")
    work = tmp_path / "work"
    fix_stage.fix_tasks_stage(cfg, None, None, work)
    records = (work / fix_stage.RECORDS).read_text().splitlines()
    kept = records[:3]
    (work / fix_stage.RECORDS).write_text("\n".join(kept) + "\n" + records[3][:20])  # torn by the kill
    judged: list[str] = []
    real = fix_stage.judge_units

    def spy(sandbox, jobs, config):
        judged.extend(job.key for job in jobs)
        return real(sandbox, jobs, config)

    monkeypatch.setattr(fix_stage, "judge_units", spy)
    again, result = fix_stage.fix_tasks_stage(cfg, None, None, work)
    finished = {json.loads(line)["key"] for line in kept}
    assert judged and not finished & set(judged) and len(judged) == len(records) - 3
    assert sorted(again["id"]) == sorted(whole["id"]) and result.kept == len(whole)


def test_a_real_sdist_from_pypi(tmp_path):
    """inflection's sdist: one module, a pytest file with parametrize and module-level tables."""
    out = tmp_path / "out"
    ran = _build("source=pypi", "source.packages=['inflection==0.5.1']", f"out={out}", FIXTURES_ONLY)
    if ran.returncode != 0 and "could not download" in ran.stderr:
        pytest.skip(f"the package registry cannot be reached: {ran.stderr.strip().splitlines()[-1]}")
    assert ran.returncode == 0, ran.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert_balanced(manifest)
    assert manifest["kept"] >= 20
    assert_every_row_is_caught(out)


def test_benchmark_files_are_a_source_and_decontamination_drops_copies(tmp_path):
    problem = {
        "id": "train-1",
        "name": "scale",
        "before": "def scale(xs, k):\n    return xs\n",
        "after": "def scale(xs, k):\n    out = []\n    for x in xs:\n        out.append(x * k)\n    return out\n",
        "tests": "assert scale([1, 2], 3) == [3, 6]\nassert scale([], 2) == []\n",
        "instruction_descriptive": "Scale every item by k.",
        "instruction_lazy": "scale it",
    }
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(problem) + "\n")
    out = tmp_path / "out"
    # the problem itself as the benchmark to decontaminate against: every row copies it
    ran = _build(
        "source=benchmark",
        f"source.benchmarks=[{{name: canitedit, path: {path}}}]",
        f"out={out}",
        f"pipeline.decontaminate.benchmarks=[{{name: canitedit, path: {path}}}]",
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert_balanced(manifest)
    assert manifest["kept"] == 0 and manifest["dropped"]["decontaminate:contaminated_code"] > 0
    ran = _build(
        "source=benchmark",
        f"source.benchmarks=[{{name: canitedit, path: {path}}}]",
        f"out={out}",
        FIXTURES_ONLY,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert_every_row_is_caught(out)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["source=hub"], "pipeline=fix-tasks reads code with tests"),
        (["source=tree", "source.paths=[README.md]"], "neither a folder nor an sdist"),
        (["source=tree", "source.paths=[docs]"], "no unit with tests"),
        (["source=pypi"], "source.packages"),
        (["source=pypi", "source.packages=[inflection]"], "pin each one as name==version"),
        (["source=tree", "source.paths=[.]", "pipeline.fix.operators=[flip]"], "pipeline.fix.operators"),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, needle):
    ran = _build(*args, f"out={tmp_path / 'out'}", FIXTURES_ONLY)
    lines = ran.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert ran.returncode == 2 and len(errors) == 1 and needle in errors[0], ran.stderr[-2000:]
    assert "Traceback" not in ran.stderr


def test_an_sdist_is_the_same_tree_when_a_build_starts_again(tmp_path):
    """A killed build unpacks nothing twice and must see the same tree: the units' keys depend on it."""
    import tarfile

    from data_pipeline.fix_tasks.trees import unpack

    tree = write_tree(tmp_path / "minicalc-1.0")
    archive = tmp_path / "minicalc-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="minicalc-1.0")
    first, again = unpack(archive, tmp_path / "trees"), unpack(archive, tmp_path / "trees")
    assert first == again and first.name == "minicalc-1.0" and (first / "src").is_dir()
    paths = [[s.path for s in discover(root, "m", max_lines=600).subjects] for root in (first, again)]
    assert paths[0] == paths[1] == ["src/minicalc/stats.py", "src/minicalc/text.py"]
