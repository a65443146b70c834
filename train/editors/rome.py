"""ROME (Meng et al. 2022, "Locating and Editing Factual Associations in GPT"): a rank-one update.

One MLP down-projection W (layer 5 in the API-update study, App. D) gets

    W' = W + (v* - W k) (C⁻¹ u)ᵀ / ((C⁻¹ u)ᵀ k)

where u is the key averaged over the model's own prefixes, k the key of the edit prompt alone,
v* = W k + δ the value the optimisation found (`locate.optimise_values` at the MLP's output)
and C = E[k kᵀ] the second moment of the layer's inputs on a code corpus (`moments.py`). It is
the solution of min ‖ΔK₀‖ (in the metric C) subject to W'k = v* when u = k, and follows
EasyEdit's implementation (the study's) where u ≠ k. Examples of one update are written one
after another, each on the weights the previous one left, as ROME's apply_rome_to_model does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from core.editing import APIUpdate
from train.editors.locate import (
    LocateOptions,
    LocateThenEdit,
    layer_module,
    optimise_values,
    outputs_at_subject,
    requests_of,
    subject_keys,
)


@dataclass(frozen=True)
class RankOne:
    """One written key-value pair (kept for the report and to check the closed form)."""

    layer: int
    u: torch.Tensor  # key averaged over prefixes
    k: torch.Tensor  # key of the prompt alone
    v: torch.Tensor  # the value W'k must give
    delta: torch.Tensor  # the weight change


def rank_one_update(
    weight: torch.Tensor, moment: torch.Tensor | None, u: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """ROME's closed form in float64: the change Δ with (W + Δ) k = v along C⁻¹u (u without C)."""
    w, u, k, v = weight.double(), u.double(), k.double(), v.double()
    left = torch.linalg.solve(moment.double(), u) if moment is not None else u
    left = left / left.norm()
    right = (v - w @ k) / (left @ k)
    return torch.outer(right, left)


@dataclass
class ROMEOptions(LocateOptions):
    """The study's layer 5 and EasyEdit's llama-7b settings (25 value steps at lr 0.5, weight
    decay 1e-3, clamp factor 4, KL factor 0.0625, prefixes of 5 and 10 tokens, 10 each) with the
    second-moment adjustment on (`mom2_adjustment`, ROME's own default; EasyEdit's llama file
    turns it off to save the statistics pass): 100,000 chunks of the `corpus`."""

    layer: int = 5
    mom2_adjustment: bool = True


class ROMEEditor(LocateThenEdit):
    """ROME on `module` (the down-projection) of decoder layer `layer`."""

    name = "rome"
    options = ROMEOptions

    def __init__(self, model: nn.Module, tokenizer: Any, options: ROMEOptions | None = None) -> None:
        o = options or ROMEOptions()
        super().__init__(model, tokenizer, [o.layer], o, second_moments=o.mom2_adjustment)
        self.layer = o.layer
        self.site = layer_module(model, o.layer, "mlp")
        self.history: list[RankOne] = []

    def edit(self, update: APIUpdate) -> dict[str, float]:
        prefixes = self.setup()
        moment = self.moment.get(self.layer)
        module = self.weights.modules[self.layer]
        for request in requests_of(update):
            u = subject_keys(self.model, self.tokenizer, [request], {"w": module}, prefixes)["w"][0]
            k = subject_keys(self.model, self.tokenizer, [request], {"w": module}, [[""]])["w"][0]
            (target,) = optimise_values(
                self.model, self.tokenizer, request, [self.site], prefixes, self.values
            )
            current = outputs_at_subject(self.model, self.tokenizer, [request], module)[0]
            v = self.weights.weight(self.layer).double() @ k.double() + (target - current).double()
            delta = rank_one_update(self.weights.weight(self.layer), moment, u, k, v)
            self.weights.add(self.layer, delta)
            self.history.append(RankOne(self.layer, u, k, v, delta))
        return {
            "examples": len(update.examples),
            "max_abs_delta": self.weights.max_abs_change(),
            "edits": len(self.history),
        }

    def reset(self) -> None:
        super().reset()
        self.history.clear()
