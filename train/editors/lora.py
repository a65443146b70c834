"""LoRA: a low-rank adapter trained on an update's edit examples, the base weights untouched.

Successive edits keep training the one adapter; `reset` puts its initial weights back (B = 0),
so the wrapped model computes exactly what the base model does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from peft import LoraConfig, get_peft_model
from peft.tuners.lora import LoraLayer
from torch import nn

from core.editing import APIUpdate
from train.editors.common import encode_update, model_device, target_nll, trainable_only

ADAPTER = "default"


class LoRAEditor:
    """peft LoRA (dropout 0) on `target_modules`, trained with Adam for `steps` steps per edit.

    Defaults: rank 8 with alpha 16 on the attention query and value projections (the LoRA
    paper's choice of matrices), lr 1e-3, 25 steps like FT-L; not tuned for any model.
    """

    name = "lora"

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        r: int = 8,
        alpha: float = 16,
        target_modules: Sequence[str] = ("q_proj", "v_proj"),
        lr: float = 1e-3,
        steps: int = 25,
    ) -> None:
        config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, target_modules=list(target_modules))
        self.model = get_peft_model(model, config, adapter_name=ADAPTER)
        self.tokenizer = tokenizer
        self.lr, self.steps = lr, steps
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
