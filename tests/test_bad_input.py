"""Bad input never kills a build: bad rows and damaged files are counted drops, bad input is one line.

Rows go through the real pipeline (decontamination off, to stay fast); the input-level
failures run through `python -m data_pipeline.build` to see exactly what a user sees.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO, compose_build

from data_pipeline.build import to_build_config
from data_pipeline.pipeline import run_pipeline

FAST = ("pipeline=editpackft", "pipeline.decontaminate.enabled=false", "stats=false")


def good_row(i: int) -> dict:
    """A CommitPackFT-style row every editpackft filter keeps; rows differ enough not to be near-duplicates."""
    body = "".join(f"    v{j} = x * {i * 31 + j} + {j * j + i}\n" for j in range(i % 5 + 3))
    before = f"def function_{i}(x):\n{body}    return x\n"
    return {
        "commit": f"c{i:03d}",
        "old_file": "m.py",
        "new_file": "m.py",
        "old_contents": before,
        "new_contents": before.replace("return x", f"return x + {i}"),
        "subject": f"Return a shifted value from function {i}",
        "lang": "Python",
    }


def jsonl(path: Path, rows: list[dict], extra_lines: tuple[str, ...] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + "".join(line + "\n" for line in extra_lines)
    )
    return path


def build(source: Path, out: Path, *extra: str) -> dict:
    cfg = compose_build(["source=files", f"source.paths=[{source}]", f"out={out}", *FAST, *extra])
    manifest = run_pipeline(to_build_config(cfg))
    assert manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values())
    return manifest


def command_line(source: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "data_pipeline.build", "source=files", f"source.paths=[{source}]"]
    cmd += [f"out={out}", *FAST, "plots=false", *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)


def assert_one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """Exit 2, one `error:` line on stderr, no traceback anywhere; returns the line."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    return errors[0]


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("meta", 5, "bad_meta"),
        ("meta", [1, 2], "bad_meta"),
        ("meta", "not json", "bad_meta"),
        ("subject", "Fix the \ud800 thing", "lone_surrogate"),
        ("old_contents", "x = '\ud800'\n", "lone_surrogate"),
        ("lang", "py\udfff", "lone_surrogate"),
    ],
)
def test_a_bad_row_is_a_counted_drop(tmp_path, field, value, reason):
    rows = [good_row(i) for i in range(4)]
    raw = jsonl(tmp_path / "raw.jsonl", rows, (json.dumps({**good_row(9), field: value}),))
    if "\ud800" in str(value) or "\udfff" in str(value):
        assert "\\ud" in raw.read_text()  # json.dumps escapes it; json.loads brings it back
    manifest = build(raw, tmp_path / "out")
    assert (manifest["input"], manifest["kept"]) == (5, 4)
    assert manifest["dropped"] == {f"source:{reason}": 1}


def test_a_truncated_jsonl_line_is_dropped_and_the_rest_kept(tmp_path):
    rows = [good_row(i) for i in range(3)]
    cut = json.dumps(good_row(7))[:60]
    raw = jsonl(tmp_path / "raw.jsonl", rows, (cut,))
    manifest = build(raw, tmp_path / "out")
    assert manifest["kept"] == 3 and manifest["dropped"] == {"source:broken_json": 1}


def test_a_folder_named_like_a_data_file_is_searched_not_read(tmp_path):
    jsonl(tmp_path / "in" / "a.jsonl", [good_row(i) for i in range(3)])
    jsonl(tmp_path / "in" / "x.jsonl" / "inner.jsonl", [good_row(i) for i in range(3, 5)])
    manifest = build(tmp_path / "in", tmp_path / "out")
    assert (manifest["input"], manifest["kept"], manifest["dropped"]) == (5, 5, {})
    assert manifest["input_identity"]["files"] == 2


