"""The API-update benchmark's builder on the real HumanEval data: every API listed, five types,
modified solutions that pass in the enforcing sandbox, old calls scored per type, seeded splits,
and bad input counted rather than fatal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO

from core.benchmarks.apiupdate import Modification
from core.sandbox import make_sandbox
from eval.apiupdate.builder import BuildOptions, build
from eval.apiupdate.catalogue import TYPES
from eval.apiupdate.enforce import EnforcedJob, run_enforced

FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(scope="module")
def sandbox():
    with make_sandbox() as sb:
        yield sb


@pytest.fixture(scope="module")
def humaneval(sandbox):
    options = BuildOptions(targets={"reliability": 500, "generalization": 1000, "specificity": 40})
    return build("humaneval", None, sandbox, options)


def _jobs(rows, program_key):
    return [
        EnforcedJob(
            r[program_key],
            Modification.from_spec(r["modification"]),
            r["tests"],
            r["entry_point"],
            r["n_params"],
        )
        for r in rows
    ]


def test_every_builtin_and_stdlib_api_of_the_canonical_solutions_is_listed(humaneval):
    apis = {a["api"]: a for a in humaneval.apis}
    assert len(apis) >= 30
    for api in ("builtins.len", "builtins.sorted", "math.sqrt", "hashlib.md5", "re.split", "builtins.int"):
        assert api in apis
    assert apis["builtins.int"]["modifiable"] is False and apis["builtins.int"]["reason"] == "is_a_type"
    assert apis["builtins.len"]["problems"] > 40
    assert humaneval.manifest["apis_called"] == len(apis)


def test_all_five_types_are_covered_in_every_edit_split(humaneval):
    per_type = humaneval.manifest["rows_per_type"]
    for split in ("reliability", "generalization"):
        assert set(per_type[split]) == set(TYPES), split
    assert humaneval.manifest["distinct_modified_apis"] >= 15
    rows_by_split = Counter(r["split"] for r in humaneval.rows)
    assert rows_by_split["generalization"] >= 1.5 * rows_by_split["reliability"] - 10  # 1:2 per API


def test_every_kept_modified_solution_passes_and_adopts_in_the_enforcing_sandbox(humaneval, sandbox):
    rows = [r for r in humaneval.rows if r["split"] != "specificity"]
    outcomes = run_enforced(sandbox, _jobs(rows, "reference"))
    failed = [(r["id"], o.outcome) for r, o in zip(rows, outcomes, strict=True) if o.outcome != "adoption"]
    assert not failed
    specificity = [r for r in humaneval.rows if r["split"] == "specificity"]
    assert specificity and all(o.passed for o in run_enforced(sandbox, _jobs(specificity, "reference")))


def test_the_unmodified_canonical_solution_scores_as_its_type_says(humaneval, sandbox):
    expected = {
        "R1": {"old_api"},
        "S2": {"old_api"},
        "S3": {"old_api"},
        "S1": {"adoption"},
        "S4": {"return_type_mismatch"},
    }
    rows = [r for r in humaneval.rows if r["split"] in ("reliability", "generalization")]
    outcomes = run_enforced(sandbox, _jobs(rows, "original"))
    seen: dict[str, Counter] = {t: Counter() for t in TYPES}
    for row, outcome in zip(rows, outcomes, strict=True):
        seen[row["type"]][outcome.outcome] += 1
    for kind in TYPES:
        assert seen[kind], kind
        assert set(seen[kind]) <= expected[kind], (kind, seen[kind])


def test_each_api_has_one_type_and_no_edit_problem_is_one_of_its_test_problems(humaneval):
    """App. A.2: one modification per API; an API's reliability and generalization problems disjoint."""
    edit_rows = [r for r in humaneval.rows if r["split"] in ("reliability", "generalization")]
    types: dict[str, set[str]] = {}
    tasks: dict[tuple[str, str], set[str]] = {}
    for r in edit_rows:
        types.setdefault(r["api"], set()).add(r["type"])
        tasks.setdefault((r["api"], r["split"]), set()).add(r["task_id"])
    assert len(types) >= 15 and all(len(t) == 1 for t in types.values()), types
    for api in types:
        assert not tasks.get((api, "reliability"), set()) & tasks.get((api, "generalization"), set()), api
    assert humaneval.manifest["types_per_api"] == "one"
    assert humaneval.manifest["dropped"]["pairs"]["other_type_of_api"] > 0
    assert humaneval.manifest["distinct_synthetic_apis"] == humaneval.manifest["distinct_modified_apis"]


