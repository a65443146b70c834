"""Training throughput and MFU: packed padding-free rows against length-grouped padded batches.

Every configuration trains a randomly initialised Llama on the same documents (log-normal
lengths, like commit edits) with the packer and collators training uses: packed rows are
trl's best-fit-decreasing bins collated padding-free (position ids restart at each document,
no attention mask); padded batches are length-grouped (documents sorted by length inside
shuffled mega-batches) with the same token budget per step as one packed row.

On CUDA the model has DeepSeek-Coder-1.3b-base's shape (hidden 2048, 24 layers, 16 heads,
MLP 5504, vocabulary 32256, rope theta 100000), bf16 weights, 8192-token rows, gradient
checkpointing on and off. Attention variants:

- `sdpa`: what the trainer runs without flash-attn (`attn_implementation=sdpa`).
  transformers turns the packed row's position ids into a block-diagonal mask, and a mask
  keeps PyTorch SDPA off its flash kernel; `--profile` prints the kernels each one ran.
- `varlen`: the same rows through PyTorch's own FlashAttention varlen kernel
  (`torch.nn.attention.varlen`), registered through transformers' `AttentionInterface`
  (benchmark only; checked against `sdpa` logits on the first row before timing).

Each configuration runs `--warmup` steps, then `--repeats` timed windows of `--steps` steps
on fresh rows; the table shows the median non-pad tokens/s with the spread (min-max) and
MFU as the trainer logs it (`train/mfu.py`): 6·N·tokens/s / peak with N the parameters that
multiply (the input embedding left out), and with the causal attention term 6·L·d·ΣT²/ΣT.

    python scripts/bench_train.py                 # CPU: a small Llama, a minute or two
    python scripts/bench_train.py --device cuda   # 1.3B, bf16, 8192-token rows (H100: ~2.5 min)
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import math
import re
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset
from rich.console import Console
from rich.table import Table
from transformers import AttentionInterface, AutoModelForCausalLM, LlamaConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from train.mfu import attention_length, detect_peak_tflops, flops_per_token
from train.modeling import DEEPSEEK_CODER_1_3B
from train.packing import pack, packing_efficiency

SMALL = dict(
    vocab_size=8192, hidden_size=256, intermediate_size=640, num_hidden_layers=4, num_attention_heads=4
)
VARLEN = "torch_varlen"
ATTN_KERNEL = re.compile(r"flash|fmha|attention|attn|cudnn|efficient", re.IGNORECASE)


# ---------------------------------------------------------------------------- varlen attention
def varlen_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """Causal attention within each document of a packed row, on PyTorch's flash varlen kernel.

    query/key/value: (1, heads, tokens, head_dim); document starts are where position_ids == 0.
    Anything else (a mask, a batch of several rows) goes to transformers' SDPA path unchanged.
    """
    position_ids = kwargs.get("position_ids")
    if attention_mask is not None or position_ids is None or query.shape[0] != 1 or not query.is_cuda:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    tokens = query.shape[2]
    starts = torch.nonzero(position_ids.reshape(-1) == 0).reshape(-1)
    cu = torch.cat([starts, starts.new_tensor([tokens])]).to(torch.int32)
    max_len = int((cu[1:] - cu[:-1]).max())
    groups = query.shape[1] // key.shape[1]
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))  # (tokens, heads, head_dim)
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    out = _flash_varlen(q.contiguous(), k.contiguous(), v.contiguous(), cu, max_len, scaling)
    return out.unsqueeze(0), None  # (1, tokens, heads, head_dim), as transformers expects


def _flash_varlen(q, k, v, cu, max_len, scale):
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:  # older PyTorch: the aten op behind it (it has a backward)
        return torch.ops.aten._flash_attention_forward(
            q, k, v, cu, cu, max_len, max_len, 0.0, True, False, scale=scale
        )[0]
    causal = (
        {"is_causal": True}
        if "is_causal" in inspect.signature(varlen_attn).parameters
        else {"window_size": (-1, 0)}
    )
    return varlen_attn(q, k, v, cu, cu, max_len, max_len, scale=scale, **causal)


AttentionInterface.register(VARLEN, varlen_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(VARLEN, flash_attention_mask)  # no mask: boundaries from positions


# ---------------------------------------------------------------------------- data
def documents(n: int, median: int, max_length: int, vocab: int, seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(median), 0.9, size=n), 16, max_length).astype(int)
    ids = [rng.integers(3, vocab, size=k).tolist() for k in lengths]
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def length_grouped_batches(ds: Dataset, budget: int, seed: int, mega: int = 256) -> list[list[int]]:
    """Indices of padded batches: shuffled mega-batches sorted by length, cut so that
    rows x longest <= budget tokens (the same per-step budget as one packed row)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(ds)).tolist()
    lengths = [len(x) for x in ds["input_ids"]]
    batches: list[list[int]] = []
    for i in range(0, len(order), mega):
        group = sorted(order[i : i + mega], key=lambda j: -lengths[j])
        batch: list[int] = []
        for j in group:
            if batch and (len(batch) + 1) * lengths[batch[0]] > budget:
                batches.append(batch)
                batch = []
            batch.append(j)
        if batch:
            batches.append(batch)
    return [batches[i] for i in rng.permutation(len(batches))]


