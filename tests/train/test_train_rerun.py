"""A training run started again in the folder of a finished run: through the real entry point, the
second run says so and leaves every output as it was; a longer schedule trains on from the last
checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


def _train(out: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "train/sft.py",
        "recipe=tiny",
        f"run.output_dir={out}",
        "run.report_to=none",
        "data.datasets=[{synthetic: 120}]",
        "data.val_size=0",
        "recipe.per_device_batch_size=4",
        "run.save_steps=2",
        *extra,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _outputs(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_finished_run_started_again_is_left_as_it_was(tmp_path):
    out = tmp_path / "run"
    _train(out, "run.max_steps=4")
    before = _outputs(out)
    metrics = json.loads((out / "metrics.json").read_text())["last"]
    assert metrics["step"] == 4 and metrics["train_loss"] > 0
    card = (out / "final" / "README.md").read_text()
    again = _train(out, "run.max_steps=4")
    assert "already holds this run, finished at step 4" in again.stderr
    assert _outputs(out) == before  # card, metrics, weights, checkpoints: byte for byte
    longer = _train(out, "run.max_steps=6")
    assert "already holds" not in longer.stderr
    last = json.loads((out / "metrics.json").read_text())["last"]
    assert last["step"] == 6 and last["train_loss"] > 0
    assert (out / "final" / "README.md").read_text() != card