def test_every_type_per_api_is_our_option_with_problems_still_disjoint_per_api(sandbox):
    options = BuildOptions(
        types_per_api="all", targets={"reliability": 500, "generalization": 1000, "specificity": 5}, limit=40
    )
    result = build("humaneval", None, sandbox, options)
    edit_rows = [r for r in result.rows if r["split"] in ("reliability", "generalization")]
    types: dict[str, set[str]] = {}
    tasks: dict[tuple[str, str], set[str]] = {}
    for r in edit_rows:
        types.setdefault(r["api"], set()).add(r["type"])
        tasks.setdefault((r["api"], r["split"]), set()).add(r["task_id"])
    assert max(len(t) for t in types.values()) >= 3
    for api in types:
        assert not tasks.get((api, "reliability"), set()) & tasks.get((api, "generalization"), set()), api


def _tasks(rows, split):
    return {r["task_id"] for r in rows if r["split"] == split}


def test_the_default_per_api_split_reports_the_problems_it_shares_across_apis(humaneval):
    """App. A.2 splits each API's problems apart; a problem calling two APIs can be one's edit
    example and the other's test problem. The manifest counts those, and sizes beside the paper's."""
    rows, manifest = humaneval.rows, humaneval.manifest
    shared = _tasks(rows, "reliability") & _tasks(rows, "generalization")
    assert manifest["disjoint"] == "per_api"
    assert manifest["overlap_across_apis"] == len(shared) > 0
    in_specificity = _tasks(rows, "reliability") & _tasks(rows, "specificity")
    assert manifest["overlap_reliability_specificity"] == len(in_specificity) > 0
    main = Counter(r["split"] for r in rows if r["source"] == "humaneval")
    assert manifest["split_sizes"] == {
        "reliability": {"built": main["reliability"], "paper": 469},
        "generalization": {"built": main["generalization"], "paper": 647},
        "specificity": {"built": main["specificity"], "paper": 924},
    }


def test_splits_disjoint_across_apis_give_no_problem_two_roles(sandbox):
    """Our option: no HumanEval problem is an edit example (reliability) and a test problem
    (generalization or specificity), whichever APIs it calls; each kept API still has both splits."""
    options = BuildOptions(
        disjoint="across_apis", targets={"reliability": 500, "generalization": 1000, "specificity": 40}
    )
    result = build("humaneval", None, sandbox, options)
    rows = [r for r in result.rows if r["source"] == "humaneval"]
    assert not _tasks(rows, "reliability") & _tasks(rows, "generalization")
    assert not _tasks(rows, "reliability") & _tasks(rows, "specificity")
    assert result.manifest["overlap_across_apis"] == 0 == result.manifest["overlap_reliability_specificity"]
    splits_of: dict[str, set[str]] = {}
    for r in rows:
        if r["split"] != "specificity":
            splits_of.setdefault(r["api"], set()).add(r["split"])
    assert len(splits_of) >= 10 and all(s == {"reliability", "generalization"} for s in splits_of.values())


def test_roles_across_apis_fill_each_api_towards_one_to_two():
    """Unit level: shared problems keep the role the first API gave them; an API whose problems
    are all taken by one role is dropped rather than given a problem in two roles."""
    from eval.apiupdate.builder import Builder, _reliability_share

    tasks = {
        "a": ["p1", "p2", "p3"],
        "b": ["p1", "p2", "p3", "p4", "p5", "p6"],
        "c": ["p7", "p8", "p9"],
        "d": ["p7", "p8", "p9", "p10"],
    }
    for seed in range(20):
        roles = Builder(None, BuildOptions(seed=seed, disjoint="across_apis"))._roles_across_apis(tasks)
        seen: dict[str, str] = {}
        for api, assigned in roles.items():
            assert sorted(assigned) == sorted(tasks[api])
            assert set(assigned.values()) == {"reliability", "generalization"}, (seed, api)
            for task, role in assigned.items():
                assert seen.setdefault(task, role) == role, (seed, task)
        assert list(roles["b"].values()).count("reliability") == 2  # a third of six
        assert set(roles) == {"a", "b", "c", "d"}
    rel, gen = "reliability", "generalization"
    assert _reliability_share(6, [], 6) == 2 and _reliability_share(2, [], 2) == 1
    assert _reliability_share(3, [rel], 2) == 0  # the share is met: the free ones test
    assert _reliability_share(3, [gen, gen], 1) == 1
    assert _reliability_share(2, [rel], 1) == 0  # one problem kept for generalization
    assert _reliability_share(3, [gen, gen, gen], 0) is None  # no edit example left: dropped
    assert _reliability_share(3, [rel, rel, rel], 0) is None  # no test problem left: dropped


