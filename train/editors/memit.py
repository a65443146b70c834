"""MEMIT (Meng et al. 2023, "Mass-Editing Memory in a Transformer") and its two descendants.

All three write every example of an update at once into the down-projections of several
layers (4–8 in the API-update study, App. D):

1. target values: at the last layer L, the vector the optimisation finds (`locate.optimise_values`)
   at the subject's last token, for each example;
2. for each layer l in order: keys K (the layer's MLP inputs at the subject, averaged over
   prefixes), the residual R = targets − what layer L now gives, spread over the layers left,
   and an update Δ_l from K and R; the next layer sees the weights this one left.

- **MEMIT**: targets at layer L's output (the residual stream), R / (layers left), and
  Δ = R Kᵀ (λ C + K Kᵀ)⁻¹ with C = E[k kᵀ] and λ = `mom2_update_weight` (15,000).
- **PMET** (Li et al. 2024): the attention output and the MLP output of layer L are optimised
  as two separate deltas; only the MLP target is written (the attention one is dropped), its
  residual spread as R / √(layers left) (the reference implementation's schedule).
- **AlphaEdit** (Fang et al. 2025): MEMIT's targets and residuals, with Δ projected onto the
  null space of the preserved keys: P = the eigenvectors of C with eigenvalues below
  `nullspace_threshold`, Δ = R Kᵀ P (P (K Kᵀ + K_p K_pᵀ) + α I)⁻¹ (rows in P's span, so
  Δ K₀ = 0), K_p the keys of earlier edits (successive editing), α = `L2`.

Settings follow EasyEdit's llama-7b (MEMIT, PMET) and llama3-8b (AlphaEdit) files, the
study's configuration source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from core.editing import APIUpdate
from train.editors.locate import (
    EditRequest,
    LocateOptions,
    LocateThenEdit,
    layer_module,
    optimise_values,
    outputs_at_subject,
    requests_of,
    subject_keys,
)

STUDY_LAYERS = (4, 5, 6, 7, 8)


def memit_update(
    residual: torch.Tensor, keys: torch.Tensor, moment: torch.Tensor, weight: float
) -> torch.Tensor:
    """Δ = R Kᵀ (λ C + K Kᵀ)⁻¹ in float64; `residual` (n, d_out), `keys` (n, d_in)."""
    r, k = residual.double(), keys.double()
    system = weight * moment.double() + k.T @ k
    return torch.linalg.solve(system, k.T @ r).T


@dataclass
class MultiLayerOptions(LocateOptions):
    """What the three share beyond ROME's: the layers written, the study's 4-8 (App. D)."""

    layers: list[int] = field(default_factory=lambda: list(STUDY_LAYERS))


@dataclass
class MEMITOptions(MultiLayerOptions):
    """EasyEdit's llama-7b settings, λ = 15,000."""

    mom2_update_weight: float = 15000.0


