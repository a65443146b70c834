"""Model FLOPs utilisation, counted from what a training step computes.

Per trained token, forward and backward (x3 the forward's 2 FLOPs per multiply-add):

- **6N**: N = the parameters that multiply activations. The input embedding is a lookup, not a
  matrix product, so it is left out. The LM head counts only where it is computed: the trainer's
  loss is trl's fused head, which projects only the positions that have a target (the
  completion's tokens under completion-only loss, every token under `loss_on: all`), so its
  parameters are weighted by that fraction of the tokens. Tied embeddings count once, as the head.
- **attention**: a causal document of T tokens costs 2·T²·d multiply-adds per layer for QKᵀ and
  A·V together (half of the T² square), i.e. 6·L·d·T² FLOPs with the backward; per token of a
  batch of documents that is 6·L·d·ΣT²/ΣT (packed rows attend within each document, so it is the
  documents' lengths that count, not the row's).

MFU = tokens/s per device x FLOPs per token / the device's dense bf16 peak, looked up from the
exact device name (an H100 PCIe or NVL is not an SXM card).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

# Dense (no sparsity) bf16 peak TFLOP/s per model, from the vendors' datasheets: (SXM or the only
# form, PCIe, NVL). A model is matched as a whole word of the name, so an L40 is not an L4 and a
# GH200 is not an H200; the form factor comes from a "PCIe" or "NVL" word in the name.
PEAK_TFLOPS: dict[str, tuple[float, float | None, float | None]] = {
    "GB200": (2500.0, None, None),
    "B200": (2250.0, None, None),
    "B100": (1750.0, None, None),
    "GH200": (989.0, None, None),
    "H200": (989.0, None, 835.0),
    "H100": (989.0, 756.0, 835.0),  # SXM: "NVIDIA H100 80GB HBM3"
    "H800": (989.0, 756.0, None),
    "H20": (148.0, None, None),
    "A100": (312.0, 312.0, None),  # SXM4 and PCIe alike
    "A800": (312.0, 312.0, None),
    "L40S": (362.0, None, None),
    "L40": (181.0, None, None),
    "L4": (121.0, None, None),
    "A10": (125.0, None, None),
}


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of the device named `device_name` (torch.cuda.get_device_name), or None
    for a device (or form factor) not in the table: MFU is then not logged rather than guessed."""
    words = re.split(r"[^A-Z0-9]+", device_name.upper())
    model = next((word for word in words if word in PEAK_TFLOPS), None)
    if model is None:
        return None
    sxm, pcie, nvl = PEAK_TFLOPS[model]
    if "NVL" in words:
        return nvl
    if "PCIE" in words:
        return pcie
    return sxm


def detect_peak_tflops() -> float | None:
    return peak_tflops(torch.cuda.get_device_name()) if torch.cuda.is_available() else None


def matmul_parameters(model: nn.Module) -> int:
    """The parameters that multiply activations: all of them but an input embedding that is not
    also the output head (ZeRO-3 partitioned parameters counted whole)."""

    def size(p: torch.Tensor) -> int:
        return getattr(p, "ds_numel", None) or p.numel()

    total = sum(size(p) for p in model.parameters())
    embedding = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if embedding is None or (head is not None and head.weight is embedding.weight):
        return total
    return total - size(embedding.weight)


def attention_length(lengths: Iterable[int]) -> float:
    """ΣT²/ΣT over the documents: the length each token attends over, on average, weighted as the
    attention cost is."""
    total = squares = 0
    for length in lengths:
        total += length
        squares += length * length
    return squares / total if total else 0.0


@dataclass(frozen=True)
class FlopsPerToken:
    """Training FLOPs per token under both conventions (see the module docstring)."""

    matmul_params: int
    layers: int
    hidden: int
    attention_length: float
    head_params: int = 0  # the LM head's share of matmul_params
    head_fraction: float = 1.0  # the fraction of tokens the head is computed at (those with a target)

    @property
    def dense(self) -> float:
        return 6.0 * (self.matmul_params - self.head_params * (1.0 - self.head_fraction))

    @property
    def with_attention(self) -> float:
        return self.dense + 6.0 * self.layers * self.hidden * self.attention_length

    def mfu(self, tokens_per_second: float, peak: float | None) -> tuple[float | None, float | None]:
        """(MFU 6N, MFU 6N + attention) at `tokens_per_second` per device; None without a peak."""
        if not peak:
            return None, None
        scale = tokens_per_second / (peak * 1e12)
        return self.dense * scale, self.with_attention * scale


def flops_per_token(model: nn.Module, attention_len: float, head_fraction: float = 1.0) -> FlopsPerToken:
    """The model's counts; `head_fraction` = target tokens / tokens for the fused head."""
    if not 0.0 <= head_fraction <= 1.0:
        raise ValueError(f"head_fraction={head_fraction} is a fraction of the tokens (0..1)")
    config = model.config
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    head_params = 0 if head is None else getattr(head.weight, "ds_numel", None) or head.weight.numel()
    return FlopsPerToken(
        matmul_parameters(model),
        config.num_hidden_layers,
        config.hidden_size,
        attention_len,
        head_params,
        head_fraction,
    )
