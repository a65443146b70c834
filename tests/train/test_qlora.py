"""QLoRA: the editcoder-6.7b-qlora recipe, with a tiny saved checkpoint as its base, trains LoRA
adapters on a 4-bit NF4 base (bitsandbytes' CPU backend, or CUDA where there is one) and merges
the saved adapter into a bf16 copy of the base, in the run and with `python -m train.merge`."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch
from conftest import app_config
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, TrainerCallback

from core.errors import ConfigError
from train.config import TinyModelConfig, preflight
from train.merge import main as merge_main
from train.modeling import tiny_llama_config
from train.sft_run import SFTRun

needs_bnb = pytest.mark.skipif(
    importlib.util.find_spec("bitsandbytes") is None, reason="QLoRA needs bitsandbytes (the [qlora] extra)"
)

LINEAR = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


@pytest.fixture
def base(tmp_path, tiny_tokenizer) -> Path:
    """A tiny Llama checkpoint in bf16 with its tokenizer: what a hub base model looks like on disk."""
    folder = tmp_path / "base"
    torch.manual_seed(0)
    config = tiny_llama_config(TinyModelConfig(), tiny_tokenizer)
    AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(str(folder))
    tiny_tokenizer.save_pretrained(str(folder))
    return folder


def _qlora_overrides(base: Path, out: Path) -> list[str]:
    return [
        "recipe=editcoder-6.7b-qlora",
        f"recipe.model.path={base}",
        "recipe.attn_implementation=sdpa",  # FlashAttention 2 needs CUDA and flash-attn
        "recipe.max_length=1024",
        "recipe.grad_accum=1",
        "recipe.per_device_batch_size=2",
        "recipe.warmup_steps=0",
        "recipe.lr=1e-2",  # a few steps must move the adapters well past bf16 rounding
        "data.datasets=[{synthetic: 60}]",
        "data.val_size=0",
        f"run.output_dir={out}",
        "run.max_steps=3",
        "run.report_to=none",
    ]


class _Inspect(TrainerCallback):
    """What the trainer trains: its layers, its optimizer, the parameters before and after."""

    def __init__(self):
        self.seen: dict = {}

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        self.seen["modules"] = dict(model.named_modules())
        self.seen["optimizer"] = optimizer
        self.seen["before"] = {k: v.detach().clone() for k, v in model.named_parameters() if v.requires_grad}

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self.seen["after"] = {k: v.detach().clone() for k, v in model.named_parameters() if v.requires_grad}


@pytest.mark.slow
@needs_bnb
@pytest.mark.filterwarnings("ignore:Paged optimizers are not supported on CPU")  # expected here
def test_qlora_recipe_trains_on_a_4bit_base_and_merges_into_a_bf16_copy(base, tmp_path):
    import bitsandbytes as bnb

    out = tmp_path / "run"
    app, resolved = app_config(_qlora_overrides(base, out))
    preflight(app)
    inspect = _Inspect()
    run = SFTRun(app, resolved, callbacks=[inspect])
    run.setup()
    run.train()
    final = run.save()
    run.cleanup()
    seen = inspect.seen

    # Every linear layer of the base is a bitsandbytes 4-bit layer: NF4, double quantisation, bf16 compute.
    quantized = {n: m for n, m in seen["modules"].items() if isinstance(m, bnb.nn.Linear4bit)}
    assert {n.rsplit(".", 2)[-2] for n in quantized} == LINEAR and len(quantized) == 2 * len(LINEAR)
    for layer in quantized.values():
        state = layer.weight.quant_state
        assert state.quant_type == "nf4" and state.nested and layer.compute_dtype == torch.bfloat16
    assert not any("lm_head" in n for n in quantized)
    # LoRA on every one of them and nowhere else; the optimizer is bitsandbytes' paged AdamW, 32-bit states.
    adapted = {n.rsplit(".", 2)[-2] for n in seen["modules"] if n.endswith(".lora_A")}
    assert adapted == LINEAR
    optimizer = seen["optimizer"].optimizer  # inside accelerate's wrapper
    assert isinstance(optimizer, bnb.optim.AdamW) and optimizer.is_paged and optimizer.args.optim_bits == 32
    # Only the adapters train, and they did.
    assert set(seen["before"]) == set(seen["after"]) and all("lora_" in k for k in seen["before"])
    assert any(not torch.equal(seen["before"][k], seen["after"][k]) for k in seen["before"])

    adapter = out / "final-adapter"
    adapter_config = json.loads((adapter / "adapter_config.json").read_text())
    assert {m.rsplit(".", 1)[-1] for m in adapter_config["target_modules"]} == LINEAR  # all-linear, resolved

    # final/ is the adapter merged into the bf16 base from disk: W + (alpha / r) B A, rounded to bf16.
    # The same sum on the 4-bit weights carries NF4's rounding error, which these tolerances reject.
    merged = AutoModelForCausalLM.from_pretrained(str(final))
    assert merged.dtype == torch.bfloat16
    assert "quantization_config" not in json.loads((final / "config.json").read_text())
    assert not any("lora" in k for k in merged.state_dict())
    base_w = load_file(str(base / "model.safetensors"))
    lora_w = load_file(str(adapter / "adapter_model.safetensors"))
    scale = adapter_config["lora_alpha"] / adapter_config["r"]
    for key in ("model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"):
        lora_a = lora_w[f"base_model.model.{key}.lora_A.weight"].float()
        lora_b = lora_w[f"base_model.model.{key}.lora_B.weight"].float()
        delta = scale * lora_b @ lora_a
        assert delta.abs().max() > 1e-2  # the adapter moved the weights well past the tolerances
        got = merged.get_submodule(key).weight.float()
        torch.testing.assert_close(got, base_w[f"{key}.weight"].float() + delta, rtol=1e-2, atol=1e-4)
        four_bit = quantized[f"base_model.model.{key}.base_layer"].weight
        dequantized = bnb.functional.dequantize_4bit(four_bit.data, four_bit.quant_state).float()
        with pytest.raises(AssertionError):
            torch.testing.assert_close(got, dequantized + delta, rtol=1e-2, atol=1e-4)

    # The stand-alone merge of the saved adapter gives the same model.
    again = tmp_path / "merged"
    assert merge_main([str(adapter), "--out", str(again)]) == 0
    assert (again / "README.md").is_file() and (again / "editforge_config.yaml").is_file()
    for key, value in load_file(str(again / "model.safetensors")).items():
        torch.testing.assert_close(value, merged.state_dict()[key], rtol=0, atol=0)


def test_qlora_needs_bitsandbytes_and_says_which_extra(tmp_path, monkeypatch):
    app, _ = app_config(_qlora_overrides(tmp_path, tmp_path / "run"))
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # how Python marks a module as not installed
    with pytest.raises(ConfigError, match=r"recipe.quantization .*install the \[qlora\] extra"):
        preflight(app)
