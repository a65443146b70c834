"""Training throughput and MFU of the trainer's own step: each speed lever against length-grouped padded batches.

A configuration is a set of recipe options (the levers of docs/performance.md) on top of one
recipe, and runs through what `train/sft.py` runs: the recipe validated and checked (`preflight`),
`training_arguments`, the attention `auto` resolves to, `load_model`, and `EditSFTTrainer` with its
collator (trl's padding-free collator for packed rows), its loss (trl's fused LM head), its
throughput and MFU logging. The benchmark brings only the data and the baseline's batches:

- documents with log-normal lengths (like commit edits), random token ids, loss on every token;
- packed configurations: trl's best-fit-decreasing rows of `recipe.max_length`, as training packs;
- `padded`, the baseline: the same trainer with packing off, SDPA, and length-grouped batches
  (documents sorted by length inside shuffled mega-batches of 256, cut so that rows x longest
  <= recipe.max_length, the token budget of one packed row).

Names: a base (`default`: the recipe as shipped, Liger `auto` included; `padded`, `sdpa`, `varlen`,
`auto`: packing and attention, Liger off, the recipe's rows per micro-batch) and `+`-joined levers
(`ckpt`, `ckpt2` = every 2nd layer, `nockpt`, `liger`, `compile`, `mb1`/`mb2` = one/two rows per
micro-batch, `workers2` = two dataloader workers). The trainer logs every --steps optimizer steps; the first
pass over the data is warm-up (compilation, a cuDNN plan per new shape), then --repeats windows
are timed. The configurations run interleaved, --rounds times over (each round builds every one
afresh, in a rotated order), so drift of the machine falls on all of them alike; reported: the
median tokens/s per device over every window of every round and the spread, MFU as the trainer logs it (6N and 6N +
attention, train/mfu.py), peak memory, and on CUDA the attention kernels of one warm-up step
(torch.profiler) with the GPU time per kind. A configuration whose options this machine cannot run
(Liger without liger-kernel, ...) is skipped with the reason.

    python scripts/bench_train.py --device cpu       # the tiny recipe, seconds (a test runs it)
    python scripts/bench_train.py --device cuda      # editcoder-1.3b-fromconfig: every lever
    python scripts/bench_train.py --device cuda --configs padded,auto,auto+compile \\
        --override recipe.model.tiny.num_hidden_layers=8   # fewer layers, same width
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from rich.console import Console
from rich.table import Table
from torch.utils.data import DataLoader
from transformers import TrainerCallback, set_seed
from transformers.trainer_utils import SaveStrategy

from core.entry import validate_overrides
from core.errors import ConfigError
from train.attention import resolve_attn_implementation
from train.config import SFTAppConfig, preflight
from train.mfu import attention_length, detect_peak_tflops, flops_per_token
from train.modeling import load_model, tiny_llama_config, train_tiny_tokenizer
from train.packing import pack
from train.sft import APP
from train.sft_run import training_arguments
from train.trainer import EditSFTTrainer

LIGER_OFF = ["recipe.liger_kernels=false"]  # a lever of its own here, whatever the recipe's auto decides
BASES = {
    "default": [],  # the recipe as shipped, its `auto` levers settled on this machine
    "padded": ["recipe.packing=false", "recipe.attn_implementation=sdpa", *LIGER_OFF],
    "sdpa": ["recipe.attn_implementation=sdpa", *LIGER_OFF],
    "varlen": ["recipe.attn_implementation=varlen", *LIGER_OFF],
    "auto": ["recipe.attn_implementation=auto", *LIGER_OFF],
}
LEVERS = {
    "ckpt": ["recipe.gradient_checkpointing=true"],
    "ckpt2": ["recipe.gradient_checkpointing=true", "recipe.gradient_checkpointing_every=2"],
    "nockpt": ["recipe.gradient_checkpointing=false"],
    "liger": ["recipe.liger_kernels=true"],
    # compile_with_liger: preflight refuses compile+liger as measured slower; the bench keeps measuring it
    "compile": ["recipe.compile_layers=true", "recipe.compile_with_liger=true"],
    "mb1": ["recipe.per_device_batch_size=1"],
    "mb2": ["recipe.per_device_batch_size=2"],
    "workers2": ["run.dataloader_num_workers=2"],
}
CUDA_CONFIGS = (
    "padded,default,sdpa,auto,auto+mb1,auto+ckpt,auto+ckpt2,auto+compile,auto+liger,auto+compile+liger,"
    "auto+workers2"
)
ATTN_KERNEL = re.compile(r"flash|fmha|attention|attn|cudnn|efficient", re.IGNORECASE)
KERNEL_KINDS = (
    ("attention", ATTN_KERNEL),
    ("optimizer", re.compile(r"multi_tensor|adam", re.IGNORECASE)),
    ("matmul", re.compile(r"gemm|nvjet|cutlass|xmma|cublas", re.IGNORECASE)),
)
OPTIONAL_PACKAGES = ("flash-attn", "flash-attn-3", "liger-kernel", "deepspeed")


# ---------------------------------------------------------------------------- data and batches
def documents(n: int, median: int, max_length: int, vocab: int, seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(median), 0.9, size=n), 16, max_length).astype(int)
    ids = [rng.integers(3, vocab, size=k).tolist() for k in lengths]
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def length_grouped_batches(lengths: list[int], budget: int, seed: int, mega: int = 256) -> list[list[int]]:
    """Indices of padded batches: shuffled mega-batches sorted by length, cut so that
    rows x longest <= budget tokens (the same per-step budget as one packed row)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths)).tolist()
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


