"""Novel-API corpora: split by API or leave-one-library-out, one knowledge cell per SFT example,
RAFT contexts, and no evaluation task in a corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from test_novel_tasks import BUNDLE, python, sandbox  # noqa: F401  (fixtures)
from test_novelapi_eval import SECOND

from core.entry import validate_overrides
from data_pipeline.novel_api.app import APP, _corpus
from data_pipeline.novel_api.corpus import SFT_CELLS, assign_splits
from data_pipeline.novel_api.tasks import build_tasks, write_jsonl


def _folder(root: Path, library: str, bundle: dict, sandbox, python) -> Path:  # noqa: F811
    out = root / library
    out.mkdir()
    renamed = {**bundle, "library": library}
    tasks, _ = build_tasks([renamed], sandbox)
    write_jsonl([{**t, "python": python} for t in tasks], out / "tasks.jsonl")
    write_jsonl([renamed], out / "bundles.jsonl")
    (out / "discovery.json").write_text(json.dumps({"library": library, "python": {"new": python}}))
    return out


def test_leave_one_library_out(tmp_path, sandbox, python):  # noqa: F811
    first = _folder(tmp_path, "novlib", BUNDLE, sandbox, python)
    second = _folder(tmp_path, "otherlib", SECOND, sandbox, python)
    cfg = validate_overrides(
        APP,
        [
            "stage=corpus",
            f"out={first}",
            f"corpus.include=[{second}]",
            "corpus.holdout=otherlib",
            "corpus.distractors=1",
        ],
    )
    summary = _corpus(cfg, first)
    tasks = [json.loads(line) for line in (first / "tasks.jsonl").read_text().splitlines()]
    assert {t["library"] for t in tasks if t["split"] == "test"} == {"otherlib"}
    assert {t["library"] for t in tasks if t["split"] == "train"} == {"novlib"}
    assert summary["train_tasks"] == 3 and summary["test_tasks"] == 3
    sft = pq.read_table(first / "corpus" / "sft" / "data.parquet").to_pylist()
    assert len(sft) == 3 and all(json.loads(r["meta"])["cell"] in SFT_CELLS for r in sft)
    assert all("title_slug" not in r["after"] for r in sft)
    raft = pq.read_table(first / "corpus" / "raft" / "data.parquet").to_pylist()
    assert all("<doc id=1>" in r["instruction"] for r in raft)


def test_split_by_api_is_seeded():
    tasks = [{"id": f"{a}/{lvl}", "qualname": a, "library": "x"} for a in "abcdefghij" for lvl in (1, 2)]
    one, again = assign_splits(tasks, 0.3, seed=1), assign_splits(tasks, 0.3, seed=1)
    assert one == again and assign_splits(tasks, 0.3, seed=2) != one
    test_apis = {t["qualname"] for t in one if t["split"] == "test"}
    assert len(test_apis) == 3 and all(t["split"] == "test" for t in one if t["qualname"] in test_apis)
