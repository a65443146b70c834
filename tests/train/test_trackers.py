"""`run.report_to`: transformers' tracker names, checked at start-up, and a run that reports to
TensorBoard and wandb (offline without a key) at once."""

from __future__ import annotations

import sys

import pytest
from conftest import app_config

from core.errors import ConfigError
from train.config import preflight
from train.sft_run import SFTRun
from train.trackers import TRACKERS, check_installed, missing_packages


def test_the_trackers_are_the_ones_transformers_knows():
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    assert set(TRACKERS) == set(INTEGRATION_TO_CALLBACK)


def test_a_tracker_whose_package_is_missing_is_named_with_the_package(monkeypatch):
    for module in ("tensorboard", "tensorboardX", "mlflow", "flytekit", "flytekitplugins"):
        monkeypatch.setitem(sys.modules, module, None)  # how Python marks a module as not installed
    assert missing_packages(["wandb", "tensorboard", "flyte", "kubeflow"]) == {
        "tensorboard": ["tensorboard"],
        "flyte": ["flytekit", "flytekitplugins-deck"],
    }
    app, _ = app_config(["recipe=tiny", "run.report_to=[wandb,mlflow]"])
    with pytest.raises(ConfigError, match=r"mlflow needs mlflow \(not installed\); pip install mlflow"):
        preflight(app)


def test_installed_trackers_pass():
    check_installed(["wandb", "kubeflow"])  # wandb is a core dependency; kubeflow needs no package


@pytest.mark.slow
def test_a_tiny_run_writes_tensorboard_events_beside_offline_wandb(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    app, resolved = app_config(
        [
            "recipe=tiny",
            f"run.output_dir={out}",
            "run.report_to=[tensorboard,wandb]",
            "run.max_steps=3",
            "run.logging_steps=1",
            "data.datasets=[{synthetic: 40}]",
            "data.val_size=0",
        ]
    )
    run = SFTRun(app, resolved)
    run.setup()
    run.train()
    run.save()
    run.cleanup()
    [events] = out.glob("runs/*/events.out.tfevents.*")  # transformers' logging_dir under the run folder
    scalars = EventAccumulator(str(events.parent))
    scalars.Reload()
    assert [e.step for e in scalars.Scalars("train/loss")] == [1, 2, 3]
    assert "train/tokens_per_second_per_device" in scalars.Tags()["scalars"]
    assert len(list((out / "wandb").glob("offline-run-*"))) == 1  # the default tracker still logs, offline
