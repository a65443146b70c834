"""LoRA: a low-rank adapter trained on an update's edit examples, the base weights untouched.

Successive edits keep training the one adapter; `reset` puts its initial weights back (B = 0),
so the wrapped model computes exactly what the base model does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from peft import LoraConfig, get_peft_model
from peft.tuners.lora import LoraLayer
from torch import nn

from core.editing import APIUpdate, EditorOptions
from core.errors import ConfigError
from train.editors.common import encode_update, model_device, target_nll, trainable_only

ADAPTER = "default"


@dataclass
class LoRAOptions(EditorOptions):
    """Rank 8 with alpha 16 on the attention query and value projections (the LoRA paper's
    choice of matrices), lr 1e-3, 25 steps like FT-L; not tuned for any model."""

    r: int = 8
    alpha: float = 16.0
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])
    lr: float = 1e-3
    steps: int = 25

    def __post_init__(self) -> None:
        if self.r < 1 or self.steps < 1 or not self.target_modules:
            raise ConfigError(
                f"LoRA needs r >= 1, steps >= 1 and target_modules (got r={self.r}, steps={self.steps}, "
                f"target_modules={self.target_modules})"
            )


class LoRAEditor:
    """peft LoRA (dropout 0) on `target_modules`, trained with Adam for `steps` steps per edit."""

    name = "lora"
    options = LoRAOptions

    def __init__(self, model: nn.Module, tokenizer: Any, options: LoRAOptions | None = None) -> None:
        o = options or LoRAOptions()
        config = LoraConfig(
            r=o.r, lora_alpha=o.alpha, lora_dropout=0.0, target_modules=list(o.target_modules)
        )
        self.model = get_peft_model(model, config, adapter_name=ADAPTER)
        self.tokenizer = tokenizer
        self.lr, self.steps = o.lr, o.steps
        self.adapter = [p for name, p in self.model.named_parameters() if "lora_" in name]
        self.initial = [p.detach().clone() for p in self.adapter]

    def edit(self, update: APIUpdate) -> dict[str, float]:
        batch = encode_update(self.tokenizer, update, model_device(self.model))
        optimizer = torch.optim.Adam(self.adapter, lr=self.lr)
        with trainable_only(self.model, self.adapter):
            for _ in range(self.steps):
                target_nll(self.model, batch).backward()
                optimizer.step()
                optimizer.zero_grad()
        with torch.no_grad():
            loss = target_nll(self.model, batch).item()
            change = max(
                m.get_delta_weight(ADAPTER).abs().max().item()
                for m in self.model.modules()
                if isinstance(m, LoraLayer)
            )
        return {"loss": loss, "steps": self.steps, "max_abs_delta": change}

    def notice(self) -> str:
        return ""

    def reset(self) -> None:
        with torch.no_grad():
            for p, p0 in zip(self.adapter, self.initial, strict=True):
                p.copy_(p0)
