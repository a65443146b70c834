"""GPU-only: FlashAttention 2 + bf16 on a ~1B-parameter random Llama (packed padding-free rows,
prints tokens/s and MFU), and the vLLM generation backend. Skipped without CUDA.
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest
import torch
from datasets import Dataset
from transformers import LlamaConfig, LlamaForCausalLM
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from train.packing import pack
from train.trainer import detect_peak_tflops, flops_per_token

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is None, reason="needs flash-attn")
def test_flash_attention_bf16_step_on_a_1b_model():
    config = LlamaConfig(
        vocab_size=32256,
        hidden_size=2048,
        intermediate_size=5504,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=16,
        max_position_embeddings=8192,
        use_cache=False,
    )
    model = LlamaForCausalLM._from_config(
        config, attn_implementation="flash_attention_2", dtype=torch.bfloat16
    )
    model = model.cuda().train()
    model.gradient_checkpointing_enable()
    n_params = sum(p.numel() for p in model.parameters())
    assert 0.9e9 < n_params < 1.5e9

    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(np.log(600), 0.9, size=64), 32, 8192).astype(int)
    ids = [rng.integers(3, config.vocab_size, size=n).tolist() for n in lengths]
    packed = pack(Dataset.from_dict({"input_ids": ids, "labels": ids}), 8192)
    collate = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)

    def step(row):
        batch = {k: v.cuda() for k, v in collate([row]).items() if isinstance(v, torch.Tensor)}
        loss = model(
            input_ids=batch["input_ids"], position_ids=batch["position_ids"], labels=batch["labels"]
        ).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss, batch["input_ids"].numel()

    step(packed[0])  # warm-up
    torch.cuda.synchronize()
    start, tokens = time.perf_counter(), 0
    for row in packed.select(range(1, min(len(packed), 6))):
        loss, n = step(row)
        tokens += n
    torch.cuda.synchronize()
    tokens_per_s = tokens / (time.perf_counter() - start)
    assert torch.isfinite(loss)
    peak = detect_peak_tflops()
    mfu = (
        tokens_per_s * flops_per_token(n_params, 16, 2048, float(lengths.mean())) / (peak * 1e12)
        if peak
        else None
    )
    print(f"\nFA2 bf16 1B: {tokens_per_s:.0f} tokens/s, MFU {mfu}, device {torch.cuda.get_device_name()}")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm")
def test_vllm_backend_generates_from_a_local_model(tmp_path):
    from transformers import AutoModelForCausalLM

    from eval.benchmarks import load_benchmark
    from eval.generate import build_requests
    from eval.generation import SamplingConfig, make_generator
    from train.config import TinyModelConfig
    from train.formats import FORMATS
    from train.modeling import tiny_llama_config, train_tiny_tokenizer
    from train.synthetic_edits import synthetic_edits

    fmt = FORMATS["editcoder"]
    rows = synthetic_edits(200)
    tokenizer = train_tiny_tokenizer(
        [fmt.prompt(r["before"], r["instruction"]) + r["after"] for r in rows], 512
    )
    model = AutoModelForCausalLM.from_config(tiny_llama_config(TinyModelConfig(hidden_size=128), tokenizer))
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    requests = build_requests(load_benchmark("fixtures").problems[:2], ["descriptive"], fmt)
    generator = make_generator("vllm", fmt, {"path": str(tmp_path), "gpu_memory_utilization": 0.3})
    out = list(generator.generate(requests, 4, SamplingConfig(max_new_tokens=16)))
    generator.close()
    assert len(out) == 2 and all(
        len(texts) == 4 and all(isinstance(t, str) for t in texts) for _, texts in out
    )