def real_tokens(batch: dict[str, torch.Tensor]) -> int:
    mask = batch.get("attention_mask")
    return int(mask.sum()) if mask is not None else batch["input_ids"].numel()


# ---------------------------------------------------------------------------- training steps
MODEL_INPUTS = ("input_ids", "labels", "attention_mask", "position_ids")


def build_model(config: LlamaConfig, attn: str, dtype: torch.dtype, device: str, checkpointing: bool):
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=dtype)
    model.config.use_cache = False
    if checkpointing:
        model.gradient_checkpointing_enable()
    return model.train()


def make_step(model, device: str):
    fused = device.startswith("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=fused)

    def step(batch: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {k: v.to(device, non_blocking=True) for k, v in batch.items() if k in MODEL_INPUTS}
        loss = model(**inputs).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


KERNEL_KINDS = (
    ("attention", ATTN_KERNEL),
    ("optimizer", re.compile(r"multi_tensor|adam", re.IGNORECASE)),
    ("matmul", re.compile(r"gemm|nvjet|cutlass|xmma|cublas", re.IGNORECASE)),
)


def profile_step(step, batch, device: str) -> tuple[list[str], dict[str, float]]:
    """One profiled training step: the short names of its attention kernels, and the share of
    GPU kernel time per kind (attention, matmul, optimizer, other) plus kernel time over wall time."""
    from torch.profiler import ProfilerActivity, profile

    sync(device)
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(batch)
        sync(device)
    wall_us = (time.perf_counter() - start) * 1e6
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    share = {"attention": 0.0, "matmul": 0.0, "optimizer": 0.0, "other": 0.0}
    for e in kernels:
        kind = next((k for k, pattern in KERNEL_KINDS if pattern.search(e.name)), "other")
        share[kind] += e.time_range.elapsed_us()
    busy = sum(share.values())
    breakdown = {k: v / busy for k, v in share.items()} | {"gpu_busy_over_wall": busy / wall_us}
    names = {re.split(r"[<(]", e.name, maxsplit=1)[0].strip() for e in kernels if ATTN_KERNEL.search(e.name)}
    return sorted(names), breakdown


def time_config(step, batches: Sequence[dict], warmup: int, steps: int, repeats: int, device: str):
    """Warm-up steps, then every timed batch once untimed (cuDNN builds an attention plan per
    new shape, and packed rows and padded batches come in many shapes), then the timed windows."""
    timed = batches[warmup : warmup + repeats * steps]
    for b in [*batches[:warmup], *timed]:
        step(b)
    sync(device)
    rates, step_s, losses = [], [], []
    for r in range(repeats):
        window = batches[warmup + r * steps : warmup + (r + 1) * steps]
        tokens = sum(real_tokens(b) for b in window)
        sync(device)
        start = time.perf_counter()
        for b in window:
            loss = step(b)
        sync(device)
        seconds = time.perf_counter() - start
        rates.append(tokens / seconds)
        step_s.append(seconds / len(window))
        losses.append(float(loss))
    return rates, step_s, losses


def logits_check(model, row: dict[str, torch.Tensor], device: str) -> dict[str, float]:
    """Relative L2 error of the bf16 logits of one packed row, SDPA and varlen, against the same
    weights in float32 through SDPA: both should show bf16 rounding only, of the same size."""
    inputs = {k: row[k].to(device) for k in ("input_ids", "position_ids")}
    model.eval()
    errors = {}
    with torch.no_grad():
        reference = copy.deepcopy(model).float()
        reference.set_attn_implementation("sdpa")
        ref = reference(**inputs).logits.float()
        del reference
        for attn in ("sdpa", VARLEN):
            model.set_attn_implementation(attn)
            errors[attn] = float((model(**inputs).logits.float() - ref).norm() / ref.norm())
    model.train()
    return errors


# ---------------------------------------------------------------------------- main
def parse_args() -> argparse.Namespace:
    cuda = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if cuda else "cpu")
    p.add_argument(
        "--model",
        choices=["deepseek-coder-1.3b", "small"],
        default=None,
        help="default: deepseek-coder-1.3b on CUDA, small on CPU",
    )
    p.add_argument(
        "--max-length", type=int, default=None, help="packed row length (default 8192 CUDA, 1024 CPU)"
    )
    p.add_argument("--median", type=int, default=350, help="median document length in tokens")
    p.add_argument("--modes", default="packed,padded")
    p.add_argument(
        "--attn", default=None, help="comma list of sdpa, varlen, eager (default: sdpa,varlen on CUDA)"
    )
    p.add_argument(
        "--checkpointing",
        choices=["on", "off", "both"],
        default=None,
        help="gradient checkpointing (default: both on CUDA, off on CPU)",
    )
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=None, help="steps per timed window (default 8 CUDA, 4 CPU)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="dense bf16 peak of the device for MFU (default: detected; H100/H200: 989)",
    )
    p.add_argument("--profile", action="store_true", help="list the attention kernels of one step per config")
    p.add_argument("--json", type=Path, default=None, help="also write every figure here")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    on_cuda = args.device.startswith("cuda")
    args.model = args.model or ("deepseek-coder-1.3b" if on_cuda else "small")
    args.max_length = args.max_length or (8192 if on_cuda else 1024)
    args.attn = (args.attn or ("sdpa,varlen" if on_cuda else "sdpa")).split(",")
    args.checkpointing = args.checkpointing or ("both" if on_cuda else "off")
    args.steps = args.steps or (8 if on_cuda else 4)
    return args


