"""Raw rows from files: every bad row is dropped with a reason, nothing crashes."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from data_pipeline.config import SourceConfig
from data_pipeline.normalize import COMMITPACKFT_COLUMNS, normalize_row
from data_pipeline.sources import iter_records

CPFT = {
    "commit": "abc",
    "old_file": "a.py",
    "new_file": "a.py",
    "old_contents": "x = 1\n",
    "new_contents": "x = 2\n",
    "subject": "Bump x",
    "message": "Bump x\n\nBecause.",
    "lang": "Python",
    "license": "mit",
    "repos": "o/r",
}


def test_commitpackft_rows_map_onto_the_contract():
    row, reason = normalize_row(CPFT, COMMITPACKFT_COLUMNS, "bigcode/commitpackft", 0)
    assert reason == ""
    assert (row["before"], row["after"], row["instruction"], row["lang"]) == (
        "x = 1\n",
        "x = 2\n",
        "Bump x",
        "python",
    )
    assert row["id"] == "bigcode/commitpackft:abc:a.py"
    meta = json.loads(row["meta"])
    assert meta["message"] == "Bump x\n\nBecause." and meta["repos"] == "o/r"


def test_bad_rows_are_dropped_with_reasons(tmp_path):
    path = tmp_path / "raw.jsonl"
    lines = [
        json.dumps(CPFT),
        json.dumps({**CPFT, "commit": "n1", "old_contents": None}),
        json.dumps({k: v for k, v in CPFT.items() if k != "subject"} | {"commit": "n2"}),
        json.dumps({**CPFT, "commit": "n3", "new_contents": "a\x00b"}),
        json.dumps({**CPFT, "commit": "n4", "new_contents": 12}),
        '{"broken": ',
        json.dumps([1, 2]),
        json.dumps({**CPFT, "commit": "big", "new_contents": "x" * 100_000_000}),  # a 100 MB file
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe not json\n")
    results = list(iter_records(SourceConfig(kind="files", paths=[str(path)])))
    reasons = [r for _, r in results]
    assert reasons == [
        "",
        "missing_field",
        "missing_field",
        "binary",
        "wrong_type",
        "broken_json",
        "not_a_record",
        "oversized",
        "broken_json",
    ]


def test_undecodable_bytes_and_binary_blobs_in_parquet(tmp_path):
    table = pa.table(
        {
            "old_contents": [b"x = 1\n", b"\xff\xfe\xfa", b"PK\x03\x04\x00\x00"],
            "new_contents": [b"x = 2\n", b"y = 1\n", b"y = 1\n"],
            "subject": ["Bump x", "Bump y", "Bump z"],
            "commit": ["c1", "c2", "c3"],
        }
    )
    pq.write_table(table, tmp_path / "raw.parquet")
    results = list(iter_records(SourceConfig(kind="files", paths=[str(tmp_path)])))
    assert [r for _, r in results] == ["", "not_utf8", "binary"]
    assert results[0][0]["before"] == "x = 1\n"


def test_limit_reads_only_that_many_rows(tmp_path):
    path = tmp_path / "raw.jsonl"
    path.write_text("".join(json.dumps({**CPFT, "commit": f"c{i}"}) + "\n" for i in range(10)))
    assert len(list(iter_records(SourceConfig(kind="files", paths=[str(path)], limit=4)))) == 4
