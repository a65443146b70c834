"""The model card training writes into DIR/final, and its re-rendering with evaluation results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import app_config
from datasets import Dataset

from train.model_card import main as model_card_main
from train.model_card import write_model_card
from train.sft_run import SFTRun
from train.synthetic_edits import synthetic_edits


def _built_data(folder: Path) -> Path:
    """A folder shaped like a `python -m data_pipeline.build` output (format=parquet)."""
    folder.mkdir()
    rows = synthetic_edits(30, seed=5)
    Dataset.from_list(rows).to_parquet(str(folder / "data.parquet"))
    manifest = {
        "input": 41,
        "kept": 30,
        "dropped": {"filter:not_imperative": 7, "dedup:near_duplicate": 4},
        "config": {"pipeline": {"name": "commits2023ft"}},
        "versions": {"editforge_commit": "0123456789abcdef0123"},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("card")
    data = _built_data(root / "built")
    app, resolved = app_config(
        [
            "recipe=tiny",
            f"run.output_dir={root / 'run'}",
            "run.report_to=none",
            "run.max_steps=2",
            f"data.datasets=[{{path: {data}}},{{synthetic: 40}}]",
            "data.val_size=4",
        ]
    )
    run = SFTRun(app, resolved)
    run.setup()
    run.train()
    final = run.save()
    run.cleanup()
    return final


def _results(path: Path, benchmark: str, pass1: float) -> Path:
    path.mkdir()
    metrics = {
        split: {"pass@1": pass1, "excess_code": None, "problems": 14, "samples": 14}
        for split in ("descriptive", "lazy")
    }
    (path / "results.json").write_text(json.dumps({"metrics": metrics, "benchmark": benchmark, "config": {}}))
    return path / "results.json"


@pytest.mark.slow
def test_training_writes_our_card_into_final(trained):
    card = (trained / "README.md").read_text()
    assert "recipe=tiny" in card
    assert "a Llama initialised at random" in card  # the base model: none, a config
    assert "| lr | 0.003 |" in card and "| packing | True |" in card and "| max_steps | 2 |" in card
    assert "| steps | 2 " in card and "final train loss" in card and "final validation loss" in card
    # The data: the build's manifest summarised, the synthetic share, what training kept.
    assert "pipeline=commits2023ft" in card and "0123456789ab" in card
    assert "30 rows kept of 41" in card
    assert "filter:not_imperative 7, dedup:near_duplicate 4" in card
    assert "40 synthetic Python edits" in card
    assert "Training examples:" in card
    assert "No results yet" in card
    assert "trl" not in card.lower()  # not the trainer's generic card


@pytest.mark.slow
def test_card_re_renders_with_evaluation_results(trained, tmp_path):
    write_model_card(trained, _results(tmp_path / "fixtures", "fixtures", 0.25))
    card = (trained / "README.md").read_text()
    assert "| fixtures | descriptive | 25.0 | – |" in card
    assert "No results yet" not in card
    # A second benchmark is added beside the first; the training sections stay.
    assert (
        model_card_main([str(trained), "--results", str(_results(tmp_path / "hef", "humanevalfix", 0.5))])
        == 0
    )
    card = (trained / "README.md").read_text()
    assert "| fixtures | lazy | 25.0 |" in card and "| humanevalfix | python" not in card
    assert "| humanevalfix | descriptive | 50.0 |" in card
    assert "recipe=tiny" in card and "30 rows kept of 41" in card


def test_card_command_rejects_what_is_not_a_model_or_results(tmp_path, capsys):
    assert model_card_main([str(tmp_path)]) == 2
    assert "editforge_config.yaml" in capsys.readouterr().err
    (tmp_path / "editforge_config.yaml").write_text("recipe: {name: x}\n")
    (tmp_path / "bad.json").write_text("{}")
    assert model_card_main([str(tmp_path), "--results", str(tmp_path / "bad.json")]) == 2
    assert "not an evaluation results.json" in capsys.readouterr().err


def test_card_shows_both_excess_code_metrics_named_and_reads_older_results(tmp_path):
    """The paper's ExcessCode and the repository's, each with its source; an entry kept before the
    rename (`excess_code` = the repository's) shows its numbers in the right columns."""
    from train.model_card import _evaluation

    today = {
        "descriptive": {
            "pass@1": 0.5,
            "excess_code": 3.0,
            "excess_code_repo": 8.5,
            "problems": 2,
            "samples": 4,
        }
    }
    legacy = {
        "descriptive": {"pass@1": 0.5, "excess_code": 8.5, "excess_code_stderr": 1.0, "excess_code_v1": 3.0}
    }
    lines = _evaluation({"new": {"metrics": today}, "old": {"metrics": legacy}}, tmp_path)
    assert (
        lines[0]
        == "| benchmark | split | pass@1 (%) | pass@10 (%) | ExcessCode (paper) | ExcessCode (repo) | problems | samples |"
    )
    assert "| new | descriptive | 50.0 | – | 3.00 | 8.50 | 2 | 4 |" in lines
    assert "| old | descriptive | 50.0 | – | 3.00 | 8.50 | – | – |" in lines
    sources = "\n".join(lines)
    assert "**ExcessCode (paper)** (`excess_code`): the CanItEdit paper, §5.1 and Table 3" in sources
    assert "**ExcessCode (repo)** (`excess_code_repo`): nuprl/CanItEdit `benchmark/pass_k.py`" in sources