def _damaged_parquet(path: Path, rows: list[dict]) -> None:
    """Two row groups; the second's first page header is overwritten."""
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=len(rows) // 2, compression="none")
    column = pq.ParquetFile(path).metadata.row_group(1).column(0)
    offset = column.dictionary_page_offset or column.data_page_offset
    data = bytearray(path.read_bytes())
    data[offset : offset + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))


def test_damaged_files_in_a_folder_keep_the_rows_read_before_the_damage(tmp_path, caplog):
    folder = tmp_path / "in"
    jsonl(folder / "a.jsonl", [good_row(i) for i in range(3)])
    (folder / "garbage.parquet").write_bytes(b"definitely not parquet" * 20)
    good = tmp_path / "good.parquet"
    pq.write_table(pa.Table.from_pylist([good_row(i) for i in range(3, 9)]), good)
    (folder / "truncated.parquet").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    _damaged_parquet(folder / "z_late.parquet", [good_row(i) for i in range(10, 16)])
    with caplog.at_level("WARNING", logger="data_pipeline.sources"):
        manifest = build(folder, tmp_path / "out")
    assert manifest["kept"] == 3 + 3  # a.jsonl, and z_late.parquet's first row group
    assert manifest["dropped"] == {"source:corrupt_file": 3}
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert all(name in warned for name in ("garbage.parquet", "truncated.parquet", "z_late.parquet"))


def test_filters_that_drop_every_row_write_an_empty_dataset(tmp_path):
    raw = jsonl(tmp_path / "raw.jsonl", [{**good_row(i), "subject": "Fixed it up nicely"} for i in range(4)])
    out = tmp_path / "out"
    proc = command_line(raw, out, "stats=true", "pipeline.sample=2")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "is empty: the pipeline dropped all 4 rows (4 filter:not_imperative)" in proc.stdout + proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["input"], manifest["kept"], manifest["dropped"]) == (4, 0, {"filter:not_imperative": 4})
    assert [(s["name"], s["kept"]) for s in manifest["stages"]] == [
        ("source", 4),
        ("filter", 0),
        ("dedup", 0),
        ("sample", 0),
    ]
    from datasets import load_from_disk

    assert len(load_from_disk(str(out / "dataset"))) == 0
    assert json.loads((out / "stats.json").read_text())["items"] == 0


def test_an_empty_input_is_one_error_line(tmp_path):
    (tmp_path / "raw.jsonl").write_text("\n")
    line = assert_one_error_line(command_line(tmp_path / "raw.jsonl", tmp_path / "out"))
    assert "no rows to read" in line and "raw.jsonl" in line
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_an_input_whose_rows_are_all_broken_is_one_error_line_after_the_manifest(tmp_path):
    raw = jsonl(
        tmp_path / "raw.jsonl",
        [{**good_row(i), "meta": 5} for i in range(3)],
        ('{"commit": ', json.dumps({**good_row(8), "new_contents": None})),
    )
    line = assert_one_error_line(command_line(raw, tmp_path / "out"))
    assert "all 5 rows were dropped at the source (3 bad_meta, 1 broken_json, 1 missing_field)" in line
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["dropped"] == {"source:bad_meta": 3, "source:broken_json": 1, "source:missing_field": 1}
    assert (manifest["input"], manifest["kept"]) == (5, 0) and manifest["error"] in line


def test_a_named_file_that_cannot_be_read_is_one_error_line(tmp_path):
    (tmp_path / "raw.parquet").write_bytes(b"garbage, not parquet" * 10)
    line = assert_one_error_line(command_line(tmp_path / "raw.parquet", tmp_path / "out"))
    assert "cannot read" in line and "raw.parquet" in line


def test_a_named_file_of_an_unknown_type_is_one_error_line(tmp_path):
    (tmp_path / "raw.csv").write_text("a,b\n1,2\n")
    line = assert_one_error_line(command_line(tmp_path / "raw.csv", tmp_path / "out"))
    assert "raw.csv" in line and ".jsonl, .json or .parquet" in line
