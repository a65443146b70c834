"""Bad input never kills a build: bad rows and damaged files are counted drops, bad input is one line.

Rows go through the real pipeline (decontamination off, to stay fast); the input-level
failures run through `python -m data_pipeline.build` to see exactly what a user sees.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO, compose_build

from data_pipeline.build import to_build_config
from data_pipeline.config import SourceConfig
from data_pipeline.pipeline import run_pipeline
from data_pipeline.sources import iter_records

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


def _line(**fields) -> bytes:
    return json.dumps({**good_row(9), **fields}).encode()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (_line()[:-1] + b', "stars": ' + b"9" * 5000 + b"}", "huge_number"),  # valid JSON Python refuses
        (_line(id={"a": 1}), "wrong_type"),
        (_line(id=True), "wrong_type"),
        (_line(id=1.5), "wrong_type"),
        (_line(lang=["py"]), "wrong_type"),
        (_line(source=5), "wrong_type"),
        (_line(commit=["c1"]), "wrong_type"),
        (_line(id="a\x00b"), "binary"),
        (_line(lang="py\x00"), "binary"),
        (_line()[:-1] + b', "meta": {"score": NaN}}', "bad_meta"),
        (_line(meta='{"score": Infinity}'), "bad_meta"),
        (_line(meta={"log": "x" * 2000}), "oversized"),
        (_line(new_contents="\u00e9" * 600), "oversized"),  # 600 characters, 1200 UTF-8 bytes
    ],
)
def test_a_bad_line_is_one_counted_drop_and_the_next_line_is_read(tmp_path, line, reason):
    raw = tmp_path / "raw.jsonl"
    raw.write_bytes(line + b"\n" + json.dumps(good_row(1)).encode() + b"\n")
    results = list(iter_records(SourceConfig(kind="files", paths=[str(raw)], max_bytes=1000)))
    assert [r for _, r in results] == [reason, ""]


def test_ids_may_be_numbers_and_meta_is_strict_json(tmp_path):
    raw = tmp_path / "raw.jsonl"
    raw.write_bytes(_line(id=0) + b"\n" + _line(commit=7)[:-1] + b', "score": NaN, "rank": 3}\n')
    (first, _), (second, _) = iter_records(SourceConfig(kind="files", paths=[str(raw)]))
    assert first["id"] == "0" and second["id"] == "files:7:m.py"
    assert json.loads(second["meta"], parse_constant=pytest.fail)["rank"] == 3  # NaN left out, not written


def test_a_parquet_value_with_no_python_form_drops_only_its_row(tmp_path):
    table = pa.Table.from_pylist([good_row(i) for i in range(3)])
    days = pa.array([0, 2**62, 0], pa.date64())  # the middle one is past year 9999
    pq.write_table(table.append_column("released", days), tmp_path / "raw.parquet")
    results = list(iter_records(SourceConfig(kind="files", paths=[str(tmp_path / "raw.parquet")])))
    assert [r for _, r in results] == ["", "unconvertible_value", ""]


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


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc")
def test_a_file_that_fails_to_read_in_a_folder_is_one_corrupt_file(tmp_path, caplog):
    """/proc/self/mem fails every read with EIO: an unreadable file even for root."""
    jsonl(tmp_path / "in" / "a.jsonl", [good_row(i) for i in range(3)])
    (tmp_path / "in" / "b.jsonl").symlink_to("/proc/self/mem")
    with caplog.at_level("WARNING", logger="data_pipeline.sources"):
        manifest = build(tmp_path / "in", tmp_path / "out")
    assert (manifest["kept"], manifest["dropped"]) == (3, {"source:corrupt_file": 1})
    assert "b.jsonl" in caplog.text


def _contract_row(i: int) -> dict:
    raw = good_row(i)
    before, after, instruction = raw["old_contents"], raw["new_contents"], raw["subject"]
    return {"id": f"r{i}", "before": before, "after": after, "instruction": instruction, "meta": "{}"}


def test_a_disk_source_reads_the_table_of_a_build_folder_not_its_manifest(tmp_path):
    """README's combined build passes build folders: their manifest and stats are no rows."""
    from datasets import Dataset

    arrow_build, parquet_build = tmp_path / "a", tmp_path / "b"
    Dataset.from_list([_contract_row(i) for i in range(2)]).save_to_disk(str(arrow_build / "dataset"))
    parquet_build.mkdir()
    pq.write_table(
        pa.Table.from_pylist([_contract_row(i) for i in range(2, 4)]), parquet_build / "data.parquet"
    )
    for folder in (arrow_build, parquet_build):
        (folder / "manifest.json").write_text(json.dumps({"input": 2, "kept": 2}))
        (folder / "stats.json").write_text("{}")
    paths = f"source.paths=[{arrow_build},{parquet_build}]"
    manifest = build(tmp_path / "unused", tmp_path / "out", "source=disk", paths)
    assert (manifest["input"], manifest["kept"], manifest["dropped"]) == (4, 4, {})


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


def _fifo(path: Path) -> list[str]:
    os.mkfifo(path)
    return []


def _gzip(path: Path) -> list[str]:
    path.write_bytes(gzip.compress(json.dumps(good_row(1)).encode() + b"\n"))
    return []


def _bad_saved_dataset(path: Path) -> list[str]:
    path.mkdir()
    (path / "state.json").write_text("[1]")
    (path / "dataset_info.json").write_text("[]")
    return ["source=disk"]


@pytest.mark.parametrize(
    ("name", "make", "says"),
    [
        ("raw.jsonl", _fifo, "is not a regular file or a folder"),  # reading it would block forever
        ("raw.jsonl", _gzip, "gzip-compressed data; decompress it first"),
        ("saved", _bad_saved_dataset, "not a save_to_disk folder"),
    ],
)
def test_a_named_path_that_cannot_be_read_is_one_error_line(tmp_path, name, make, says):
    path = tmp_path / name
    line = assert_one_error_line(command_line(path, tmp_path / "out", *make(path)))
    assert says in line and str(path) in line


def test_a_named_file_of_an_unknown_type_is_one_error_line(tmp_path):
    (tmp_path / "raw.csv").write_text("a,b\n1,2\n")
    line = assert_one_error_line(command_line(tmp_path / "raw.csv", tmp_path / "out"))
    assert "raw.csv" in line and ".jsonl, .json or .parquet" in line


def test_a_line_too_long_to_hold_a_kept_row_is_skipped_unread(tmp_path):
    # max_bytes=2000 caps a line at 64,000 bytes; the giant line sits between good rows.
    giant = json.dumps({**good_row(90), "old_contents": "x" * 200_000})
    source = jsonl(tmp_path / "raw.jsonl", [good_row(i) for i in range(3)], (giant,))
    with source.open("a") as fh:
        fh.write("".join(json.dumps(good_row(i)) + "\n" for i in range(3, 6)))
    manifest = build(source, tmp_path / "out", "source.max_bytes=2000")
    assert manifest["dropped"] == {"source:oversized": 1} and manifest["kept"] == 6
