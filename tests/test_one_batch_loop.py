"""Every batch of sandbox runs goes through `core.batches.run_missing`: evaluation's executions, the
audit's steps, the API-update build, the novel-API tasks and their validation."""

from __future__ import annotations

from collections import Counter

import pytest

from core import batches
from core.benchmarks import load_benchmark


@pytest.fixture
def labels(monkeypatch) -> Counter:
    """The labels of the loops that ran, through the real loop."""
    seen: Counter = Counter()
    real = batches.run_missing

    def counted(*args, **kwargs):
        seen[kwargs.get("label", "batch")] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(batches, "run_missing", counted)
    return seen


def test_evaluation_records(labels, tmp_path):
    from eval.samples import SampleStore, run_missing

    store = SampleStore(tmp_path / "samples.jsonl")
    run_missing(store, "execution", [(("p", "s", 0), 1)], lambda part: [{"passed": True}])
    assert labels == {"execution": 1} and store.of_type("execution")[("p", "s", 0)]["passed"]


def test_audit_steps(labels):
    from eval.audit.steps import StepStore, in_chunks

    problems = load_benchmark("fixtures", None).problems[:3]
    rows = in_chunks(StepStore(None, {}), "validity", problems, lambda c: {p.id: {"ok": 1} for p in c}, 2)
    assert labels == {"audit validity": 1} and sorted(rows) == sorted(p.id for p in problems)


def test_apiupdate_build(labels):
    from eval.apiupdate.builder import _chunked

    assert _chunked("verifying", [3, 1, 2], lambda part: [x * 2 for x in part]) == [6, 2, 4]
    assert labels == {"verifying": 1}


def test_novel_api_tasks_count_every_bundle(labels):
    from data_pipeline.novel_api.tasks import build_tasks

    progress: list[int] = []
    tasks, manifest = build_tasks([{"qualname": "a"}, {"qualname": "b"}], None, lambda b: [], progress.append)
    assert labels == {"tasks": 1} and progress == [1, 1]
    assert tasks == [] and manifest["dropped"] == {"no_usable_example": 2}


def test_novel_api_validate(labels):
    from data_pipeline.novel_api.app import ValidateConfig
    from data_pipeline.novel_api.validate import validate_tasks

    kept, manifest = validate_tasks(
        [{"id": "t1"}, {"id": "t2"}], {}, None, ValidateConfig(api_key_env="NONE")
    )
    assert labels == {"validate": 1} and [t["id"] for t in kept] == ["t1", "t2"]
    assert manifest["kept"] == 2 and manifest["c2"] == "skipped"
