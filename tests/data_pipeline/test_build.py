"""End-to-end builds: every row accounted for, dedup and decontamination at work, resume, Ray = local."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO, commitpackft_row

from data_pipeline.build import to_build_config
from data_pipeline.pipeline import run_pipeline

HUMANEVALPACK = REPO / "core" / "data" / "humanevalpack"  # the copy the loader reads by default
CANITEDIT = REPO / "tests" / "fixtures" / "canitedit_sample.jsonl"
# Decontamination reads benchmarks through evaluation's loaders; HumanEvalFix from its shipped copy.
BENCHMARKS = (
    f"pipeline.decontaminate.benchmarks=[{{name: canitedit, path: {CANITEDIT}}},{{name: humanevalfix}}]"
)


def _function(rng: random.Random, i: int) -> str:
    names = ["total", "scale", "merge", "parse", "render", "fetch", "split", "count"]
    lines = [f"def {rng.choice(names)}_{i}(values, factor={rng.randint(1, 9)}):", "    out = []"]
    for j in range(rng.randint(6, 14)):
        lines.append(f"    out.append(values[{j}] * factor + {rng.randint(0, 999)})  # step {j}")
    return "\n".join([*lines, "    return out", ""])


def write_corpus(path: Path, n_good: int = 60) -> dict[str, int]:
    """CommitPackFT-style rows with planted problems; returns what each stage must drop."""
    rng = random.Random(7)
    rows, expected = [], {}
    for i in range(n_good):
        before = _function(rng, i)
        rows.append(
            commitpackft_row(
                f"g{i:03d}",
                before,
                before.replace("return out", "return list(out)"),
                f"Return a list from function number {i}",
            )
        )
    for i in range(8):  # near-duplicates of the first rows: one changed line each
        src = rows[i]
        lines = src["new_contents"].splitlines()
        lines[3] = lines[3] + "  # tweak"
        rows.append(
            commitpackft_row(
                f"n{i:03d}", src["old_contents"], "\n".join(lines) + "\n", src["subject"] + " again"
            )
        )
    expected["dedup:near_duplicate"] = 8
    bad_filters = [
        ("Fixed the thing", "filter:not_imperative"),
        ("Fix", "filter:subject_length"),
    ]
    for j, (subject, reason) in enumerate(bad_filters):
        before = _function(rng, 100 + j)
        rows.append(commitpackft_row(f"f{j}", before, before + "x = 1\n", subject))
        expected[reason] = expected.get(reason, 0) + 1
    before = _function(rng, 200)
    rows.append(commitpackft_row("u0", before, before, "Change nothing at all"))
    rows.append(commitpackft_row("t0", before, before + "# TODO: finish\n", "Add a todo marker"))
    rows.append(commitpackft_row("s0", before, "def broken(:\n", "Break the syntax here"))
    expected.update({"filter:unchanged": 1, "filter:todo_marker": 1, "filter:after_syntax_error": 1})
    humaneval = [json.loads(line) for line in (HUMANEVALPACK / "python.jsonl").read_text().splitlines()[:3]]
    for k, problem in enumerate(humaneval):  # planted copies of HumanEvalFix problems
        rows.append(
            commitpackft_row(
                f"h{k}",
                problem["declaration"] + problem["buggy_solution"],
                problem["declaration"] + problem["canonical_solution"],
                "Fix the bug in this helper",
            )
        )
    canitedit = json.loads(CANITEDIT.read_text().splitlines()[1])
    rows.append(
        commitpackft_row("c0", _function(rng, 300), _function(rng, 301), canitedit["instruction_descriptive"])
    )
    expected.update({"decontaminate:contaminated_code": 3, "decontaminate:contaminated_instruction": 1})
    lines = [json.dumps(r) for r in rows]
    lines += ['{"truncated": ', json.dumps({**rows[0], "commit": "x0", "new_contents": None})]
    expected.update({"source:broken_json": 1, "source:missing_field": 1})
    path.write_text("\n".join(lines) + "\n")
    expected["_kept"] = n_good
    return expected


def build(raw: Path, out: Path, *extra: str):
    from conftest import compose_build

    cfg = compose_build(
        [
            "pipeline=editpackft",
            "source=files",
            f"source.paths=[{raw}]",
            f"out={out}",
            BENCHMARKS,
            *extra,
        ]
    )
    manifest = run_pipeline(to_build_config(cfg))
    assert manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values())
    # the near-dedup kernels' warming thread (data_pipeline.near_dedup.start_warming) is done
    assert not [t for t in threading.enumerate() if t.name == "editforge-warm-kernels"]
    return manifest


def _rows(out: Path) -> list[dict]:
    from datasets import load_from_disk

    return list(load_from_disk(str(out / "dataset")))


def test_build_accounts_for_every_row_and_drops_what_it_should(tmp_path):
    expected = write_corpus(tmp_path / "raw.jsonl")
    manifest = build(tmp_path / "raw.jsonl", tmp_path / "out")
    kept = expected.pop("_kept")
    assert manifest["kept"] == kept and manifest["dropped"] == expected
    assert manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values())
    for stage in manifest["stages"]:
        assert stage["input"] == stage["kept"] + sum(stage["dropped"].values())
    assert {"num_perm", "bands", "rows", "threshold", "ngram", "scheme"} <= set(manifest["minhash"])
    assert manifest["versions"]["datasketch"] and manifest["timings"]["total_seconds"] > 0
    rows = _rows(tmp_path / "out")
    ids = [r["id"] for r in rows]
    assert ids == sorted(ids) and not any(i.split(":")[-2].startswith(("n", "h", "c")) for i in ids)
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["items"] == kept and stats["unique_initial_verbs"] == 1
    assert "| Items |" in (tmp_path / "out" / "stats.md").read_text()
    assert (tmp_path / "out" / "plots" / "line_counts.png").stat().st_size > 1000


def test_output_feeds_training_directly(tmp_path):
    from train.config import DataConfig
    from train.edit_data import load_edit_splits

    write_corpus(tmp_path / "raw.jsonl")
    build(tmp_path / "raw.jsonl", tmp_path / "out", "format=parquet")
    assert (tmp_path / "out" / "data.parquet").exists()
    build(tmp_path / "raw.jsonl", tmp_path / "out")  # back to arrow: the parquet file is replaced
    assert not (tmp_path / "out" / "data.parquet").exists()
    splits = load_edit_splits(DataConfig(path=str(tmp_path / "out"), val_size=0))
    assert len(splits.train) == 60

    from conftest import app_config

    from train.sft_run import SFTRun

    app, resolved = app_config(
        [
            "recipe=tiny",
            f"data.path={tmp_path / 'out'}",
            f"run.output_dir={tmp_path / 'run'}",
            "run.max_steps=2",
            "run.report_to=none",
            "recipe.max_length=1024",
        ]
    )
    built = sorted(p.relative_to(tmp_path) for p in (tmp_path / "out").rglob("*"))
    run = SFTRun(app, resolved)
    run.setup()
    run.train()
    assert (run.save() / "model.safetensors").exists()
    # the tokenized and filtered copies were never written beside the built dataset
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "out").rglob("*")) == built


def test_the_combined_build_deduplicates_across_builds(tmp_path):
    write_corpus(tmp_path / "raw.jsonl")
    first = build(tmp_path / "raw.jsonl", tmp_path / "a")
    (tmp_path / "copy.jsonl").write_text((tmp_path / "raw.jsonl").read_text().replace('"g0', '"k0'))
    second = build(tmp_path / "copy.jsonl", tmp_path / "b")
    combined = build(
        tmp_path / "unused",
        tmp_path / "ab",
        "pipeline=editpackft+commits2023ft",
        "source=disk",
        f"source.paths=[{tmp_path / 'a' / 'dataset'},{tmp_path / 'b' / 'dataset'}]",
    )
    assert combined["input"] == first["kept"] + second["kept"]
    # The renamed copies are exact duplicates across the two builds: one of each pair stays.
    assert combined["kept"] == first["kept"]
    assert combined["dropped"] == {"dedup:near_duplicate": second["kept"]}


def test_a_build_killed_midway_resumes_with_the_same_output(tmp_path):
    write_corpus(tmp_path / "raw.jsonl")
    first = build(tmp_path / "raw.jsonl", tmp_path / "out")
    reference = _rows(tmp_path / "out")
    # The state a kill leaves after the filter stage: later stages and the output gone, a half-written stage.
    stages = tmp_path / "out" / ".stages"
    for folder in stages.iterdir():
        if folder.name.startswith(("02-", "03-")):
            shutil.rmtree(folder)
    (stages / "02-dedup.tmp-999-1").mkdir()
    for name in ("dataset", "manifest.json"):
        target = tmp_path / "out" / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    again = build(tmp_path / "raw.jsonl", tmp_path / "out")
    assert [s.get("extra", {}).get("resumed", False) for s in again["stages"]] == [True, True, False, False]
    assert _rows(tmp_path / "out") == reference
    assert (again["kept"], again["dropped"]) == (first["kept"], first["dropped"])
    assert not (stages / "02-dedup.tmp-999-1").exists()
    third = build(tmp_path / "raw.jsonl", tmp_path / "out")  # idempotent
    assert all(s["extra"]["resumed"] for s in third["stages"]) and _rows(tmp_path / "out") == reference


def test_changing_a_stage_config_redoes_it_and_what_follows(tmp_path):
    write_corpus(tmp_path / "raw.jsonl")
    build(tmp_path / "raw.jsonl", tmp_path / "out")
    again = build(tmp_path / "raw.jsonl", tmp_path / "out", "pipeline.dedup.minhash.threshold=0.95")
    assert [s.get("extra", {}).get("resumed", False) for s in again["stages"]] == [True, True, False, False]


@pytest.mark.slow
def test_ray_and_local_executors_give_identical_output(tmp_path):
    pytest.importorskip("ray")
    write_corpus(tmp_path / "raw.jsonl")
    small = ["executor.batch_size=16", "executor.shard_rows=20", "executor.partition_rows=40"]
    local = build(tmp_path / "raw.jsonl", tmp_path / "local", "executor=local", *small)
    # A local Ray of two worker processes; many shards, so tasks really spread over both.
    ray_run = build(tmp_path / "raw.jsonl", tmp_path / "ray", "executor=ray", "executor.num_proc=2", *small)
    assert _rows(tmp_path / "local") == _rows(tmp_path / "ray")
    assert (local["kept"], local["dropped"]) == (ray_run["kept"], ray_run["dropped"])


def test_a_ray_cluster_that_is_not_there_is_one_line(tmp_path):
    pytest.importorskip("ray")
    write_corpus(tmp_path / "raw.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [sys.executable, "-m", "data_pipeline.build", "source=files", f"source.paths=[{tmp_path / 'raw.jsonl'}]",
         f"out={tmp_path / 'out'}", "executor=ray", "executor.address=auto"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert len(errors) == 1 and "executor.address='auto': no Ray cluster to join" in errors[0]


def test_the_command_line_builds_from_git_and_rejects_bad_repos(tmp_path):
    out = tmp_path / "mined"
    cmd = [
        sys.executable,
        "-m",
        "data_pipeline.build",
        "pipeline=commits2023ft",
        "source=git",
        f"source.repos=[{REPO}]",
        f"out={out}",
        BENCHMARKS,
        "plots=false",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values()) and manifest["input"] > 0
    bad = subprocess.run(
        [*cmd[:5], f"source.repos=[{tmp_path / 'nope'}]"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "nope" in bad.stdout + bad.stderr
    assert not (tmp_path / "nope").exists() and "MinHash" not in bad.stdout + bad.stderr
