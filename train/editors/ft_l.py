"""FT-L: fine-tune one layer's MLP down-projection, each entry kept within δ of its original value.

The constrained fine-tuning baseline of ROME (Meng et al. 2022, "FT-L"; EasyEdit's FT with
`norm_constraint`): the smallest weight edit, so what it breaks elsewhere shows how local
an API update can be made by plain gradient descent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from core.editing import APIUpdate, EditorOptions
from core.errors import ConfigError
from train.editors.common import encode_update, layer_module_name, target_nll, trainable_only


@dataclass
class FTLOptions(EditorOptions):
    """The published study's settings for 7B models: layer 21, lr 5e-4, δ 1e-4, 25 steps."""

    layer: int = 21
    lr: float = 5e-4
    delta: float = 1e-4  # each entry stays within delta of its value as built
    steps: int = 25
    module: str = "mlp.down_proj"

    def __post_init__(self) -> None:
        if self.delta < 0 or self.steps < 1:
            raise ConfigError(
                f"FT-L needs delta >= 0 and steps >= 1 (got delta={self.delta}, steps={self.steps})"
            )


class FTLEditor:
    """Adam on one weight matrix (`module` of decoder layer `layer`), everything else frozen;
    after every step the weight is clamped to [W0 - delta, W0 + delta], W0 being the weight as
    built, so successive edits share one budget."""

    name = "ft-l"
    options = FTLOptions

    def __init__(self, model: nn.Module, tokenizer: Any, options: FTLOptions | None = None) -> None:
        o = options or FTLOptions()
        self.model = model
        self.tokenizer = tokenizer
        self.lr, self.delta, self.steps = o.lr, o.delta, o.steps
        self.weight: nn.Parameter = model.get_submodule(layer_module_name(model, o.layer, o.module)).weight
        self.original = self.weight.detach().clone()

    def edit(self, update: APIUpdate) -> dict[str, float]:
        batch = encode_update(self.tokenizer, update, self.weight.device)
        optimizer = torch.optim.Adam([self.weight], lr=self.lr)
        with trainable_only(self.model, [self.weight]):
            for _ in range(self.steps):
                target_nll(self.model, batch).backward()
                optimizer.step()
                optimizer.zero_grad()
                with torch.no_grad():
                    self.weight.clamp_(self.original - self.delta, self.original + self.delta)
        with torch.no_grad():
            loss = target_nll(self.model, batch).item()
            change = (self.weight - self.original).abs().max().item()
        return {"loss": loss, "steps": self.steps, "max_abs_delta": change}

    def notice(self) -> str:
        return ""

    def reset(self) -> None:
        with torch.no_grad():
            self.weight.copy_(self.original)
