"""`python -m eval.tables compare` shows both published ExcessCode metrics, each named with its
source, and reads a results.json written when `excess_code` held the repository's metric."""

from __future__ import annotations

import json
from pathlib import Path

from eval.compare.tables import tables


def _run(folder: Path, model: str, descriptive: dict) -> Path:
    folder.mkdir()
    metrics = {"descriptive": {"pass@1": 0.5, "pass@1_stderr": 0.1, **descriptive}}
    results = {"metrics": metrics, "benchmark": "canitedit", "model": model, "config": {}}
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def test_compare_shows_paper_and_repo_excess_code(tmp_path):
    new = _run(
        tmp_path / "new", "a", {"excess_code": 3.0, "excess_code_repo": 8.5, "excess_code_repo_stderr": 1.0}
    )
    old = _run(tmp_path / "old", "b", {"excess_code": 6.0, "excess_code_stderr": 2.0, "excess_code_v1": 4.0})
    text = tables([new, old])
    assert "| descriptive | ExcessCode (paper) | 3.00 | 4.00 |" in text
    assert "| descriptive | ExcessCode (repo) | 8.50 ± 1.00 | 6.00 ± 2.00 |" in text
    assert "- **ExcessCode (paper)** (`excess_code`): the CanItEdit paper, §5.1 and Table 3" in text
    assert "- **ExcessCode (repo)** (`excess_code_repo`): nuprl/CanItEdit" in text


def test_compare_without_coverage_shows_no_excess_code(tmp_path):
    run = _run(tmp_path / "plain", "a", {"excess_code": None, "excess_code_repo": None})
    assert "ExcessCode" not in tables([run])
