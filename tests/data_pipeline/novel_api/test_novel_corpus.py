"""Novel-API corpora: split by API or leave-one-library-out, one knowledge cell per SFT example,
RAFT contexts, and no evaluation task in a corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_novel_tasks import BUNDLE, python, sandbox  # noqa: F401  (fixtures)
from test_novelapi_eval import SECOND

from core.entry import validate_overrides
from data_pipeline.novel_api.app import APP, _corpus
from data_pipeline.novel_api.corpus import SFT_CELLS, assign_splits, build_corpora, raft_rows, sft_rows
from data_pipeline.novel_api.raft import RAFTConfig
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
    assert len(sft) == 3 and all(json.loads(r["meta"])["cell"] == "Full" for r in sft)  # the paper's
    assert all("title_slug" not in r["after"] for r in sft)
    raft = pq.read_table(first / "corpus" / "raft" / "data.parquet").to_pylist()
    assert all("<doc id=1>" in r["instruction"] for r in raft)


def test_split_by_api_is_seeded():
    tasks = [{"id": f"{a}/{lvl}", "qualname": a, "library": "x"} for a in "abcdefghij" for lvl in (1, 2)]
    one, again = assign_splits(tasks, 0.3, seed=1, by="api"), assign_splits(tasks, 0.3, seed=1, by="api")
    assert one == again and assign_splits(tasks, 0.3, seed=2, by="api") != one
    test_apis = {t["qualname"] for t in one if t["split"] == "test"}
    assert len(test_apis) == 3 and all(t["split"] == "test" for t in one if t["qualname"] in test_apis)


def test_the_papers_task_level_split_is_the_default():
    """A single task-level split: an API's tasks may sit on both sides (the internalisation question)."""
    tasks = [{"id": f"{a}/{lvl}", "qualname": a, "library": "x"} for a in "abcdefghij" for lvl in (1, 2, 3)]
    one = assign_splits(tasks, 0.3, seed=1)
    assert one == assign_splits(tasks, 0.3, seed=1, by="task") != assign_splits(tasks, 0.3, seed=2)
    assert sum(t["split"] == "test" for t in one) == 9  # 30 % of the 30 tasks
    sides = {a: {t["split"] for t in one if t["qualname"] == a} for a in "abcdefghij"}
    assert any(len(s) == 2 for s in sides.values())  # some API trained on and evaluated
    with pytest.raises(ValueError, match="held-out library"):
        assign_splits(tasks, 0.3, seed=1, by="library")
    with pytest.raises(ValueError, match="corpus.split"):
        assign_splits(tasks, 0.3, seed=1, by="repo")


def test_sft_knowledge_is_the_full_bundle_unless_asked():
    tasks = [{"id": f"t{i}", "qualname": "novlib.text.slugify", "library": "novlib", "context": "c",
              "reference": "r", "description": "d"} for i in range(6)]  # fmt: skip
    bundles = {"novlib.text.slugify": {"qualname": "novlib.text.slugify", "S": {"signature": "(text)"}}}
    full = [json.loads(r["meta"])["cell"] for r in sft_rows(tasks, bundles, seed=0)]
    drawn = [json.loads(r["meta"])["cell"] for r in sft_rows(tasks, bundles, seed=0, cell="random")]
    assert full == ["Full"] * 6 and set(drawn) <= set(SFT_CELLS) and len(set(drawn)) > 1
    with pytest.raises(ValueError, match="sft_cell"):
        sft_rows(tasks, bundles, seed=0, cell="everything")


def test_a_raft_row_edits_the_tasks_code_with_the_documents_in_its_instruction():
    tasks = [{"id": f"t{i}", "qualname": f"novlib.m.f{i}", "library": "novlib", "context": f"x = {i}  # TODO\n",
              "reference": f"x = f{i}()\n", "description": "use it"} for i in range(8)]  # fmt: skip
    bundles = {t["qualname"]: {"qualname": t["qualname"], "S": {"signature": "()"}} for t in tasks}
    rows = raft_rows(tasks, bundles, RAFTConfig(seed=0))
    for task, row in zip(tasks, rows, strict=True):
        assert row["before"] == task["context"] and row["after"] == task["reference"]
        assert "<doc id=1>" in row["instruction"] and "<doc id=" not in row["before"]


def test_same_api_rows_sharing_a_test_description_are_kept_and_copies_dropped(tmp_path, sandbox, python):  # noqa: F811
    """The task-level split puts an API's levels on both sides; they share one template description
    (and one bundle), so equal instructions must not drop them. A real copy of a test task is dropped,
    and the manifest accounts for every row."""
    folder = _folder(tmp_path, "novlib", BUNDLE, sandbox, python)
    tasks = [json.loads(line) for line in (folder / "tasks.jsonl").read_text().splitlines()]
    bundles = {b["qualname"]: b for b in map(json.loads, (folder / "bundles.jsonl").read_text().splitlines())}
    test = tasks[1]  # an L2: its API's L1 and L3 stay in training
    same_api = [t for t in tasks if t["qualname"] == test["qualname"] and t["id"] != test["id"]]
    shared = [t for t in same_api if t["description"] == test["description"]]
    assert [t["id"] for t in shared] == [test["id"].replace("/L2", "/L3")]  # one template sentence for L2, L3
    copy = {**test, "id": f"{test['id']}-copy"}  # the same task under another id
    split = [{**t, "split": "test" if t["id"] == test["id"] else "train"} for t in [*tasks, copy]]
    write_jsonl(split, folder / "tasks.jsonl")
    raft = RAFTConfig(distractors=0, oracle_fraction=1.0, negatives="random", seed=0)
    manifest = build_corpora(folder, ["sft"], split, bundles, seed=0, raft=raft)["sft"]
    kept = {
        json.loads(r["meta"])["task"]
        for r in pq.read_table(folder / "corpus" / "sft" / "data.parquet").to_pylist()
    }
    assert {t["id"] for t in same_api} <= kept and copy["id"] not in kept
    assert manifest["dropped"] == {"contaminated_code": 1}
    assert manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values()) == len(tasks)
    assert manifest["kept_sharing_test_description"] == {"same_api": len(shared), "other_api": 0}
    assert "contaminated_code" in manifest["drop_reasons"]
