"""Training throughput: packed padding-free rows against per-example padded batches.

Both modes train the same randomly initialised Llama on the same documents (log-normal
lengths, like commit edits) for one pass, with the collator and packer training uses.
Prints non-pad tokens/s for each, their ratio, and each mode's non-pad fraction.

    python scripts/bench_train.py                      # CPU defaults, a minute or two
    python scripts/bench_train.py --hidden 2048 --layers 16 --max-length 8192 --docs 2000 --device cuda
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from datasets import Dataset
from rich.console import Console
from rich.table import Table
from transformers import LlamaConfig, LlamaForCausalLM
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from train.packing import non_pad_fraction, pack, packing_efficiency


def documents(n: int, median: int, max_length: int, vocab: int, seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(median), 0.9, size=n), 16, max_length).astype(int)
    ids = [rng.integers(3, vocab, size=k).tolist() for k in lengths]
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def run_epoch(model, batches, device: str) -> tuple[float, int]:
    """Seconds for one optimizer step per batch, and the non-pad tokens seen."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = 0
    start = time.perf_counter()
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items() if isinstance(v, torch.Tensor)}
        loss = model(
            **{
                k: v
                for k, v in batch.items()
                if k in ("input_ids", "labels", "attention_mask", "position_ids")
            }
        ).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        mask = batch.get("attention_mask")
        tokens += int(mask.sum()) if mask is not None else batch["input_ids"].numel()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start, tokens


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=160)
    p.add_argument("--median", type=int, default=180, help="median document length in tokens")
    p.add_argument("--max-length", type=int, default=1024)
    p.add_argument("--padded-batch", type=int, default=4, help="examples per padded batch")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--attn", default="sdpa")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    ds = documents(args.docs, args.median, args.max_length, args.vocab, args.seed)
    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=int(args.hidden * 8 / 3) // 64 * 64,
        num_hidden_layers=args.layers,
        num_attention_heads=max(args.hidden // 64, 1),
        max_position_embeddings=args.max_length,
        use_cache=False,
    )
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32

    packed_rows = pack(ds, args.max_length)
    packed_collate = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)
    packed_batches = [packed_collate([row]) for row in packed_rows]
    padded_collate = DataCollatorForLanguageModeling(pad_token_id=0)
    shuffled = ds.shuffle(seed=args.seed)
    padded_batches = [
        padded_collate([shuffled[j] for j in range(i, min(i + args.padded_batch, len(shuffled)))])
        for i in range(0, len(shuffled), args.padded_batch)
    ]

    results = {}
    for mode, batches in (("padded", padded_batches), ("packed", packed_batches)):
        torch.manual_seed(args.seed)
        model = LlamaForCausalLM(config).to(args.device, dtype)
        model.config._attn_implementation = args.attn
        model.train()
        run_epoch(model, batches[:2], args.device)  # warm-up
        seconds, tokens = run_epoch(model, batches, args.device)
        fraction = non_pad_fraction(batches)
        if mode == "packed":
            fraction = packing_efficiency(packed_rows, args.max_length)  # token slots of the fixed-size rows
        results[mode] = {
            "tokens_per_s": tokens / seconds,
            "non_pad_fraction": fraction,
            "steps": len(batches),
        }

    ratio = results["packed"]["tokens_per_s"] / results["padded"]["tokens_per_s"]
    table = Table(title=f"SFT throughput, {args.docs} docs, {args.device}, max_length {args.max_length}")
    for col in ("mode", "steps", "non-pad tokens/s", "non-pad fraction", "vs padded"):
        table.add_column(col, justify="right")
    for mode in ("padded", "packed"):
        r = results[mode]
        table.add_row(
            mode,
            str(r["steps"]),
            f"{r['tokens_per_s']:.0f}",
            f"{r['non_pad_fraction']:.3f}",
            f"{r['tokens_per_s'] / results['padded']['tokens_per_s']:.2f}x",
        )
    Console().print(table)
    print(
        f"RESULT packed_tokens_per_s={results['packed']['tokens_per_s']:.1f} "
        f"padded_tokens_per_s={results['padded']['tokens_per_s']:.1f} packed_vs_padded={ratio:.3f} "
        f"packed_non_pad_fraction={results['packed']['non_pad_fraction']:.4f} "
        f"padded_non_pad_fraction={results['padded']['non_pad_fraction']:.4f}"
    )


if __name__ == "__main__":
    main()
