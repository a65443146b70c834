"""Loading, mapping, mixing, shuffling and splitting edit datasets."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset, DatasetDict

from train.config import DataConfig, DatasetSpec
from train.edit_data import DataError, load_edit_splits, load_one


def _rows(n, prefix="r"):
    return [
        {
            "id": f"{prefix}{i}",
            "before": f"x = {i}\n",
            "after": f"x = {i + 1}\n",
            "instruction": "Increment x.",
        }
        for i in range(n)
    ]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_loads_jsonl_parquet_and_save_to_disk(tmp_path):
    rows = _rows(10)
    Dataset.from_list(rows).to_parquet(str(tmp_path / "d.parquet"))
    DatasetDict({"train": Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "dd"))
    Dataset.from_list(rows).save_to_disk(str(tmp_path / "flat"))
    (tmp_path / "folder").mkdir()
    _jsonl(tmp_path / "folder" / "part-0.jsonl", rows[:5])
    _jsonl(tmp_path / "folder" / "part-1.jsonl", rows[5:])
    for path in ("d.parquet", "dd", "flat", "folder"):
        ds = load_one(DatasetSpec(path=str(tmp_path / path)), seed=0)
        assert sorted(ds["id"]) == sorted(r["id"] for r in rows), path


def test_column_mapping_takes_commitpackft_names(tmp_path):
    rows = [{"old_contents": "a = 1\n", "new_contents": "a = 2\n", "subject": "Bump a", "commit": "c1"}]
    spec = DatasetSpec(
        path=str(_jsonl(tmp_path / "c.jsonl", rows)),
        columns={"old_contents": "before", "new_contents": "after", "subject": "instruction", "commit": "id"},
    )
    ds = load_one(spec, seed=0)
    assert ds[0]["before"] == "a = 1\n" and ds[0]["instruction"] == "Bump a" and ds[0]["id"] == "c1"


def test_a_missing_column_is_named(tmp_path):
    path = _jsonl(tmp_path / "bad.jsonl", [{"before": "a", "after": "b"}])
    with pytest.raises(DataError, match=r"instruction"):
        load_edit_splits(DataConfig(path=str(path)))
    with pytest.raises(DataError, match="subject"):
        load_one(DatasetSpec(path=str(path), columns={"subject": "instruction"}), seed=0)


def test_missing_path_and_empty_dataset_fail_clearly(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_edit_splits(DataConfig(path=str(tmp_path / "nope.jsonl")))
    empty = _jsonl(tmp_path / "e.jsonl", [{"before": "a", "after": " ", "instruction": "x"}])
    with pytest.raises(DataError, match="no usable rows"):
        load_edit_splits(DataConfig(path=str(empty)))


def test_rows_with_missing_fields_are_dropped_and_counted(tmp_path):
    rows = _rows(8) + [{"id": "n", "before": None, "after": "x", "instruction": "y"}]
    path = _jsonl(tmp_path / "d.jsonl", rows)
    splits = load_edit_splits(DataConfig(path=str(path), val_size=0))
    counts = splits.counts[str(path)]
    assert (
        counts["input"] == 9 and counts["dropped"]["missing_or_empty_field"] == 1 and len(splits.train) == 8
    )


def test_weights_scale_each_dataset_and_the_split_is_held_out(tmp_path):
    a = _jsonl(tmp_path / "a.jsonl", _rows(40, "a"))
    b = _jsonl(tmp_path / "b.jsonl", _rows(20, "b"))
    cfg = DataConfig(
        datasets=[DatasetSpec(path=str(a), weight=0.5), DatasetSpec(path=str(b), weight=2.0)], val_size=0.1
    )
    splits = load_edit_splits(cfg)
    ids = list(splits.train["id"]) + list(splits.validation["id"])
    assert sum(i.startswith("a") for i in ids) == 20 and sum(i.startswith("b") for i in ids) == 40
    assert len(splits.validation) == 6 and len(splits.train) == 54


def test_shuffle_is_deterministic_by_seed(tmp_path):
    path = str(_jsonl(tmp_path / "a.jsonl", _rows(50)))
    first = list(load_edit_splits(DataConfig(path=path, seed=1)).train["id"])
    assert first == list(load_edit_splits(DataConfig(path=path, seed=1)).train["id"])
    assert first != list(load_edit_splits(DataConfig(path=path, seed=2)).train["id"])


def test_synthetic_edits_follow_the_contract():
    splits = load_edit_splits(DataConfig(datasets=[DatasetSpec(synthetic=50)], val_size=5))
    assert len(splits.train) == 45 and len(splits.validation) == 5
    row = splits.train[0]
    assert {"id", "before", "after", "instruction", "lang", "source"} <= set(row)
    assert row["before"] != row["after"]
