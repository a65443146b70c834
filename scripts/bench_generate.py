"""Generation throughput of eval's transformers backend (eval/generation/hf.py).

Builds a randomly initialised Llama of DeepSeek-Coder-1.3b-base's shape from its config
(`--model small` on CPU), with a BPE tokenizer trained on synthetic edits and padded with
filler tokens to the model's 32256 ids, saves both to a temporary folder, and lets
`HFGenerator` (the `hf` backend of `eval.run`) write `--samples` completions for each of
`--prompts` prompts of the fixtures benchmark in the EditCoder format, with the paper's
sampling (temperature 0.2, top-p 0.95) and the format's stop strings, at several batch sizes
(prompts per `generate` call; each call decodes batch x samples sequences). The baseline is
batch size 1: one prompt's samples per call.

Random weights never write an edit and almost never sample EOS, so every completion runs to
`--max-new-tokens`: tokens/s counts the generated token slots (prompts x samples x
max_new_tokens) over wall-clock time, the decode throughput a trained model would see at
that length. This is the figure a vLLM backend would be compared with.

    python scripts/bench_generate.py                       # CUDA if present: 1.3B, bf16
    python scripts/bench_generate.py --model small --prompts 2 --samples 4 --max-new-tokens 32
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table
from transformers import AutoModelForCausalLM, LlamaConfig

from core.benchmarks import load_benchmark
from core.formats import FORMATS
from eval.generate import build_requests
from eval.generation import SamplingConfig
from eval.generation.hf import HFGenerator
from train.modeling import DEEPSEEK_CODER_1_3B, train_tiny_tokenizer
from train.synthetic_edits import synthetic_edits

SHAPES = {
    "deepseek-coder-1.3b": DEEPSEEK_CODER_1_3B,
    "small": dict(
        vocab_size=4096, hidden_size=256, intermediate_size=640, num_hidden_layers=4, num_attention_heads=4
    ),
}


def save_model(folder: Path, shape: dict, dtype: torch.dtype, device: str) -> int:
    """Write a random model of `shape` and a tokenizer with exactly its vocabulary to `folder`."""
    fmt = FORMATS["editcoder"]
    rows = synthetic_edits(2000, seed=0)
    tokenizer = train_tiny_tokenizer(
        [fmt.prompt(r["before"], r["instruction"]) + fmt.completion(r["after"]) for r in rows], 4096
    )
    # Every id the model can sample must decode (and the stop-string check indexes the vocabulary).
    tokenizer.add_tokens([f"<|f{i}|>" for i in range(shape["vocab_size"] - len(tokenizer))])
    assert len(tokenizer) == shape["vocab_size"]
    config = LlamaConfig(
        **shape,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    n_params = sum(p.numel() for p in model.parameters())
    del model
    return n_params


def run_once(generator: HFGenerator, requests, n: int, sampling: SamplingConfig, device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = list(generator.generate(requests, n, sampling))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    assert len(out) == len(requests) and all(len(texts) == n for _, texts in out)
    return time.perf_counter() - start


def main() -> None:
    cuda = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if cuda else "cpu")
    p.add_argument(
        "--model", choices=sorted(SHAPES), default=None, help="default: 1.3B on CUDA, small on CPU"
    )
    p.add_argument("--prompts", type=int, default=8, help="fixtures problems (descriptive instructions)")
    p.add_argument("--samples", type=int, default=20, help="completions per prompt (the paper's 20)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument(
        "--batch-sizes", default="1,8", help="prompts per generate call; the first is the baseline"
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", type=Path, default=None, help="also write every figure here")
    args = p.parse_args()
    on_cuda = args.device.startswith("cuda")
    model_name = args.model or ("deepseek-coder-1.3b" if on_cuda else "small")
    dtype = torch.bfloat16 if on_cuda else torch.float32
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]

    fmt = FORMATS["editcoder"]
    problems = load_benchmark("fixtures").problems[: args.prompts]
    requests = build_requests(problems, ["descriptive"], fmt)
    sampling = SamplingConfig(temperature=0.2, top_p=0.95, max_new_tokens=args.max_new_tokens, stop=fmt.stop)

    with tempfile.TemporaryDirectory() as tmp:
        n_params = save_model(Path(tmp), SHAPES[model_name], dtype, args.device)
        generator = HFGenerator(tmp, batch_size=1, dtype="bf16" if on_cuda else "fp32", device=args.device)
        prompt_tokens = [len(generator.tokenizer(r.prompt).input_ids) for r in requests]
        results = []
        for bs in batch_sizes:
            generator.batch_size = bs
            # Warm-up at this batch size: kernels, allocator, stop-string tables.
            run_once(generator, requests[:bs], args.samples, sampling, args.device)
            seconds = [
                run_once(generator, requests, args.samples, sampling, args.device)
                for _ in range(args.repeats)
            ]
            slots = len(requests) * args.samples * args.max_new_tokens
            rates = [slots / s for s in seconds]
            results.append(
                {
                    "batch_size": bs,
                    "sequences_per_call": bs * args.samples,
                    "tokens_per_s": statistics.median(rates),
                    "tokens_per_s_all": rates,
                    "completions_per_s": len(requests) * args.samples / statistics.median(seconds),
                    "seconds": seconds,
                    "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if on_cuda else None,
                }
            )
            print(f"batch {bs}: {[round(r) for r in rates]} tokens/s", flush=True)
        generator.close()

    device_name = torch.cuda.get_device_name() if on_cuda else "cpu"
    base = results[0]["tokens_per_s"]
    table = Table(
        title=f"HF generate, {model_name} ({n_params / 1e9:.2f}B, random weights), {device_name}, "
        f"{len(requests)} prompts x {args.samples} samples x {args.max_new_tokens} new tokens, "
        f"prompts {min(prompt_tokens)}-{max(prompt_tokens)} tokens, T=0.2 top-p 0.95"
    )
    for col in (
        "prompts/call",
        "sequences/call",
        "tokens/s (median)",
        "spread",
        "completions/s",
        "s per run",
        f"vs batch {batch_sizes[0]}",
    ):
        table.add_column(col, justify="right")
    for r in results:
        lo, hi = min(r["tokens_per_s_all"]), max(r["tokens_per_s_all"])
        table.add_row(
            str(r["batch_size"]),
            str(r["sequences_per_call"]),
            f"{r['tokens_per_s']:.0f}",
            f"{lo:.0f}-{hi:.0f}",
            f"{r['completions_per_s']:.2f}",
            "/".join(f"{s:.1f}" for s in r["seconds"]),
            f"{r['tokens_per_s'] / base:.2f}x",
        )
    Console(width=200).print(table)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "device": device_name,
                    "n_params": n_params,
                    "args": vars(args) | {"json": None},
                    "prompt_tokens": prompt_tokens,
                    "results": results,
                },
                indent=2,
            )
        )
    fields = [f"device={device_name.replace(' ', '_')}", f"n_params={n_params}"]
    fields += [f"hf_tokens_per_s_bs{r['batch_size']}={r['tokens_per_s']:.1f}" for r in results]
    fields.append(f"batched_vs_bs{batch_sizes[0]}={results[-1]['tokens_per_s'] / base:.3f}")
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
