"""Resume follows the input: a changed file reruns the stages, an unchanged one reuses them all."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_bad_input import build, good_row, jsonl

from data_pipeline.config import SourceConfig
from data_pipeline.input_identity import identity_summary, input_identity
from data_pipeline.stages import OutputLock


def resumed(manifest: dict) -> list[bool]:
    return [s["extra"].get("resumed", False) for s in manifest["stages"]]


def test_a_grown_or_edited_input_reruns_every_stage_and_an_untouched_one_none(tmp_path):
    raw, out = tmp_path / "raw.jsonl", tmp_path / "out"
    jsonl(raw, [good_row(i) for i in range(20)])
    first = build(raw, out)
    assert (first["input"], first["kept"]) == (20, 20) and resumed(first) == [False, False, False]

    jsonl(raw, [good_row(i) for i in range(40)])
    grown = build(raw, out)
    assert (grown["input"], grown["kept"]) == (40, 40) and resumed(grown) == [False, False, False]
    assert grown["input_identity"]["bytes"] == raw.stat().st_size

    rows = [good_row(i) for i in range(40)]
    rows[5]["subject"] = "Returned a shifted value"  # one row edited: a filter now drops it
    jsonl(raw, rows)
    edited = build(raw, out)
    assert (edited["kept"], edited["dropped"]) == (39, {"filter:not_imperative": 1})
    assert resumed(edited) == [False, False, False]
    assert edited["input_identity"]["xxh3"] != grown["input_identity"]["xxh3"]

    again = build(raw, out)
    assert resumed(again) == [True, True, True]
    assert (again["kept"], again["dropped"]) == (edited["kept"], edited["dropped"])
    assert again["input_identity"] == edited["input_identity"]


def test_the_content_decides_not_the_timestamps(tmp_path):
    """A touch reuses the stages; an edit that keeps size and mtime reruns them, in the same process too."""
    raw, out = tmp_path / "raw.jsonl", tmp_path / "out"
    jsonl(raw, [good_row(i) for i in range(4)])
    build(raw, out)
    os.utime(raw)
    assert resumed(build(raw, out)) == [True, True, True]

    stat = raw.stat()
    edited = raw.read_text().replace("function 1", "function 7")
    assert len(edited) == stat.st_size
    raw.write_text(edited)
    os.utime(raw, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert resumed(build(raw, out)) == [False, False, False]


def _dataset_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "dataset").iterdir())}


def test_a_resumed_build_writes_the_same_bytes_as_a_straight_one(tmp_path):
    """state.json included: `datasets` would write a random fingerprint into it on every run."""
    raw, out = tmp_path / "raw.jsonl", tmp_path / "out"
    jsonl(raw, [good_row(i) for i in range(6)])
    build(raw, tmp_path / "straight")
    build(raw, out)
    shutil.rmtree(out / ".stages" / "02-dedup")  # as a kill during dedup leaves it
    shutil.rmtree(out / "dataset")
    assert resumed(build(raw, out)) == [True, True, False]
    assert _dataset_bytes(out) == _dataset_bytes(tmp_path / "straight")


def _delete_rows(stage: Path) -> None:
    shutil.rmtree(stage / "rows")


def _garble_stage_json(stage: Path) -> None:
    (stage / "stage.json").write_text("{half-written")


def _truncate_shard(stage: Path) -> None:
    shard = next((stage / "rows").glob("*.arrow"))
    shard.write_bytes(shard.read_bytes()[:100])


@pytest.mark.parametrize("damage", [_delete_rows, _garble_stage_json, _truncate_shard])
def test_a_damaged_stage_is_built_again(tmp_path, caplog, damage):
    raw, out = tmp_path / "raw.jsonl", tmp_path / "out"
    jsonl(raw, [good_row(i) for i in range(4)])
    first = build(raw, out)
    damage(out / ".stages" / "01-filter")
    with caplog.at_level("WARNING", logger="data_pipeline.stages"):
        again = build(raw, out)
    assert resumed(again) == [True, False, False] and "01-filter" in caplog.text
    assert (again["kept"], again["dropped"]) == (first["kept"], first["dropped"])


def test_the_identity_of_a_folder_counts_every_file_it_reads(tmp_path):
    jsonl(tmp_path / "in" / "a.jsonl", [good_row(0)])
    jsonl(tmp_path / "in" / "b" / "c.jsonl", [good_row(1)])
    (tmp_path / "in" / "notes.txt").write_text("not read")
    cfg = SourceConfig(kind="files", paths=[str(tmp_path / "in")])
    identity = input_identity(cfg)
    assert [f["path"] for f in identity["files"]] == [
        str(tmp_path / "in" / "a.jsonl"),
        str(tmp_path / "in" / "b" / "c.jsonl"),
    ]
    summary = identity_summary(identity)
    assert summary["files"] == 2 and summary["bytes"] == sum(f["size"] for f in identity["files"])


def test_temporaries_of_a_killed_run_are_removed(tmp_path):
    raw, out = tmp_path / "raw.jsonl", tmp_path / "out"
    jsonl(raw, [good_row(i) for i in range(5)])
    build(raw, out)
    stale = [
        out / ".output.tmp-123",
        out / ".stages" / "01-x.tmp-123-456",
        out / ".stages" / "source.tmp-1-2",
    ]
    for folder in stale:
        folder.mkdir()
        (folder / "rows").write_text("half-written")
    again = build(raw, out)
    assert resumed(again) == [True, True, True]
    assert not any(folder.exists() for folder in stale)
    assert sorted(p.name for p in (out / ".stages").iterdir()) == ["00-source", "01-filter", "02-dedup"]


def test_a_second_build_into_the_same_folder_is_refused(tmp_path):
    raw, out = tmp_path / "raw.jsonl", tmp_path / "out"
    jsonl(raw, [good_row(i) for i in range(3)])
    lock = OutputLock(out)  # as a build in progress holds it
    cmd = [sys.executable, "-m", "data_pipeline.build", "source=files", f"source.paths=[{raw}]", f"out={out}"]
    cmd += ["pipeline=editpackft", "pipeline.decontaminate.enabled=false", "stats=false"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr
    assert "another build" in proc.stderr and "is writing into this folder" in proc.stderr
    lock.release()
    assert build(raw, out)["kept"] == 3