def test_s4_reads_the_first_item_of_a_tuple_as_the_study_or_value_as_ours(humaneval):
    s4 = [r for r in humaneval.rows if r["type"] == "S4" and r["split"] != "specificity"]
    assert s4 and all("[0]" in r["reference"] and ".value" not in r["reference"] for r in s4)
    mod = Modification.from_spec(s4[0]["modification"])
    assert mod.result_form == "tuple" and "returns a tuple" in mod.notice
    legacy = {k: v for k, v in s4[0]["modification"].items() if k != "result_form"}
    assert Modification.from_spec(legacy).result_read == ".value"  # benchmarks built before the tuple form


def test_splits_are_seeded_and_disjoint_per_modified_api(sandbox):
    options = BuildOptions(
        seed=3, targets={"reliability": 500, "generalization": 1000, "specificity": 20}, limit=30
    )
    first = build("humaneval", None, sandbox, options)
    again = build("humaneval", None, sandbox, options)
    assert [r["id"] for r in first.rows] == [r["id"] for r in again.rows]
    other = build("humaneval", None, sandbox, BuildOptions(seed=4, targets=options.targets, limit=30))
    assert [r["id"] for r in other.rows] != [r["id"] for r in first.rows]
    by_mod: dict[str, dict[str, set]] = {}
    for r in first.rows:
        by_mod.setdefault(f"{r['api']}/{r['type']}", {}).setdefault(r["split"], set()).add(r["task_id"])
    for mod, splits in by_mod.items():
        if "generalization" in splits:
            assert splits["reliability"] and not splits["reliability"] & splits["generalization"], mod
        for task in splits.get("specificity", ()):
            api = mod.rsplit("/", 1)[0]
            assert api not in {
                r["api"] for r in first.rows if r["task_id"] == task and r["split"] != "specificity"
            }


def test_downsampling_keeps_at_least_two_problems_per_api(sandbox):
    options = BuildOptions(targets={"reliability": 10, "generalization": 20, "specificity": 5}, limit=60)
    result = build("humaneval", None, sandbox, options)
    edits = [
        r
        for r in result.rows
        if r["split"] in ("reliability", "generalization") and r["source"] == "humaneval"
    ]
    counts = Counter(r["api"] for r in edits)
    assert min(counts.values()) >= 2
    assert result.manifest["dropped"]["pairs"]["downsampled_generalization"] > 0


APPENDIX_B = {
    "os.getpid": "R1",
    "torch.cuda.device_count": "S1",
    "sqlite3.connect": "S2",
    "shutil.move": "S3",
    "sys.getrecursionlimit": "S4",
}


def test_appendix_b_set_is_built_with_one_type_per_api_and_one_edit_plus_two_test_problems(humaneval):
    rows = [r for r in humaneval.rows if r["source"] == "appendix_b"]
    assert {(r["api"], r["type"]) for r in rows} == set(APPENDIX_B.items())
    per_api = Counter((r["api"], r["split"]) for r in rows)
    for api in APPENDIX_B:
        assert per_api[(api, "reliability")] == 1 and per_api[(api, "nonworkaround")] == 2, api
    assert not any(k.startswith("nonworkaround_") and v for k, v in humaneval.manifest["dropped"].items())


def test_our_extended_non_workaroundable_set_is_an_option(sandbox):
    options = BuildOptions(
        nonworkaround="extended", targets={"reliability": 1, "generalization": 2, "specificity": 1}, limit=3
    )
    result = build("humaneval", None, sandbox, options)
    rows = [r for r in result.rows if r["split"] == "nonworkaround"]
    apis = {r["api"] for r in rows}
    assert {"os.getpid", "sqlite3.connect", "shutil.move", "sys.getrecursionlimit", "os.cpu_count"} <= apis
    assert all(r["source"] == "nonworkaround" for r in rows)
    edits = {r["api"] for r in result.rows if r["split"] == "reliability" and r["source"] == "nonworkaround"}
    assert edits == apis  # each API's edit example comes from its other fixture


