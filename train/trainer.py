"""The SFT trainer: trl's `SFTTrainer` plus a non-finite-loss stop, throughput/MFU logging
(`mfu`: 6N, `mfu_with_attention`: 6N + the causal attention term; `train/mfu.py`), and no host
sync or collective of its own in a micro-step that does not log.

trl's `compute_loss` reads its metrics (entropy, token accuracy, tokens seen) back to the host
and gathers them across ranks on every micro-step. Here the loss is the same (trl's fused LM head,
summed over target tokens and divided by the optimizer step's target count), and the metrics are
summed on the device, then gathered and read once per logging step. The non-finite-loss flag stays
on the device too and is checked, with one all-reduce, before every log and every save, so a bad
step never reaches a checkpoint.

All of it uses documented override points (`compute_loss`, `training_step`, `log`, `save_model`),
not patches; so does `create_model_card`, which writes nothing: the run writes its own card into
`final/`.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.distributed as dist
from trl import SFTTrainer

from train.mfu import FlopsPerToken
from train.modeling import compile_decoder_layers


class NonFiniteLossError(RuntimeError):
    """The loss became NaN/inf; training stopped before saving anything past the last good checkpoint."""


class EditSFTTrainer(SFTTrainer):
    """`SFTTrainer` that stops on a non-finite loss, logs tokens/s per device and both MFUs, keeps
    per-micro-step bookkeeping on the device and, on request, compiles its decoder layers."""

    def __init__(
        self,
        *args: Any,
        flops: FlopsPerToken | None = None,
        peak_tflops: float | None = None,
        compile_layers: bool = False,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self._flops = flops
        self._peak_tflops = peak_tflops
        self._last_tokens: float | None = None
        self._last_time = 0.0
        self._sums: torch.Tensor | None = None  # entropy, top-1 hits, targets, padded-batch tokens
        self._row_tokens = 0  # padding-free rows: their lengths are known on the host
        self._nonfinite: torch.Tensor | None = None  # any non-finite loss since the last check
        if compile_layers:  # traced at their first call, after train() has applied Liger and checkpointing
            compile_decoder_layers(self.model)

    def _tokens_seen(self) -> float:
        # Non-pad input tokens over all processes (attention-mask sum, or row length when padding-free).
        return float(getattr(self, "_total_train_tokens", 0))

    # ------------------------------------------------------------------ the micro-step
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """trl's training loss (the nll of the fused LM head, as our recipes train), its metrics summed on
        the device instead of read back; evaluation and `return_outputs` go to trl unchanged."""
        if return_outputs or not self.model.training:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        outputs = model(**inputs, use_cache=False, fused_lm_head=True)
        targets = outputs.label_mask.sum()
        count = targets if num_items_in_batch is None else num_items_in_batch
        loss = -outputs.log_probs.sum() / torch.as_tensor(count).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            # `num_items_in_batch` counts every rank's targets and DDP averages the gradients over ranks.
            loss = loss * self.accelerator.num_processes
        self._accumulate(outputs, targets, inputs)
        return loss

    def _accumulate(self, outputs: Any, targets: torch.Tensor, inputs: dict[str, Any]) -> None:
        if "attention_mask" in inputs:
            padded = inputs["attention_mask"].sum()
        else:
            padded = targets.new_zeros(())
            self._row_tokens += inputs["position_ids"].size(1)
        parts = (outputs.entropy.detach().sum(), outputs.is_top1.sum(), targets, padded)
        step = torch.stack([part.double() for part in parts])
        self._sums = step if self._sums is None else self._sums + step

    def training_step(self, model, inputs, num_items_in_batch=None):
        if self._last_tokens is None:
            self._last_tokens, self._last_time = self._tokens_seen(), time.perf_counter()
        loss = super().training_step(model, inputs, num_items_in_batch)
        bad = ~torch.isfinite(loss)
        self._nonfinite = bad if self._nonfinite is None else self._nonfinite | bad
        return loss

    # ------------------------------------------------------------------ logging and saving
    def _stop_on_nonfinite_loss(self) -> None:
        """Raise on every rank at once if a micro-step since the last check had a non-finite loss."""
        if self._nonfinite is None:
            return
        bad = self._nonfinite.to(torch.float32).reshape(1)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(bad, op=dist.ReduceOp.MAX)
        self._nonfinite = None
        if bad.item() > 0:
            raise NonFiniteLossError(
                f"non-finite loss by step {self.state.global_step}; stopped without saving. "
                f"The last good checkpoint (if any) is in {self.args.output_dir}; lower recipe.lr or check the data."
            )

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        self._stop_on_nonfinite_loss()  # every rank saves (ZeRO-3 gathers), so every rank checks
        super().save_model(output_dir, _internal_call)

    def create_model_card(self, *args, **kwargs) -> None:
        """trl writes a generic README.md on every checkpoint; ours describes the recipe and data."""

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        self._stop_on_nonfinite_loss()
        if self.model.training and "loss" in logs:
            self._flush_metrics()
            self._add_throughput(logs)
        super().log(logs, start_time)

    def _flush_metrics(self) -> None:
        """The metrics trl logs, from the sums since the last log: one gather, one read."""
        if self._sums is None:
            return
        sums = self._sums.clone()
        sums[3] += self._row_tokens
        entropy, hits, targets, tokens = self.accelerator.gather(sums[None]).sum(0).tolist()
        self._sums, self._row_tokens = None, 0
        self._total_train_tokens += int(tokens)
        metrics = self._metrics["train"]
        metrics["entropy"] = [entropy / targets if targets else 0.0]
        metrics["mean_token_accuracy"] = [hits / targets if targets else 0.0]
        metrics["num_tokens"] = [self._total_train_tokens]

    def _add_throughput(self, logs: dict[str, float]) -> None:
        tokens, now = self._tokens_seen(), time.perf_counter()
        if self._last_tokens is not None and now > self._last_time:
            per_device = (tokens - self._last_tokens) / (now - self._last_time) / self.args.world_size
            logs["tokens_per_second_per_device"] = round(per_device, 2)
            if self._flops is not None:
                dense, attention = self._flops.mfu(per_device, self._peak_tflops)
                for key, mfu in (("mfu", dense), ("mfu_with_attention", attention)):
                    if mfu is not None:
                        logs[key] = round(mfu, 4) if math.isfinite(mfu) else float("nan")
        self._last_tokens, self._last_time = tokens, now