class GroupedBatchTrainer(EditSFTTrainer):
    """The trainer with the baseline's batches: length-grouped under one packed row's token budget
    (transformers' own length grouping fixes the rows per batch, not the tokens)."""

    def __init__(self, *args: Any, batches: list[list[int]], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._batches = batches

    def get_train_dataloader(self) -> DataLoader:
        loader = DataLoader(
            self.train_dataset,
            batch_sampler=self._batches,
            collate_fn=self.data_collator,
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
        )
        return self.accelerator.prepare(loader)


# ---------------------------------------------------------------------------- profiling
class ProfileStep(TrainerCallback):
    """Profiles optimizer step `step` on the GPU: attention kernel names and GPU time per kind."""

    def __init__(self, step: int):
        self.step, self.prof, self.start = step, None, 0.0
        self.kernels: list[str] = []
        self.share: dict[str, float] = {}

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step + 1 == self.step:
            from torch.profiler import ProfilerActivity, profile

            torch.cuda.synchronize()
            self.start = time.perf_counter()
            self.prof = profile(activities=[ProfilerActivity.CUDA])
            self.prof.start()

    def on_step_end(self, args, state, control, **kwargs):
        if self.prof is None or state.global_step != self.step:
            return
        torch.cuda.synchronize()
        wall_us = (time.perf_counter() - self.start) * 1e6
        self.prof.stop()
        events = [e for e in self.prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        self.prof = None
        share = {"attention": 0.0, "matmul": 0.0, "optimizer": 0.0, "other": 0.0}
        for e in events:
            kind = next((k for k, pattern in KERNEL_KINDS if pattern.search(e.name)), "other")
            share[kind] += e.time_range.elapsed_us()
        busy = sum(share.values()) or 1.0
        self.share = {k: v / busy for k, v in share.items()} | {"gpu_busy_over_wall": busy / wall_us}
        names = {
            re.split(r"[<(]", e.name, maxsplit=1)[0].strip() for e in events if ATTN_KERNEL.search(e.name)
        }
        self.kernels = sorted(names)


# ---------------------------------------------------------------------------- one configuration
def overrides_of(name: str) -> list[str]:
    base, *levers = name.split("+")
    unknown = [part for part in [base] if part not in BASES] + [
        lever for lever in levers if lever not in LEVERS
    ]
    if unknown:
        raise SystemExit(
            f"unknown configuration part(s) {unknown} in {name!r}: bases {list(BASES)}, levers {list(LEVERS)}"
        )
    return [*BASES[base], *(o for lever in levers for o in LEVERS[lever])]


def compose(args: argparse.Namespace, name: str) -> SFTAppConfig:
    """The recipe with this configuration's options, validated and checked as `train/sft.py` does."""
    common = ["deepspeed=none", "data.val_size=0", "run.report_to=none", f"run.seed={args.seed}"]
    app = validate_overrides(APP, [f"recipe={args.recipe}", *common, *args.override, *overrides_of(name)])
    if app.recipe.model.tiny is None:
        raise SystemExit(
            f"recipe={args.recipe} loads a checkpoint; the benchmark builds its model from recipe.model.tiny"
        )
    preflight(app)
    return app


def epoch_steps(app: SFTAppConfig, docs: Dataset, batches: list[list[int]]) -> int:
    recipe = app.recipe
    micro = (
        len(batches)
        if not recipe.packing
        else math.ceil(len(pack(docs, recipe.max_length)) / recipe.per_device_batch_size)
    )
    return math.ceil(micro / recipe.grad_accum)


def run_config(
    args: argparse.Namespace, name: str, docs: Dataset, tokenizer: Any, out: Path
) -> dict[str, Any]:
    app = compose(args, name)
    recipe, device = app.recipe, args.device
    attn = resolve_attn_implementation(recipe.attn_implementation, recipe.packing, recipe.dtype)
    lengths = [len(ids) for ids in docs["input_ids"]]
    batches = length_grouped_batches(lengths, recipe.max_length, args.seed) if not recipe.packing else []
    warm = math.ceil(epoch_steps(app, docs, batches) / args.steps) * args.steps
    app.run.output_dir, app.run.logging_steps = str(out / name.replace("+", "_")), args.steps
    app.run.max_steps = warm + args.repeats * args.steps
    training = training_arguments(app, Path(app.run.output_dir))
    training.save_strategy = SaveStrategy.NO  # the run's checkpoints are no part of the step
    set_seed(args.seed)
    with torch.device(device):
        model = load_model(recipe, tokenizer, attn)
    profiler = ProfileStep(warm) if args.profile else None
    flops, peak = flops_per_token(model, attention_length(lengths)), args.peak_tflops or detect_peak_tflops()
    kwargs = dict(
        model=model,
        args=training,
        train_dataset=docs,
        processing_class=tokenizer,
        callbacks=[profiler] if profiler else None,
        flops=flops,
        peak_tflops=peak,
        compile_layers=recipe.compile_layers,
    )
    trainer = GroupedBatchTrainer(batches=batches, **kwargs) if batches else EditSFTTrainer(**kwargs)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    logs = [h for h in trainer.state.log_history if "tokens_per_second_per_device" in h]
    timed = [h for prev, h in zip(logs, logs[1:], strict=False) if prev["step"] >= warm]
    rates = [h["tokens_per_second_per_device"] for h in timed]
    median = statistics.median(rates)
    mfu, mfu_attn = flops.mfu(median, peak)  # what the trainer logs, at the median window's rate
    real = sum(lengths[j] for b in batches for j in b)
    slots = sum(len(b) * max(lengths[j] for j in b) for b in batches)
    row = {
        "config": name,
        "attention": attn,
        "tokens_per_s": median,
        "tokens_per_s_all": rates,
        "mfu": mfu,
        "mfu_attn": mfu_attn,
        "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None,
        "non_pad_fraction": real / slots if batches else 1.0,
        "loss_last": [h["loss"] for h in trainer.state.log_history if "loss" in h][-1],
        "attention_kernels": profiler.kernels if profiler else [],
        "kernel_time_share": profiler.share if profiler else {},
        "n_params": sum(p.numel() for p in model.parameters()),
    }
    del trainer, model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return row


def merge_rounds(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration's rounds as one row: the median over every timed window of every round,
    MFU at that median (it is proportional to the rate), the highest peak memory."""
    first = rows[0]
    rates = [rate for row in rows for rate in row["tokens_per_s_all"]]
    median = statistics.median(rates)
    scale = median / first["tokens_per_s"]
    memory = [row["peak_mem_gib"] for row in rows if row["peak_mem_gib"] is not None]
    return first | {
        "tokens_per_s": median,
        "tokens_per_s_all": rates,
        "mfu": first["mfu"] * scale if first["mfu"] is not None else None,
        "mfu_attn": first["mfu_attn"] * scale if first["mfu_attn"] is not None else None,
        "peak_mem_gib": max(memory) if memory else None,
        "rounds": len(rows),
    }


# ---------------------------------------------------------------------------- main
def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda when there is one")
    p.add_argument("--recipe", default=None, help="default: editcoder-1.3b-fromconfig on CUDA, tiny on CPU")
    p.add_argument(
        "--configs", default=None, help=f"comma list (default CUDA: {CUDA_CONFIGS}; CPU: padded,sdpa,varlen)"
    )
    p.add_argument(
        "--override", nargs="*", default=[], help="more recipe/run overrides for every configuration"
    )
    p.add_argument(
        "--median", type=int, default=None, help="median document length (default 350 CUDA, 60 CPU)"
    )
    p.add_argument(
        "--steps", type=int, default=None, help="optimizer steps per timed window (default 4 CUDA, 2 CPU)"
    )
    p.add_argument("--repeats", type=int, default=3, help="timed windows per configuration and round")
    p.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="rounds over all configurations, interleaved (each round builds every one afresh)",
    )
    p.add_argument(
        "--peak-tflops", type=float, default=None, help="dense bf16 peak for MFU (default: detected)"
    )
    p.add_argument("--no-profile", dest="profile", action="store_false", help="skip the profiled step (CUDA)")
    p.add_argument("--json", type=Path, default=None, help="also write every figure here")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before anything initialises CUDA: the trainer stays on CPU
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_cuda = args.device == "cuda"
    args.recipe = args.recipe or ("editcoder-1.3b-fromconfig" if on_cuda else "tiny")
    args.configs = (args.configs or (CUDA_CONFIGS if on_cuda else "padded,sdpa,varlen")).split(",")
    args.median = args.median or (350 if on_cuda else 60)
    args.steps = args.steps or (4 if on_cuda else 2)
    args.profile = args.profile and on_cuda
    return args


def packages() -> str:
    found = []
    for name in ("torch", "transformers", "trl", *OPTIONAL_PACKAGES):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (absent)")
    return ", ".join(found)


def main() -> None:
    args = parse_args()
    configs = ["padded", *(c for c in args.configs if c != "padded")]  # the baseline first
    base = compose(args, configs[0]).recipe
    tokenizer = train_tiny_tokenizer(["def bench(): return 0"], vocab_size=300)
    vocab = tiny_llama_config(base.model.tiny, tokenizer).vocab_size
    tokens_per_step = base.grad_accum * base.per_device_batch_size * base.max_length
    mean_len = args.median * math.exp(0.9**2 / 2)
    n_docs = int(args.repeats * args.steps * tokens_per_step / mean_len) + 8
    docs = documents(n_docs, args.median, base.max_length, vocab, args.seed)
    console = Console(width=200, markup=False, highlight=False)  # messages quote [extras] verbatim
    console.print(f"packages: {packages()}")
    skipped: dict[str, str] = {}
    rounds: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):  # interleaved: every configuration once per round, order rotated
            order = configs[k % len(configs) :] + configs[: k % len(configs)]
            for name in (n for n in order if n not in skipped):
                try:
                    row = run_config(args, name, docs, tokenizer, Path(tmp) / f"round{k}")
                except ConfigError as err:
                    skipped[name] = str(err)
                    console.print(f"{name}: skipped: {err}")
                    continue
                rounds.setdefault(name, []).append(row)
                console.print(
                    f"round {k + 1}/{args.rounds} {name}: {row['attention']} {row['tokens_per_s']:.0f} tokens/s, "
                    f"windows {[round(r) for r in row['tokens_per_s_all']]}, kernels {row['attention_kernels']}"
                    + (
                        f", GPU time { ({kind: round(v, 3) for kind, v in row['kernel_time_share'].items()}) }"
                        if row["kernel_time_share"]
                        else ""
                    )
                )
    results = [merge_rounds(rounds[name]) for name in configs if name in rounds]
    report(args, base, docs, results, skipped, console)


def report(
    args: argparse.Namespace,
    base: Any,
    docs: Dataset,
    results: list[dict[str, Any]],
    skipped: dict[str, str],
    console: Console,
) -> None:
    baseline = next((r for r in results if r["config"] == "padded"), None)
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    peak = args.peak_tflops or detect_peak_tflops()
    n_params = results[0]["n_params"] if results else 0
    table = Table(
        title=f"SFT step, recipe={args.recipe} ({n_params / 1e9:.2f}B), {device_name}, {base.dtype.value}, "
        f"rows of {base.max_length} tokens, {args.rounds} rounds x {args.repeats} windows of {args.steps} steps; "
        f"MFU over {peak} TFLOP/s"
    )
    for col in (
        "config",
        "attention",
        "tokens/s (median)",
        "spread",
        "MFU 6N",
        "MFU +attn",
        "peak GiB",
        "non-pad",
        "vs padded",
    ):
        table.add_column(col, justify="right")

    def pct(x):
        return f"{x:.1%}" if x is not None else "-"

    for r in results:
        lo, hi = min(r["tokens_per_s_all"]), max(r["tokens_per_s_all"])
        table.add_row(
            r["config"],
            r["attention"],
            f"{r['tokens_per_s']:.0f}",
            f"{lo:.0f}-{hi:.0f} ({(hi - lo) / r['tokens_per_s']:.1%})",
            pct(r["mfu"]),
            pct(r["mfu_attn"]),
            f"{r['peak_mem_gib']:.1f}" if r["peak_mem_gib"] is not None else "-",
            f"{r['non_pad_fraction']:.3f}",
            f"{r['tokens_per_s'] / baseline['tokens_per_s']:.2f}x" if baseline else "-",
        )
    console.print(table)
    lengths = np.array([len(x) for x in docs["input_ids"]])
    console.print(
        f"documents: {len(docs)}, median {int(np.median(lengths))} mean {lengths.mean():.0f} tokens; "
        f"N = {n_params} parameters" + (f"; skipped: {skipped}" if skipped else "")
    )
    if args.json:
        payload = {"device": device_name, "peak_tflops": peak, "packages": packages(), "results": results}
        args.json.write_text(json.dumps(payload | {"skipped": skipped}, indent=2))
    fields = [f"device={device_name.replace(' ', '_')}", f"peak_tflops={peak}", f"n_params={n_params}"]
    for r in results:
        key = r["config"].replace("+", "_")
        fields.append(f"{key}_tokens_per_s={r['tokens_per_s']:.1f}")
        for name in ("mfu", "mfu_attn"):
            if r[name] is not None:
                fields.append(f"{key}_{name}={r[name]:.4f}")
        if r["peak_mem_gib"] is not None:
            fields.append(f"{key}_peak_gib={r['peak_mem_gib']:.2f}")
        if baseline:
            fields.append(f"{key}_vs_padded={r['tokens_per_s'] / baseline['tokens_per_s']:.3f}")
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
