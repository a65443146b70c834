"""MFU counted from what a step computes: a hand count on a tiny Llama, the attention term from
the documents' lengths, the peak from the exact device name, and both figures in the trainer's logs."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from transformers import AutoModelForCausalLM, LlamaConfig

from train.mfu import FlopsPerToken, attention_length, flops_per_token, matmul_parameters, peak_tflops
from train.trainer import EditSFTTrainer

D, F, L, V, HEADS, KV = 64, 128, 2, 100, 4, 2


def tiny(tied: bool):
    config = LlamaConfig(
        vocab_size=V, hidden_size=D, intermediate_size=F, num_hidden_layers=L, num_attention_heads=HEADS,
        num_key_value_heads=KV, tie_word_embeddings=tied,
    )  # fmt: skip
    return AutoModelForCausalLM.from_config(config)


def test_the_parameter_count_leaves_out_the_input_embedding_but_not_the_head():
    head_dim = D // HEADS
    attention = D * D + 2 * D * KV * head_dim + D * D  # q, k and v with two KV heads (GQA), o
    mlp = 3 * D * F  # gate, up, down
    per_layer = attention + mlp + 2 * D  # and the two RMSNorm weights
    by_hand = L * per_layer + D + V * D  # the final norm and the LM head; not the V x D lookup
    assert matmul_parameters(tiny(tied=False)) == by_hand
    assert matmul_parameters(tiny(tied=True)) == by_hand  # the shared matrix counts once, as the head
    assert sum(p.numel() for p in tiny(tied=False).parameters()) == by_hand + V * D


def test_attention_is_counted_per_document_from_its_squared_length():
    assert attention_length([2, 4]) == pytest.approx((4 + 16) / 6)
    assert attention_length([8192]) == 8192 and attention_length([]) == 0.0
    flops = flops_per_token(tiny(tied=False), attention_length([2, 4]))
    assert flops.dense == 6 * matmul_parameters(tiny(tied=False))
    assert flops.with_attention == pytest.approx(flops.dense + 6 * L * D * 20 / 6)
    # completion-only loss: the fused head runs on the target tokens alone (a quarter of them here)
    quarter = flops_per_token(tiny(tied=False), attention_length([2, 4]), head_fraction=0.25)
    assert quarter.dense == 6 * (matmul_parameters(tiny(tied=False)) - 0.75 * V * D)
    assert quarter.with_attention - quarter.dense == pytest.approx(flops.with_attention - flops.dense)
    with pytest.raises(ValueError, match="fraction"):
        flops_per_token(tiny(tied=False), 1.0, head_fraction=1.5)
    dense, with_attention = flops.mfu(1000.0, peak=1.0)
    assert dense == pytest.approx(1000 * flops.dense / 1e12) and with_attention > dense
    assert flops.mfu(1000.0, peak=None) == (None, None)


@pytest.mark.parametrize(
    "name, peak",
    [
        ("NVIDIA H100 80GB HBM3", 989.0),  # SXM
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", 835.0),
        ("NVIDIA H200", 989.0),
        ("NVIDIA H200 NVL", 835.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA A100 80GB PCIe", 312.0),
        ("NVIDIA H800 PCIe", 756.0),
        ("NVIDIA GH200 480GB", 989.0),  # not read as an H200 NVL or PCIe card
        ("NVIDIA B200", 2250.0),
        ("NVIDIA L40S", 362.0),
        ("NVIDIA L40", 181.0),  # not an L4
        ("NVIDIA L4", 121.0),
        ("NVIDIA A10G", None),  # no datasheet figure for the cloud variant: run.peak_tflops sets it
        ("NVIDIA A10", 125.0),
        ("NVIDIA H200 PCIe", None),  # no such card: no guess
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_the_peak_comes_from_the_exact_device_name(name, peak):
    assert peak_tflops(name) == peak


def test_the_trainer_logs_both_conventions():
    trainer = EditSFTTrainer.__new__(EditSFTTrainer)  # only the logging state, no model
    flops = FlopsPerToken(matmul_params=1_000_000, layers=2, hidden=64, attention_length=100.0)
    trainer._flops, trainer._peak_tflops = flops, 1.0
    trainer.args = SimpleNamespace(world_size=2)
    trainer._last_tokens, trainer._last_time = 0.0, time.perf_counter() - 1.0
    trainer._total_train_tokens = 4000
    logs: dict[str, float] = {}
    trainer._add_throughput(logs)
    per_device = logs["tokens_per_second_per_device"]
    assert 0 < per_device <= 2000
    assert logs["mfu"] == pytest.approx(per_device * flops.dense / 1e12, abs=1e-4)
    assert logs["mfu_with_attention"] / logs["mfu"] == pytest.approx(
        flops.with_attention / flops.dense, rel=1e-2
    )
