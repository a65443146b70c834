"""`train/rl.py`'s config: the RL recipes compose and validate, a mistake is one line before anything
heavy loads, and the trainer's arguments carry the recipe (algorithm, weights, vLLM's stop strings)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import REPO

from core.entry import validate_overrides
from core.errors import ConfigError
from train.rl import APP

RL_RECIPES = sorted(p.stem for p in (REPO / "recipes").glob("*.yaml") if p.stem.endswith(("-grpo", "-rloo")))


@pytest.mark.parametrize("recipe", RL_RECIPES)
def test_every_rl_recipe_composes_and_validates(recipe):
    app = validate_overrides(APP, [f"recipe={recipe}"])
    assert app.recipe.name == recipe and app.recipe.model.path
    assert app.reward.weights()["pass"] > 0


def test_the_1_3b_recipe_runs_vllm_beside_zero3_and_weights_delegated_passes_down():
    app = validate_overrides(APP, ["recipe=editcoder-1.3b-grpo"])
    assert app.recipe.generation == "vllm_colocate" and app.deepspeed_config == "zero3"
    assert app.recipe.algorithm == "dapo" and app.reward.delegated == 0.5


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("recipe.algorithm=ppo", "recipe.algorithm='ppo': choose one of"),
        ("recipe.num_generations=1", "num_generations must be >= 2"),
        ("reward.delegated=2", "reward.delegated=2.0: give a value in [0, 1]"),
        ("reward.passed=0", "every reward weight is 0"),
        ("recipe.generation=vllm_server", "needs recipe.vllm_server_url"),
        ("recipe.model.path=null", "recipe.model.path=<an SFT run's final/ or a hub id> is required"),
        ("tasks.synthetic=0", "give tasks.sources (benchmark files) or tasks.synthetic=N"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_it(override, message):
    overrides = ["recipe=tiny-grpo", override]
    if override == "reward.passed=0":
        overrides.append("reward.tests=0")
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_overrides(APP, overrides)


def _one_line_error(*overrides: str) -> str:
    run = subprocess.run(
        [sys.executable, "train/rl.py", "recipe=tiny-grpo", *overrides], cwd=REPO, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    return lines[0]


def test_the_cli_stops_in_a_line_before_loading_torch(tmp_path):
    missing = f"recipe.model.path={tmp_path / 'no-model'}"
    assert "recipe.lrr" in _one_line_error(missing, "recipe.lrr=1")
    assert "recipe.model.path" in _one_line_error(missing)


def test_the_trainer_arguments_follow_the_recipe(tmp_path):
    from train.rl_run import rl_arguments

    app = validate_overrides(APP, ["recipe=tiny-grpo", "recipe.algorithm=dr_grpo", "reward.tests=0.5"])
    args = rl_arguments(app, tmp_path, [1.0, 0.5])
    assert type(args).__name__ == "GRPOConfig" and args.loss_type == "dr_grpo"
    assert args.num_generations == 16 and args.reward_weights == [1.0, 0.5] and not args.use_vllm
    rloo = rl_arguments(
        validate_overrides(APP, ["recipe=tiny-grpo", "recipe.algorithm=rloo"]), tmp_path, [1.0]
    )
    assert type(rloo).__name__ == "RLOOConfig"