def test_bad_rows_are_counted_not_fatal(tmp_path, sandbox):
    good = json.loads(
        (REPO / "eval" / "apiupdate" / "data" / "nonworkaround.jsonl").read_text().splitlines()[0]
    )
    broken = {**good, "task_id": "Bad/parse", "canonical_solution": "    return (\n"}
    failing = {**good, "task_id": "Bad/fails", "canonical_solution": "    return None\n"}
    path = tmp_path / "src.jsonl"
    lines = [
        json.dumps(good),
        json.dumps(broken),
        json.dumps(failing),
        "{not json",
        json.dumps({"task_id": "x"}),
    ]
    path.write_text("\n".join(lines) + "\n")
    result = build("humaneval", str(path), sandbox, BuildOptions(min_problems=1, nonworkaround="none"))
    dropped = result.manifest["dropped"]["problems"]
    assert dropped == {"canonical_does_not_parse": 1, "canonical_fails": 1, "malformed_row": 2}
    assert (
        result.manifest["input_problems"] == 5 == result.manifest["verified_problems"] + sum(dropped.values())
    )
    assert result.rows  # the good problem is kept


def test_a_modification_that_cannot_be_applied_is_counted(tmp_path, sandbox):
    row = {
        "task_id": "Starred/0",
        "prompt": 'def keep_numbers(args):\n    """The ints of args."""\n',
        "canonical_solution": "    return list(filter(*args))\n",
        "test": "def check(candidate):\n    assert candidate([lambda v: isinstance(v, int), [1, 'a', 2]]) == [1, 2]\n",
        "entry_point": "keep_numbers",
    }
    path = tmp_path / "src.jsonl"
    path.write_text(json.dumps(row) + "\n")
    options = BuildOptions(min_problems=1, nonworkaround="none", types_per_api="all")
    result = build("humaneval", str(path), sandbox, options)
    assert result.manifest["dropped"]["pairs"]["unrewritable"] >= 1  # S3 cannot swap *args
    assert {r["type"] for r in result.rows if r["api"] == "builtins.filter"} == {"R1", "S1", "S2", "S4"}


def test_mbpp_and_apps_schemas_load_through_the_same_loader(sandbox):
    mbpp = build(
        "mbpp",
        str(FIXTURES / "mbpp_sample.jsonl"),
        sandbox,
        BuildOptions(min_problems=1, nonworkaround="none"),
    )
    assert mbpp.manifest["verified_problems"] == 3
    assert mbpp.manifest["dropped"]["problems"] == {"uses_print": 1, "third_party_import": 1}
    assert any(r["api"] == "math.sqrt" for r in mbpp.rows)
    apps = build(
        "apps",
        str(FIXTURES / "apps_sample.jsonl"),
        sandbox,
        BuildOptions(min_problems=1, nonworkaround="none"),
    )
    assert apps.manifest["dropped"]["problems"] == {"not_function_style": 1}
    assert apps.manifest["verified_problems"] == 2
    assert any(r["api"] == "builtins.sorted" for r in apps.rows)


def _cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eval.build_apiupdate", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )


def test_cli_writes_the_manifest_and_an_unreachable_hub_is_one_line(tmp_path):
    out = tmp_path / "built"
    done = _cli(["source=humaneval", f"out={out}", "limit=25", "targets.specificity=10"], REPO)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    rows = (out / "problems.jsonl").read_text().splitlines()
    assert manifest["rows"] == len(rows) and "| R1 (rename) |" in done.stdout
    assert "(overlap_across_apis)" in done.stdout and "(paper 469)" in done.stdout
    assert (out / "apis.jsonl").read_text().count("\n") == manifest["apis_called"]
    offline = _cli(
        ["source=mbpp", f"out={tmp_path / 'x'}"],
        tmp_path,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_DATASETS_CACHE=str(tmp_path / "cache"),
        HF_HOME=str(tmp_path / "hf"),
    )
    assert offline.returncode == 2
    errors = [line for line in offline.stderr.splitlines() if line.startswith("error:")]
    assert (
        len(errors) == 1
        and "google-research-datasets/mbpp" in errors[0]
        and "Traceback" not in offline.stderr
    )
    typo = _cli(["source=humaneval", "typez=[R1]"], tmp_path)
    assert typo.returncode == 2 and "typez" in typo.stderr


def test_hub_sets_combine_every_split_by_default(monkeypatch):
    """The study builds MBPP and APPS from all their problems (App. A.2), not the test split."""
    from eval.apiupdate import sources

    asked = []

    def rows(ref, subset, split, key):  # the hub is unreachable here: record what would be read
        asked.append((ref, subset, split))
        return iter([])

    monkeypatch.setattr(sources, "load_hub_dataset", rows)
    list(sources.load_source("mbpp", None))
    assert [s for _, _, s in asked] == ["train", "validation", "test", "prompt"]
    asked.clear()
    list(sources.load_source("apps", None, "test"))
    assert asked == [("hub:codeparrot/apps", "all", "test")]
