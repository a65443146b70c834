"""Every recipe and config in the repo loads and validates; bad keys and values fail early."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, app_config, compose

from core.errors import ConfigError
from train.config import (
    LoraConfig,
    QuantizationConfig,
    RecipeConfig,
    RecipeModelConfig,
    TinyModelConfig,
    deepspeed_config_path,
    preflight,
)

# RL recipes (train/rl.py) end in their algorithm: tests/train/test_rl_config.py composes them
RECIPES = sorted(p.stem for p in (REPO / "recipes").glob("*.yaml") if not p.stem.endswith(("-grpo", "-rloo")))
DATA_CONFIGS = sorted(p.stem for p in (REPO / "configs" / "data").glob("*.yaml"))
DEEPSPEED = sorted(p.stem for p in (REPO / "configs" / "deepspeed").glob("*.json"))
DEEPSPEED_OPTIONS = sorted(p.stem for p in (REPO / "configs" / "deepspeed").glob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_composes_and_validates(recipe):
    app, resolved = app_config([f"recipe={recipe}"])
    assert app.recipe.name == recipe
    assert resolved["run"]["output_dir"] == f"runs/{recipe}"


@pytest.mark.parametrize("size", ["1.3b", "6.7b", "33b"])
def test_editcoder_recipes_carry_the_paper_settings(size):
    app, _ = app_config([f"recipe=editcoder-{size}"])
    r = app.recipe
    assert (r.lr, r.lr_scheduler, r.warmup_steps, r.epochs, r.max_length) == (2e-5, "linear", 10, 8, 8192)
    assert r.per_device_batch_size * 8 * r.grad_accum == 32
    assert r.packing and r.dtype.value == "bf16" and r.attn_implementation.value == "auto"
    # 1.3B fits each GPU: ZeRO-2, no checkpointing; 6.7B and up: ZeRO-3 with explicit buckets, checkpointing
    fits = size == "1.3b"
    assert app.deepspeed_config == ("zero2" if fits else "zero3-large") and r.gradient_checkpointing != fits
    assert r.model.path == f"deepseek-ai/deepseek-coder-{size}-base"
    lora, _ = app_config([f"recipe=editcoder-{size}-lora"])
    assert lora.recipe.lora is not None and lora.deepspeed_config is None
    assert lora.recipe.per_device_batch_size * lora.recipe.grad_accum == 32


@pytest.mark.parametrize("data", DATA_CONFIGS)
def test_every_data_config_validates(data):
    app, _ = app_config(["recipe=tiny", f"data={data}"])
    assert app.data.specs()


@pytest.mark.parametrize("name", DEEPSPEED)
def test_every_deepspeed_config_loads(name):
    cfg = json.loads(Path(deepspeed_config_path(name)).read_text())
    zero = cfg["zero_optimization"]
    assert zero["stage"] in (2, 3)
    if zero["stage"] == 3:
        assert zero["stage3_gather_16bit_weights_on_model_save"] is True
    app, _ = app_config(["recipe=tiny", f"deepspeed={name}"])
    assert app.deepspeed_config == name


def test_the_large_model_zero3_config_sizes_its_buckets_explicitly():
    zero = json.loads(Path(deepspeed_config_path("zero3-large")).read_text())["zero_optimization"]
    for key in ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"):
        assert isinstance(zero[key], int), key  # not "auto" (sized from the hidden size by transformers)
    assert zero["reduce_bucket_size"] >= 4096 * 4096 * 10  # well above auto's hidden^2 at 6.7B


def test_every_deepspeed_option_has_its_json_and_a_custom_path_works(tmp_path):
    assert sorted([*DEEPSPEED, "none"]) == DEEPSPEED_OPTIONS
    custom = tmp_path / "ds.json"
    custom.write_text(json.dumps({"zero_optimization": {"stage": 2}}))
    app, _ = app_config(["recipe=tiny", f"deepspeed_config={custom}"])
    assert deepspeed_config_path(app.deepspeed_config) == str(custom.resolve())


def test_overrides_from_the_command_line_reach_the_config(tmp_path):
    app, _ = app_config(
        [
            "recipe=editcoder-6.7b",
            "recipe.lr=1e-5",
            "deepspeed=zero3-offload",
            f"data.path={tmp_path}",
            f"run.output_dir={tmp_path}/out",
            "run.max_steps=7",
        ]
    )
    assert app.recipe.lr == 1e-5 and app.deepspeed_config == "zero3-offload" and app.run.max_steps == 7
    assert [s.path for s in app.data.specs()] == [str(tmp_path)]


def test_an_unknown_key_fails_and_names_the_key():
    with pytest.raises(Exception, match="lrr"):
        compose(["recipe=tiny", "recipe.lrr=1e-5"])


def test_a_wrong_enum_value_fails_and_names_the_key():
    with pytest.raises(Exception, match="loss_on"):
        compose(["recipe=tiny", "recipe.loss_on=everything"])


@pytest.mark.parametrize(
    "override, message",
    [
        ("recipe.prompt_format=nope", "prompt_format"),
        ("deepspeed_config=zero9", "zero9"),
        ("run.report_to=tensorbord", "unknown tracker 'tensorbord'"),
        ("run.report_to=[all,wandb]", "stand alone"),
        ("run.push_to_hub=true", "needs run.hub_model_id"),
        ("run.hub_model_id=a/b/c", "NAME or ORG/NAME"),
        ("recipe.max_length=0", "max_length"),
        ("recipe.wandb.mode=onlin", "wandb.mode"),
    ],
)
def test_bad_values_fail_with_a_message_naming_them(override, message):
    with pytest.raises(ConfigError, match=message):
        app_config(["recipe=tiny", override])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["recipe.gradient_checkpointing_every=2"], "set recipe.gradient_checkpointing=true"),
        (["recipe.gradient_checkpointing_every=0"], "_every must be >= 1"),
        (["recipe.attn_implementation=varlen", "recipe.packing=false"], "set recipe.packing=true"),
        (["recipe.compile_layers=true", "deepspeed=zero3"], "recipe.compile_layers=false"),
    ],
)
def test_conflicting_speed_levers_fail_and_name_the_fix(overrides, message):
    with pytest.raises(ConfigError, match=message):
        app_config(["recipe=tiny", *overrides])


def test_speed_levers_reach_the_config():
    app, _ = app_config(
        ["recipe=tiny", "recipe.gradient_checkpointing=true", "recipe.gradient_checkpointing_every=3",
         "recipe.compile_layers=true", "deepspeed=zero2", "recipe.attn_implementation=varlen"]
    )  # fmt: skip
    r = app.recipe
    assert (r.gradient_checkpointing_every, r.compile_layers) == (3, True)
    assert r.attn_implementation.value == "varlen"


@pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is not None, reason="liger-kernel is here")
def test_liger_kernels_without_the_package_stop_at_preflight_naming_it():
    app, _ = app_config(["recipe=tiny", "recipe.liger_kernels=true"])
    with pytest.raises(ConfigError, match="liger-kernel package"):
        preflight(app)


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="flash-attn is installed here")
@pytest.mark.parametrize("size", ["1.3b", "6.7b", "33b"])
def test_editcoder_recipes_pass_preflight_without_flash_attn(size, tmp_path):
    # the base as a local folder: offline, the hub id would fail preflight for want of the model
    (tmp_path / "config.json").write_text("{}")
    app, _ = app_config(
        [f"recipe=editcoder-{size}", "data.datasets=[{synthetic: 10}]", f"recipe.model.path={tmp_path}"]
    )
    preflight(app)  # auto: no flash-attn needed


def test_preflight_refuses_a_base_model_that_is_neither_a_folder_nor_reachable(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for path, words in ((tmp_path / "missing", "no such folder"), ("someone/uncached-model", "offline")):
        app, _ = app_config(
            ["recipe=editcoder-1.3b", "data.datasets=[{synthetic: 10}]", f"recipe.model.path={path}"]
        )
        with pytest.raises(ConfigError, match=words):
            preflight(app)


def test_wandb_enabled_false_turns_wandb_off_and_keeps_other_trackers():
    app, _ = app_config(["recipe=tiny", "recipe.wandb.enabled=false"])
    assert app.run.report_to == []
    app, _ = app_config(["recipe=tiny", "recipe.wandb.enabled=false", "run.report_to=[wandb,tensorboard]"])
    assert app.run.report_to == ["tensorboard"]


@pytest.mark.parametrize(
    "value, trackers",
    [("wandb", ["wandb"]), ("none", []), ("all", ["all"]), ("'wandb,mlflow'", ["wandb", "mlflow"]),
     ("[tensorboard,wandb]", ["tensorboard", "wandb"])],
)  # fmt: skip
def test_report_to_takes_what_transformers_takes(value, trackers):
    app, _ = app_config(["recipe=tiny", f"run.report_to={value}"])
    assert app.run.report_to == trackers


@pytest.mark.parametrize("size", ["6.7b", "33b"])
def test_qlora_recipes_quantise_the_base_and_keep_the_lora_recipe(size):
    from train.modeling import quantization_config

    app, _ = app_config([f"recipe=editcoder-{size}-qlora"])
    lora, _ = app_config([f"recipe=editcoder-{size}-lora"])
    r = app.recipe
    assert r.model.path == lora.recipe.model.path == f"deepseek-ai/deepseek-coder-{size}-base"
    assert app.deepspeed_config is None and r.gradient_checkpointing and r.dtype.value == "bf16"
    assert (r.lr, r.per_device_batch_size * r.grad_accum) == (lora.recipe.lr, 32)
    assert (r.lora.r, r.lora.alpha, r.lora.merge) == (lora.recipe.lora.r, lora.recipe.lora.alpha, True)
    assert r.lora.peft_target_modules() == "all-linear" and r.optim.value == "paged_adamw_32bit"
    bnb = quantization_config(r.quantization)
    assert bnb.load_in_4bit and not bnb.load_in_8bit
    assert bnb.bnb_4bit_quant_type == "nf4" and bnb.bnb_4bit_use_double_quant
    assert bnb.bnb_4bit_compute_dtype == torch.bfloat16


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["recipe=editcoder-6.7b-qlora", "recipe.lora=null"], "set recipe.lora"),
        (["recipe=editcoder-6.7b-qlora", "deepspeed=zero3"], "deepspeed=none"),
        (["recipe=editcoder-6.7b-qlora", "recipe.lora.target_modules=[all-linear,q_proj]"], "alone"),
    ],
)
def test_quantization_rejects_what_qlora_cannot_train(overrides, message):
    with pytest.raises(ConfigError, match=message):
        app_config(overrides)


def test_quantization_of_a_model_built_from_a_config_is_rejected():
    recipe = RecipeConfig(
        model=RecipeModelConfig(tiny=TinyModelConfig()), lora=LoraConfig(), quantization=QuantizationConfig()
    )
    with pytest.raises(ConfigError, match="set recipe.model.path"):
        recipe.validate()


def test_lora_merge_under_zero3_is_rejected():
    with pytest.raises(ConfigError, match="ZeRO-3"):
        app_config(["recipe=tiny-lora", "recipe.lora.merge=true", "deepspeed=zero3"])


def _sft(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "train" / "sft.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("recipe", ["editcoder-6.7b", "editcoder-6.7b-qlora"])
def test_cfg_job_prints_the_resolved_editcoder_config(tmp_path, recipe):
    out = _sft(f"recipe={recipe}", "--cfg", "job", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "deepseek-ai/deepseek-coder-6.7b-base" in out.stdout and "max_length: 8192" in out.stdout
    assert "attn_implementation: auto" in out.stdout  # resolved here, where flash-attn is not installed
    assert ("quant_type: nf4" in out.stdout) == recipe.endswith("qlora")


def test_flash_attention_on_cpu_stops_before_loading_anything(tmp_path):
    out = _sft(
        "recipe=tiny",
        "recipe.attn_implementation=flash_attention_2",
        f"run.output_dir={tmp_path}/r",
        cwd=tmp_path,
    )
    assert out.returncode != 0
    assert "flash_attention_2 needs CUDA" in out.stdout + out.stderr
    assert "Tokenizing" not in out.stdout + out.stderr and not (tmp_path / "r" / "tokenizer-cache").exists()
