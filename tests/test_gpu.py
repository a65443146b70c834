"""GPU-only tests, skipped without CUDA: packed rows on CUDA in bf16 (the packing-equivalence
test of test_packing.py, plus which attention kernels SDPA actually runs), FlashAttention 2 +
bf16 on a ~1B-parameter random Llama (needs flash-attn), and the vLLM generation backend
(needs vllm). Throughput figures come from scripts/bench_train.py, not from tests.
"""

from __future__ import annotations

import importlib.util
import re
import time

import numpy as np
import pytest
import torch
from conftest import REPO
from datasets import Dataset
from test_packing import _model, encoded  # noqa: F401  (encoded is a fixture)
from transformers import LlamaConfig, LlamaForCausalLM
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from train.mfu import attention_length, detect_peak_tflops, flops_per_token
from train.packing import pack

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def _attention_kernels(fn) -> set[str]:
    """Names of the attention kernels that `fn()` launches on the GPU (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    pattern = re.compile(r"flash|fmha|attention|attn|cudnn|efficient", re.IGNORECASE)
    return {
        e.name
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA and pattern.search(e.name)
    }


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


def _packed_row_on_cuda(encoded, tokenizer):  # noqa: F811
    packed = pack(encoded, max_length=2048)
    assert len(packed) == 1 and len(packed[0]["seq_lengths"]) == len(encoded) > 1
    batch = DataCollatorForLanguageModeling(pad_token_id=tokenizer.pad_token_id, padding_free=True)(
        [packed[0]]
    )
    assert "attention_mask" not in batch  # a mask would hide the document boundaries
    return batch["input_ids"].cuda(), batch["position_ids"].cuda(), packed[0]["seq_lengths"]


def _assert_packed_equals_alone(model, ids, positions, lengths, alone_model=None) -> None:
    """bf16: each document's logits in the packed row match the document run alone (rounding
    only), and a control row whose positions do not restart (documents leak) does not."""
    alone_model = alone_model or model
    with torch.no_grad():
        packed_logits = model(input_ids=ids, position_ids=positions).logits[0]
        leaky = alone_model(input_ids=ids).logits[0]
        start = 0
        for i, n in enumerate(lengths):
            alone = alone_model(input_ids=ids[:, start : start + n]).logits[0]
            assert _rel(packed_logits[start : start + n], alone) < 2e-2
            if i > 0:
                assert _rel(leaky[start : start + n], alone) > 0.1
            start += n


def test_packed_rows_match_documents_alone_on_cuda_bf16_with_sdpa(encoded, tiny_tokenizer):  # noqa: F811
    """The trainer's path without flash-attn (`attn_implementation=sdpa`). transformers turns
    the restarting position ids into a block-diagonal mask; a mask rules out PyTorch's own flash
    kernel, so SDPA runs a fused masked kernel over the whole row (on an H100 with torch 2.11:
    cuDNN's, `cudnn_generated_fort_native_sdpa_sm90_flash_*`; see docs/performance.md)."""
    model = _model(tiny_tokenizer, "sdpa").to("cuda", torch.bfloat16)
    ids, positions, lengths = _packed_row_on_cuda(encoded, tiny_tokenizer)
    _assert_packed_equals_alone(model, ids, positions, lengths)
    with torch.no_grad():
        kernels = _attention_kernels(lambda: model(input_ids=ids, position_ids=positions))
    print(f"\nsdpa, packed row: {sorted(kernels)}")
    assert kernels  # a fused attention kernel ran, not the unfused math fallback (matmul + softmax)


def _load_bench_train():
    """scripts/bench_train.py, which registers the `torch_varlen` attention it benchmarks."""
    spec = importlib.util.spec_from_file_location("bench_train", REPO / "scripts" / "bench_train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_packed_rows_match_documents_alone_on_pytorch_flash_varlen(encoded, tiny_tokenizer):  # noqa: F811
    """The same row through PyTorch's FlashAttention varlen kernel (the benchmark's `varlen`
    attention, document boundaries from the position ids): same logits, and the profiler shows
    PyTorch's flash kernels, forward and backward, and no masked kernel."""
    bench = _load_bench_train()
    alone_model = _model(tiny_tokenizer, "sdpa").to("cuda", torch.bfloat16)
    model = _model(tiny_tokenizer, "sdpa").to("cuda", torch.bfloat16)
    model.set_attn_implementation(bench.VARLEN)
    ids, positions, lengths = _packed_row_on_cuda(encoded, tiny_tokenizer)
    _assert_packed_equals_alone(model, ids, positions, lengths, alone_model=alone_model)

    def train_step():
        model.train()
        model(input_ids=ids, position_ids=positions, labels=ids).loss.backward()

    kernels = _attention_kernels(train_step)
    print(f"\nvarlen, packed row (forward + backward): {sorted(kernels)}")
    assert any("pytorch_flash::flash_fwd" in k for k in kernels), kernels
    assert any("pytorch_flash::flash_bwd" in k for k in kernels), kernels
    assert not any("cudnn" in k or "fmha" in k for k in kernels), kernels
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())


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
    mfu, mfu_attention = flops_per_token(model, attention_length(lengths.tolist())).mfu(
        tokens_per_s, detect_peak_tflops()
    )
    print(f"\nFA2 bf16 1B: {tokens_per_s:.0f} tokens/s, MFU {mfu} ({mfu_attention} with attention), "
          f"device {torch.cuda.get_device_name()}")  # fmt: skip


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm")
def test_vllm_backend_generates_from_a_local_model(tmp_path):
    from transformers import AutoModelForCausalLM

    from core.benchmarks import load_benchmark
    from core.formats import FORMATS
    from eval.generate import build_requests
    from eval.generation import SamplingConfig, make_generator
    from train.config import TinyModelConfig
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