class MEMITEditor(LocateThenEdit):
    """MEMIT on `module` of `layers`; see the module docstring for the update."""

    name = "memit"
    options: type[MultiLayerOptions] = MEMITOptions
    spread_power = 1.0  # R / (layers left) ** power

    def __init__(self, model: nn.Module, tokenizer: Any, options: MultiLayerOptions | None = None) -> None:
        self.settings = options or self.options()
        super().__init__(model, tokenizer, self.settings.layers, self.settings)
        self.edits = 0

    # -------------------------------------------------------------- what the variants change
    def target_sites(self) -> list[nn.Module]:
        """Where the values are optimised at layer L; the first is the one written."""
        return [layer_module(self.model, self.layers[-1])]

    def layer_update(self, layer: int, residual: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        weight = self.settings.mom2_update_weight  # MEMIT's and PMET's: AlphaEdit has its own update
        return memit_update(residual, keys, self.moment[layer], weight)

    # --------------------------------------------------------------------------------- edit
    def edit(self, update: APIUpdate) -> dict[str, float]:
        prefixes = self.setup()
        requests = requests_of(update)
        sites = self.target_sites()
        targets = torch.stack(
            [
                optimise_values(self.model, self.tokenizer, r, sites, prefixes, self.values)[0]
                for r in requests
            ]
        )
        for i, layer in enumerate(self.layers):
            residual = (targets - self._current(requests, sites[0])) / (
                len(self.layers) - i
            ) ** self.spread_power
            module = self.weights.modules[layer]
            keys = subject_keys(self.model, self.tokenizer, requests, {"w": module}, prefixes)["w"]
            self.weights.add(layer, self.layer_update(layer, residual, keys))
            self.after_layer(layer, keys)
        self.edits += 1
        left = (targets - self._current(requests, sites[0])).norm(dim=-1) / targets.norm(dim=-1)
        return {
            "examples": len(requests),
            "max_abs_delta": self.weights.max_abs_change(),
            "target_gap": left.max().item(),  # relative distance to the targets after the update
        }

    def _current(self, requests: list[EditRequest], site: nn.Module) -> torch.Tensor:
        return outputs_at_subject(self.model, self.tokenizer, requests, site)

    def after_layer(self, layer: int, keys: torch.Tensor) -> None:
        """A hook for variants that remember the keys they wrote (AlphaEdit)."""

    def reset(self) -> None:
        super().reset()
        self.edits = 0


@dataclass
class PMETOptions(MEMITOptions):
    """EasyEdit's PMET llama-7b file: 20 value steps, weight decay 0.5, clamp factor 1."""

    v_steps: int = 20
    v_weight_decay: float = 0.5
    clamp_norm_factor: float = 1.0


class PMETEditor(MEMITEditor):
    """PMET: the attention and MLP outputs of layer L optimised apart, the MLP target written."""

    name = "pmet"
    options = PMETOptions
    spread_power = 0.5

    def target_sites(self) -> list[nn.Module]:
        last = self.layers[-1]
        return [self.weights.modules[last], layer_module(self.model, last, "self_attn.o_proj")]


@dataclass
class AlphaEditOptions(MultiLayerOptions):
    """EasyEdit's AlphaEdit llama3-8b file: lr 0.1, weight decay 0.5, clamp factor 0.75, null-space
    threshold 2e-2, L2 = 1."""

    v_lr: float = 0.1
    v_weight_decay: float = 0.5
    clamp_norm_factor: float = 0.75
    nullspace_threshold: float = 2e-2
    L2: float = 1.0  # noqa: N815 - the reference's name


class AlphaEditEditor(MEMITEditor):
    """AlphaEdit: MEMIT's residuals, the update confined to the preserved keys' null space."""

    name = "alphaedit"
    options = AlphaEditOptions

    def __init__(self, model: nn.Module, tokenizer: Any, options: AlphaEditOptions | None = None) -> None:
        o = options or AlphaEditOptions()
        super().__init__(model, tokenizer, o)
        self.threshold, self.l2 = o.nullspace_threshold, o.L2
        self.projection: dict[int, torch.Tensor] = {}
        self.written: dict[int, torch.Tensor] = {}  # Σ K Kᵀ of earlier edits, per layer

    def null_space(self, layer: int) -> torch.Tensor:
        """P = U Uᵀ over the eigenvectors of C whose eigenvalues are below the threshold."""
        if layer not in self.projection:
            values, vectors = torch.linalg.eigh(self.moment[layer].double())
            small = vectors[:, values < self.threshold]
            self.projection[layer] = small @ small.T
        return self.projection[layer]

    def layer_update(self, layer: int, residual: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        p, k, r = self.null_space(layer), keys.double(), residual.double()
        earlier = self.written.get(layer, torch.zeros_like(p))
        system = p @ (k.T @ k + earlier) + self.l2 * torch.eye(len(p), dtype=p.dtype, device=p.device)
        return torch.linalg.solve(system, p @ k.T @ r).T

    def after_layer(self, layer: int, keys: torch.Tensor) -> None:
        k = keys.double()
        self.written[layer] = self.written.get(layer, 0) + k.T @ k

    def reset(self) -> None:
        super().reset()
        self.written.clear()
