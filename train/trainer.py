"""The SFT trainer: trl's `SFTTrainer` plus a non-finite-loss stop and throughput/MFU logging
(`mfu`: 6N, `mfu_with_attention`: 6N + the causal attention term; `train/mfu.py`).

Both additions use documented override points (`training_step`, `log`), not patches; so does
`create_model_card`, which writes nothing: the run writes its own card into `final/`.
"""

from __future__ import annotations

import math
import time

import torch
import torch.distributed as dist
from trl import SFTTrainer

from train.mfu import FlopsPerToken


class NonFiniteLossError(RuntimeError):
    """The loss became NaN/inf; training stopped before saving anything past the last good checkpoint."""


class EditSFTTrainer(SFTTrainer):
    """`SFTTrainer` that stops on a non-finite loss and logs tokens/s per device and both MFUs."""

    def __init__(self, *args, flops: FlopsPerToken | None = None, peak_tflops: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._flops = flops
        self._peak_tflops = peak_tflops
        self._last_tokens: float | None = None
        self._last_time = 0.0

    def _tokens_seen(self) -> float:
        # trl counts non-pad tokens over all processes (attention-mask sum, or row length when padding-free).
        return float(getattr(self, "_total_train_tokens", 0))

    def training_step(self, model, inputs, num_items_in_batch=None):
        if self._last_tokens is None:
            self._last_tokens, self._last_time = self._tokens_seen(), time.perf_counter()
        loss = super().training_step(model, inputs, num_items_in_batch)
        bad = (~torch.isfinite(loss.detach())).to(torch.float32).reshape(1)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(bad, op=dist.ReduceOp.MAX)  # every rank stops together
        if bad.item() > 0:
            raise NonFiniteLossError(
                f"non-finite loss at step {self.state.global_step + 1}; stopped without saving. "
                f"The last good checkpoint (if any) is in {self.args.output_dir}; lower recipe.lr or check the data."
            )
        return loss

    def create_model_card(self, *args, **kwargs) -> None:
        """trl writes a generic README.md on every checkpoint; ours describes the recipe and data."""

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self.model.training and "loss" in logs:
            self._add_throughput(logs)
        super().log(logs, start_time)

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
