"""In-process training runs of the tiny recipes: LoRA, resume, non-finite loss, micro-batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import app_config
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, TrainerCallback

from train.sft_run import SFTRun
from train.trainer import NonFiniteLossError

pytestmark = pytest.mark.slow


def _overrides(out: Path, *extra: str) -> list[str]:
    return [
        f"run.output_dir={out}",
        "run.report_to=none",
        "data.datasets=[{synthetic: 160}]",
        "data.val_size=0",
        "recipe.per_device_batch_size=2",
        *extra,
    ]


def _run(overrides: list[str], callbacks=None) -> SFTRun:
    app, resolved = app_config(overrides)
    run = SFTRun(app, resolved, callbacks=callbacks)
    run.setup()
    run.train()
    run.save()
    run.cleanup()
    return run


class _Crash(TrainerCallback):
    """Simulates a job killed right after the checkpoint of `step` was written."""

    def __init__(self, step: int):
        self.step = step

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt("simulated crash")


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def test_resume_ends_with_the_same_weights_as_an_uninterrupted_run(tmp_path):
    common = ["recipe=tiny", "run.max_steps=8", "run.save_steps=2", "run.save_total_limit=10"]
    _run(_overrides(tmp_path / "whole", *common))
    with pytest.raises(KeyboardInterrupt):
        _run(_overrides(tmp_path / "crashed", *common), callbacks=[_Crash(4)])
    assert not (tmp_path / "crashed" / "final").exists()
    resumed = _run(_overrides(tmp_path / "crashed", *common))
    assert Path(resumed.resume_from).name == "checkpoint-4"
    whole, again = _weights(tmp_path / "whole" / "final"), _weights(tmp_path / "crashed" / "final")
    assert whole.keys() == again.keys()
    for name in whole:
        torch.testing.assert_close(again[name], whole[name], rtol=0, atol=1e-6)


def test_resume_never_refuses_a_folder_with_checkpoints(tmp_path):
    from core.errors import ConfigError

    _run(_overrides(tmp_path / "r", "recipe=tiny", "run.max_steps=2", "run.save_steps=2"))
    app, resolved = app_config(_overrides(tmp_path / "r", "recipe=tiny", "run.resume=never"))
    with pytest.raises(ConfigError, match="resume=auto"):
        SFTRun(app, resolved)


def test_lora_changes_only_adapters_saves_them_and_merges_on_request(tmp_path):
    captured = {}

    class _Snapshot(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            captured["before"] = {k: v.detach().clone() for k, v in model.named_parameters()}

        def on_train_end(self, args, state, control, model=None, **kwargs):
            captured["after"] = {k: v.detach().clone() for k, v in model.named_parameters()}

    out = tmp_path / "lora"
    _run(_overrides(out, "recipe=tiny-lora", "run.max_steps=6", "recipe.lora.merge=true"), [_Snapshot()])
    before, after = captured["before"], captured["after"]
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all("lora_" in k for k in changed)
    assert all(torch.equal(before[k], after[k]) for k in before if "lora_" not in k)

    adapter = out / "final-adapter"
    assert (adapter / "adapter_config.json").exists() and (adapter / "adapter_model.safetensors").exists()
    merged = AutoModelForCausalLM.from_pretrained(str(out / "final"))
    assert not any("lora" in k for k in merged.state_dict())
    base_q = before["base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"]
    assert not torch.allclose(merged.model.layers[0].self_attn.q_proj.weight, base_q)


def test_a_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    out = tmp_path / "nan"
    with pytest.raises(NonFiniteLossError, match="non-finite loss"):
        _run(
            _overrides(
                out,
                "recipe=tiny",
                "recipe.lr=1e12",
                "recipe.warmup_steps=0",
                "run.max_steps=30",
                "run.save_steps=1",
                "run.save_total_limit=50",
            )
        )
    checkpoints = sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert checkpoints and not (out / "final").exists()
    for ckpt in checkpoints:  # every kept checkpoint holds finite weights
        assert all(torch.isfinite(t).all() for t in _weights(ckpt).values())
    state = json.loads((checkpoints[-1] / "trainer_state.json").read_text())
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in state["log_history"] if "loss" in h)


def test_gradient_accumulation_matches_a_bigger_micro_batch(tmp_path):
    """Micro-batch 1 x accumulation 4 trains like micro-batch 4 x accumulation 1 (loss normalised by tokens)."""
    common = ["recipe=tiny", "run.max_steps=3", "run.save_steps=100"]
    _run(_overrides(tmp_path / "big", *common, "recipe.per_device_batch_size=4", "recipe.grad_accum=1"))
    _run(_overrides(tmp_path / "accum", *common, "recipe.per_device_batch_size=1", "recipe.grad_accum=4"))
    big, accum = _weights(tmp_path / "big" / "final"), _weights(tmp_path / "accum" / "final")
    for name in big:
        torch.testing.assert_close(accum[name], big[name], rtol=1e-4, atol=1e-5)


def _losses(out: Path) -> list[float]:
    history = json.loads((out / "metrics.json").read_text())["log_history"]
    return [h["loss"] for h in history if "loss" in h]


def test_packed_varlen_micro_batches_of_two_train_like_micro_batches_of_one(tmp_path):
    """Micro-batch 2 x accumulation 2 equals 1 x 4 on the varlen path: a micro-batch of two packed rows
    is one padding-free row with both rows' documents, normalised by the step's target tokens."""
    common = ["recipe=tiny", "recipe.attn_implementation=varlen", "run.max_steps=3", "run.logging_steps=1"]
    _run(_overrides(tmp_path / "two", *common, "recipe.per_device_batch_size=2", "recipe.grad_accum=2"))
    _run(_overrides(tmp_path / "one", *common, "recipe.per_device_batch_size=1", "recipe.grad_accum=4"))
    two, one = _losses(tmp_path / "two"), _losses(tmp_path / "one")
    assert len(two) == len(one) == 3
    assert two == pytest.approx(one, rel=1e-5)
    assert two[-1] < two[0]
    a, b = _weights(tmp_path / "two" / "final"), _weights(tmp_path / "one" / "final")
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5)
