"""`recipe.liger_kernels=auto` and the compile + Liger refusal: what the recipes turn on, where, and why.

The machine is stood in for by replacing `train.levers.liger_installed` and `cuda_available`, the only
two places the resolution asks it; the entry-point tests run `train/sft.py` as a user does.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, app_config

from core.errors import ConfigError
from core.layout import CONFIG_FILE, FINAL_DIR
from train import levers
from train.config import check_liger, preflight, settle_liger
from train.sft_run import training_arguments

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "CUDA_VISIBLE_DEVICES": ""}
ENV.pop("EDITFORGE_DEBUG", None)
SFT = [sys.executable, "train/sft.py", "run.report_to=none"]


@pytest.fixture
def machine(monkeypatch):
    """Set what this machine has: `machine(package=..., cuda=...)`; records which checks were asked."""
    asked: list[str] = []

    def set_machine(package: bool, cuda: bool) -> list[str]:
        monkeypatch.setattr(levers, "liger_installed", lambda: asked.append("package") or package)
        monkeypatch.setattr(levers, "cuda_available", lambda: asked.append("cuda") or cuda)
        return asked

    return set_machine


@pytest.mark.parametrize(
    ("package", "cuda", "enabled", "reason"),
    [
        (True, True, True, "CUDA is available"),
        (True, False, False, "no CUDA device"),
        (False, True, False, "not installed"),
        (False, False, False, "not installed"),
    ],
)
def test_auto_is_on_only_with_the_package_and_cuda(machine, package, cuda, enabled, reason):
    machine(package, cuda)
    choice = levers.resolve_liger("auto")
    assert (choice.enabled, choice.setting) == (enabled, "auto")
    assert reason in choice.reason


def test_auto_without_the_package_never_asks_for_cuda(machine):
    asked = machine(package=False, cuda=True)
    levers.resolve_liger("auto")
    assert asked == ["package"]  # asking CUDA imports torch: not needed to know Liger cannot run


@pytest.mark.parametrize("setting", [True, False])
def test_true_and_false_mean_the_same_on_every_machine(machine, setting):
    asked = machine(package=not setting, cuda=not setting)
    assert levers.resolve_liger(setting).enabled is setting
    assert asked == []


@pytest.mark.parametrize(
    ("value", "parsed"), [(True, True), ("false", False), ("Auto", "auto"), ("auto", "auto")]
)
def test_the_setting_takes_a_bool_or_auto(value, parsed):
    assert levers.parse_liger_setting(value) == parsed


def test_a_bad_setting_fails_validation_naming_the_key():
    with pytest.raises(ConfigError, match=r"recipe\.liger_kernels='sometimes'.*auto"):
        app_config(["recipe=tiny", "recipe.liger_kernels=sometimes"])


@pytest.mark.parametrize(
    "recipe", ["editcoder-1.3b", "editcoder-6.7b", "editcoder-33b", "editcoder-1.3b-fromconfig"]
)
def test_the_gpu_recipes_leave_liger_to_the_machine(recipe):
    assert app_config([f"recipe={recipe}"])[0].recipe.liger_kernels == "auto"


def test_the_log_line_names_the_choice_the_setting_and_the_reason(machine, caplog):
    machine(package=True, cuda=True)
    app, _ = app_config(["recipe=editcoder-1.3b-fromconfig"])
    with caplog.at_level(logging.INFO, logger="train.config"):
        settle_liger(app.recipe)
    lines = [r.getMessage() for r in caplog.records if r.name == "train.config"]
    assert lines == [
        "liger kernels: on (recipe.liger_kernels=auto: liger-kernel is installed and CUDA is available, "
        "the fastest measured)"
    ]
    assert app.recipe.liger_kernels is True  # settled: the training arguments and the record see a bool


def test_auto_off_reaches_the_training_arguments_as_off(machine, tmp_path):
    machine(package=False, cuda=False)
    app, _ = app_config(["recipe=tiny", "recipe.liger_kernels=auto", f"run.output_dir={tmp_path}"])
    args = training_arguments(app, tmp_path)
    assert not args.use_liger_kernel and args.liger_kernel_config is None


def test_compiled_layers_with_liger_auto_on_are_refused_naming_both_keys(machine):
    machine(package=True, cuda=True)
    app, _ = app_config(["recipe=editcoder-1.3b-fromconfig", "recipe.compile_layers=true"])
    with pytest.raises(ConfigError) as err:
        preflight(app)
    message = str(err.value)
    for needle in ("recipe.compile_layers=true", "recipe.liger_kernels=auto", "slower than Liger alone",
                   "recipe.compile_with_liger=true"):  # fmt: skip
        assert needle in message, message


def test_compiled_layers_run_where_auto_leaves_liger_off(machine):
    machine(package=False, cuda=True)
    app, _ = app_config(["recipe=editcoder-1.3b-fromconfig", "recipe.compile_layers=true"])
    assert not check_liger(app.recipe).enabled  # compile alone measured faster than no lever: allowed


def test_compile_with_liger_forces_the_pair(machine):
    machine(package=True, cuda=True)
    app, _ = app_config(
        ["recipe=editcoder-1.3b-fromconfig", "recipe.compile_layers=true", "recipe.compile_with_liger=true"]
    )
    assert settle_liger(app.recipe).enabled and app.recipe.compile_layers


def _sft(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([*SFT, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


def test_the_entry_point_refuses_compile_with_liger_in_one_line_before_the_model_loads(tmp_path):
    out = tmp_path / "run"
    done = _sft(
        "recipe=tiny", "recipe.liger_kernels=true", "recipe.compile_layers=true", f"run.output_dir={out}"
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-3000:]
    for needle in ("recipe.compile_layers=true", "recipe.liger_kernels=true", "slower than Liger alone",
                   "recipe.compile_with_liger=true"):  # fmt: skip
        assert needle in lines[0], lines[0]
    assert not out.exists()  # refused before anything was built or written


def test_cfg_job_shows_the_recipe_levers():
    done = _sft("recipe=editcoder-1.3b-fromconfig", "--cfg", "job")
    assert done.returncode == 0, done.stderr[-3000:]
    recipe = yaml.safe_load(done.stdout)["recipe"]
    assert (recipe["liger_kernels"], recipe["compile_layers"], recipe["compile_with_liger"]) == (
        "auto",
        False,
        False,
    )
    assert (recipe["per_device_batch_size"], recipe["grad_accum"]) == (2, 2)  # the paper's 4 rows per step
    forced = yaml.safe_load(
        _sft("recipe=editcoder-1.3b", "recipe.liger_kernels=false", "--cfg", "job").stdout
    )
    assert forced["recipe"]["liger_kernels"] is False


@pytest.mark.slow
@pytest.mark.skipif(
    levers.liger_installed(), reason="the line below is the one for a machine without liger-kernel"
)
def test_a_run_logs_its_liger_choice_at_start_up_and_records_it(tmp_path):
    out = tmp_path / "run"
    done = _sft("recipe=tiny", "recipe.liger_kernels=auto", "run.max_steps=1", "data.val_size=0",
                f"run.output_dir={out}")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "liger kernels:" in line]
    assert len(lines) == 1 and lines[0].endswith(
        "liger kernels: off (recipe.liger_kernels=auto: the liger-kernel package is not installed "
        "(pip install 'editforge[gpu]'))"
    ), done.stderr[-3000:]
    assert yaml.safe_load((out / FINAL_DIR / CONFIG_FILE).read_text())["recipe"]["liger_kernels"] is False