def main() -> None:
    args = parse_args()
    device, on_cuda = args.device, args.device.startswith("cuda")
    if "varlen" in args.attn and not on_cuda:
        raise SystemExit("--attn varlen needs CUDA (PyTorch's flash varlen kernel); use --attn sdpa")
    shape = DEEPSEEK_CODER_1_3B if args.model == "deepseek-coder-1.3b" else SMALL
    config = LlamaConfig(**shape, use_cache=False)
    dtype = torch.bfloat16 if on_cuda else torch.float32
    peak = args.peak_tflops or detect_peak_tflops()

    # Enough documents for every timed step of the packed mode (padded batches come out more).
    needed = args.warmup + args.repeats * args.steps
    mean_len = args.median * math.exp(0.9**2 / 2)
    n_docs = int(1.3 * needed * args.max_length / mean_len) + 8
    ds = documents(n_docs, args.median, args.max_length, config.vocab_size, args.seed)
    doc_lengths = np.array([len(x) for x in ds["input_ids"]])
    packed_rows = pack(ds, args.max_length)
    packed = [DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)([r]) for r in packed_rows]
    padded_collate = DataCollatorForLanguageModeling(pad_token_id=0)
    padded = [
        padded_collate([{"input_ids": ds[j]["input_ids"]} for j in idx])
        for idx in length_grouped_batches(ds, args.max_length, args.seed)
    ]
    for name, batches in (("packed", packed), ("padded", padded)):
        if len(batches) < needed:
            raise SystemExit(
                f"only {len(batches)} {name} batches for {needed} steps: lower --steps/--repeats"
            )
    batches_by_mode = {"packed": packed, "padded": padded}
    fraction = {
        "packed": packing_efficiency(packed_rows.select(range(needed)), args.max_length),
        "padded": sum(real_tokens(b) for b in padded[:needed])
        / sum(b["input_ids"].numel() for b in padded[:needed]),
    }

    gcs = {"on": [True], "off": [False], "both": [False, True]}[args.checkpointing]
    attn_names = {"sdpa": "sdpa", "varlen": VARLEN, "eager": "eager"}
    results, checked = [], False
    console = Console(width=200)
    for mode in args.modes.split(","):
        for attn in args.attn:
            if attn == "varlen" and mode != "packed":
                continue  # varlen is the packed-row path; padded batches carry a mask
            for gc in gcs:
                model = build_model(config, attn_names[attn], dtype, device, gc)
                n_params = sum(p.numel() for p in model.parameters())
                check = logits_check(model, packed[0], device) if attn == "varlen" and not checked else None
                checked = checked or check is not None
                step = make_step(model, device)
                if on_cuda:
                    torch.cuda.reset_peak_memory_stats()
                rates, step_s, losses = time_config(
                    step, batches_by_mode[mode], args.warmup, args.steps, args.repeats, device
                )
                kernels, breakdown = (
                    profile_step(step, batches_by_mode[mode][0], device)
                    if args.profile and on_cuda
                    else ([], {})
                )
                median = statistics.median(rates)
                mfu, mfu_attn = flops_per_token(model, attention_length(doc_lengths.tolist())).mfu(
                    median, peak
                )
                row = {
                    "mode": mode,
                    "attn": attn,
                    "checkpointing": gc,
                    "tokens_per_s": median,
                    "tokens_per_s_all": rates,
                    "step_s": statistics.median(step_s),
                    "mfu": mfu,
                    "mfu_attn": mfu_attn,
                    "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if on_cuda else None,
                    "non_pad_fraction": fraction[mode],
                    "loss_last": losses[-1],
                    "logits_rel_err_vs_fp32": check,
                    "attention_kernels": kernels,
                    "kernel_time_share": breakdown,
                }
                results.append(row)
                console.print(
                    f"{mode:7s} {attn:6s} checkpointing={'on' if gc else 'off':3s} "
                    f"{median:10.0f} tokens/s  windows {[round(r) for r in rates]}  kernels {kernels}"
                    + (
                        f"  GPU time { ({k: round(v, 3) for k, v in breakdown.items()}) }"
                        if breakdown
                        else ""
                    )
                    + (f"  logits rel. err vs fp32 {check}" if check is not None else "")
                )
                del step, model
                if on_cuda:
                    torch.cuda.empty_cache()

    def find(mode, attn, gc):
        return next(
            (r for r in results if (r["mode"], r["attn"], r["checkpointing"]) == (mode, attn, gc)), None
        )

    device_name = torch.cuda.get_device_name() if on_cuda else "cpu"
    title = (
        f"SFT throughput, {args.model} ({n_params / 1e9:.2f}B), {device_name}, {str(dtype).split('.')[-1]}, "
        f"rows of {args.max_length} tokens, {args.repeats}x{args.steps} steps; MFU over {peak} TFLOP/s"
    )
    table = Table(title=title)
    for col in (
        "mode",
        "attention",
        "ckpt",
        "non-pad tok/s (median)",
        "spread",
        "MFU 6N",
        "MFU +attn",
        "step s",
        "peak GiB",
        "non-pad frac",
        "vs padded sdpa",
    ):
        table.add_column(col, justify="right")
    for r in results:
        base = find("padded", "sdpa", r["checkpointing"])
        lo, hi = min(r["tokens_per_s_all"]), max(r["tokens_per_s_all"])
        table.add_row(
            r["mode"],
            r["attn"],
            "on" if r["checkpointing"] else "off",
            f"{r['tokens_per_s']:.0f}",
            f"{lo:.0f}-{hi:.0f} ({(hi - lo) / r['tokens_per_s']:.1%})",
            f"{r['mfu']:.1%}" if r["mfu"] is not None else "-",
            f"{r['mfu_attn']:.1%}" if r["mfu_attn"] is not None else "-",
            f"{r['step_s']:.3f}",
            f"{r['peak_mem_gib']:.1f}" if r["peak_mem_gib"] is not None else "-",
            f"{r['non_pad_fraction']:.3f}",
            f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}x" if base else "-",
        )
    console.print(table)
    console.print(
        f"documents: {len(ds)}, median {int(np.median(doc_lengths))} mean {doc_lengths.mean():.0f} tokens; "
        f"packed rows {len(packed)}, padded batches {len(padded)}; N = {n_params} parameters"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "device": device_name,
                    "peak_tflops": peak,
                    "n_params": n_params,
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "results": results,
                },
                indent=2,
            )
        )

    fields = [f"device={device_name.replace(' ', '_')}", f"peak_tflops={peak}", f"n_params={n_params}"]
    for r in results:
        key = f"{r['mode']}_{r['attn']}_{'ckpt' if r['checkpointing'] else 'nockpt'}"
        fields.append(f"{key}_tokens_per_s={r['tokens_per_s']:.1f}")
        if r["mfu"] is not None:
            fields.append(f"{key}_mfu={r['mfu']:.4f}")
    for gc in gcs:
        p, b = find("packed", "sdpa", gc), find("padded", "sdpa", gc)
        if p and b:
            fields.append(
                f"packed_vs_padded_{'ckpt' if gc else 'nockpt'}={p['tokens_per_s'] / b['tokens_per_s']:.3f}"
            )
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
