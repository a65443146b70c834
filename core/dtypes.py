"""The one map from a config's dtype name to torch's dtype (training, evaluation, the editing study)."""

from __future__ import annotations

from typing import Any

from core.errors import ConfigError

DTYPES = ("auto", "bf16", "fp16", "fp32")  # auto: what the checkpoint's config says


def check_dtype(name: str, key: str) -> None:
    if name not in DTYPES:
        raise ConfigError(f"{key}={name!r}: choose one of {DTYPES}")


def torch_dtype(name: str) -> Any:
    """`torch.bfloat16` for "bf16", ...; "auto" stays "auto" (transformers reads it)."""
    import torch

    value = str(getattr(name, "value", name))  # training's DType enum holds the same names
    check_dtype(value, "dtype")
    return {"auto": "auto", "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[value]
