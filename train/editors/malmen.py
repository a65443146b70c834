"""MALMEN: a meta-learned hyper-network turns an update's examples into weight shifts of the last
decoder layers' down-projections, aggregated by least squares (Tan et al. 2024, "Massive
Editing for Large Language Models via Meta Learning", ICLR'24).

As the reference code (github.com/ChenmienTan/malmen, `editor/base.py`, `editor/malmen.py`):
hooks take each edited module's keys (its input) and value gradients (the gradient of the edit
loss w.r.t. its output) at the tokens that predict the target; the network (`malmen_net.py`)
maps them to value differences; one shift per module solves a ridge least-squares problem over
all of them (`ridge_shift`), so conflicting edits are reconciled instead of summed. Meta-training
applies the shift, takes the edit loss on generalization tuples plus a KL locality loss against
the unedited model on unrelated tuples, and backpropagates in two stages: the LM gives dL/dW for
the edited matrices only, and (S ⊙ dL/dW).sum() carries it into the network, the LM decoupled.

Settings: the API-update study's App. D (last 5 layers' down-projections, hidden rank 1920, 2
blocks, lr 1e-5, 4 edits per batch, 1000 steps) and, where it is silent, the reference's
`config/editor/malmen.yaml` (initial step size `edit_lr` 1e-6, `loc_coef` 1). App. D says the
hyper-network's parameters are "clamped to L2 norm <= 1" while the reference clips the
gradient's global L2 norm to `max_grad_norm: 1`; the default follows the code (`norm_on="grad"`),
because clamping would shrink the N(0, 1) first matrix (norm ≈ √(15104 · 1920) ≈ 5400 for a 7B
Llama) to almost nothing at the first step. `norm_on="param"` is App. D's literal reading:
after each step every parameter tensor is rescaled to L2 norm <= `max_norm`.

Departures from the reference: the edit loss whose value gradients are taken is summed, not
averaged, over target tokens, so a token's gradient does not depend on how many edits share
its batch (4 in fit, 1 in `edit`); the key/gradient normaliser learns only during `fit`, so an
edit depends on the checkpoint alone and `reset` restores everything.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from core.editing import APIUpdate, EditExample, EditorOptions
from core.errors import ConfigError
from train.editors.common import (
    IGNORE_INDEX,
    EditBatch,
    decoder_layers_name,
    encode_update,
    layer_module_name,
    model_device,
    target_nll,
    trainable_only,
)
from train.editors.malmen_net import MALMENNet, ridge_shift

DEFAULT_LAST_LAYERS = 5
NORM_ON = ("grad", "param")


@dataclass
class MALMENOptions(EditorOptions):
    """App. D's settings (the last 5 layers' down-projections, hidden rank 1920, 2 blocks, lr 1e-5,
    4 edits per batch, 1000 steps), the rest as the reference code; `checkpoint`: a folder `fit`
    wrote (None: fit first)."""

    layers: list[int] | None = None  # None: the last 5 decoder layers
    module: str = "mlp.down_proj"
    rank: int = 1920
    n_blocks: int = 2
    lr: float = 1e-5
    edit_lr: float = 1e-6
    batch_size: int = 4
    steps: int = 1000
    loc_coef: float = 1.0
    max_norm: float = 1.0
    norm_on: str = "grad"  # grad | param (see the module docstring)
    seed: int = 0
    checkpoint: str | None = None

    def __post_init__(self) -> None:
        if min(self.steps, self.batch_size, self.rank, self.n_blocks) < 1 or self.max_norm <= 0:
            raise ConfigError(
                f"MALMEN needs steps, batch_size, rank, n_blocks >= 1 and max_norm > 0 (got steps={self.steps}, "
                f"batch_size={self.batch_size}, rank={self.rank}, n_blocks={self.n_blocks}, "
                f"max_norm={self.max_norm})"
            )
        if self.norm_on not in NORM_ON:
            raise ConfigError(f"editor.options.norm_on={self.norm_on!r}: use one of {NORM_ON}")


class MALMENEditor:
    """Shifts `module` of decoder layers `layers` (default: the last 5) by what the fitted
    hyper-network predicts from an update's examples; shifts accumulate on the current weights."""

    name = "malmen"
    options = MALMENOptions

    def __init__(self, model: nn.Module, tokenizer: Any, options: MALMENOptions | None = None) -> None:
        o = options or MALMENOptions()
        self.model, self.tokenizer = model, tokenizer
        self.lr, self.batch_size, self.steps, self.loc_coef = o.lr, o.batch_size, o.steps, o.loc_coef
        self.max_norm, self.norm_on, self.seed = o.max_norm, o.norm_on, o.seed
        self.module_names = [layer_module_name(model, layer, o.module) for layer in self._layers(o.layers)]
        self.weights: list[nn.Parameter] = [model.get_submodule(n).weight for n in self.module_names]
        self.original = [w.detach().clone() for w in self.weights]
        self.config = {"modules": self.module_names, "rank": o.rank, "n_blocks": o.n_blocks}
        self.nets, self.slots = self._build_nets(o.rank, o.n_blocks, o.edit_lr)
        self.fitted = False
        if o.checkpoint is not None:
            self.load(Path(o.checkpoint))

    def _layers(self, layers: list[int] | None) -> list[int]:
        if layers is not None:
            return list(layers)
        _, count = decoder_layers_name(self.model)
        if count < DEFAULT_LAST_LAYERS:
            raise ConfigError(
                f"MALMEN edits the last {DEFAULT_LAST_LAYERS} decoder layers by default, but the model has "
                f"{count}: give editor.options.layers explicitly"
            )
        return list(range(count - DEFAULT_LAST_LAYERS, count))

    def _build_nets(
        self, rank: int, n_blocks: int, edit_lr: float
    ) -> tuple[nn.ModuleDict, list[tuple[str, int]]]:
        """One network per (key size, value size), as the reference: modules of one shape share it
        and are told apart by their index in it."""
        shapes: dict[str, list[int]] = {}
        slots = []
        for weight in self.weights:
            value_size, key_size = weight.shape  # a Linear's weight is (out, in)
            members = shapes.setdefault(f"{key_size}x{value_size}", [key_size, value_size, 0])
            slots.append((f"{key_size}x{value_size}", members[2]))
            members[2] += 1
        nets = nn.ModuleDict(
            {
                key: MALMENNet(k, v, rank, n_blocks, n, edit_lr, self.seed + i)
                for i, (key, (k, v, n)) in enumerate(shapes.items())
            }
        )
        return nets.to(model_device(self.model)), slots

    # ---------------------------------------------------------------------------- the editor contract
    def edit(self, update: APIUpdate) -> dict[str, float]:
        if not self.fitted:
            raise ValueError(
                "MALMEN's hyper-network is not trained: call fit(updates, out) first, or build the editor "
                "with the option checkpoint=<a folder fit wrote>"
            )
        batch = encode_update(self.tokenizer, update, model_device(self.model))
        with torch.no_grad():
            before = target_nll(self.model, batch).item()
        with trainable_only(self.model, self.weights):
            cache = self._cache(batch)
        with torch.no_grad():
            shifts = self._shifts(cache)
            self._add(shifts)
            after = target_nll(self.model, batch).item()
        return {
            "loss_before": before,
            "loss_after": after,
            "max_abs_shift": max(s.abs().max().item() for s in shifts),
        }

    def notice(self) -> str:
        return ""

    def reset(self) -> None:
        self._restore(self.original)

    # ------------------------------------------------------------------------------------ fit, load
    def fit(self, updates: Sequence[APIUpdate], out: Path) -> dict[str, float]:
        """Meta-train on `updates` (one per API, its examples the edit rows), then save to `out`;
        each step edits `batch_size` APIs at once (`meta_batch`). The weights end as they began."""
        if len(updates) <= self.batch_size or not all(u.examples for u in updates):
            raise ConfigError(
                f"MALMEN fit needs more APIs than batch_size={self.batch_size}, each with examples "
                f"(got {len(updates)}): locality tuples come from APIs outside each batch"
            )
        optimizer = torch.optim.Adam(self.nets.parameters(), lr=self.lr)
        rng = random.Random(self.seed)
        base = [w.detach().clone() for w in self.weights]
        losses = []
        with trainable_only(self.model, self.weights), tqdm(range(self.steps), desc="MALMEN fit") as bar:
            for _ in bar:
                edit, gen, loc = meta_batch(updates, self.batch_size, rng)
                batches = self._encode(edit, "edit"), self._encode(gen, "gen"), self._encode(loc, "loc")
                losses.append(self._train_step(batches, base, optimizer))
                bar.set_postfix(gen=f"{losses[-1][0]:.3f}", loc=f"{losses[-1][1]:.3f}", refresh=False)
        self.fitted = True
        self.save(Path(out))
        window = max(1, self.steps // 10)
        (gen_first, _), (gen_last, loc_last) = (
            torch.tensor(part).mean(0).tolist() for part in (losses[:window], losses[-window:])
        )
        return {
            "steps": self.steps,
            "gen_loss_first": gen_first,
            "gen_loss_last": gen_last,
            "loc_loss_last": loc_last,
        }

    def save(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        torch.save(self.nets.state_dict(), out / "malmen.pt")
        (out / "malmen.json").write_text(json.dumps(self.config, indent=2) + "\n")

    def load(self, path: Path) -> None:
        """Read a folder `fit` wrote; it must have been trained for the same modules and sizes."""
        path = Path(path)
        try:
            saved = json.loads((path / "malmen.json").read_text())
        except FileNotFoundError as err:
            raise ConfigError(
                f"MALMEN checkpoint {path} has no malmen.json: give a folder that fit wrote"
            ) from err
        if saved != self.config:
            raise ConfigError(
                f"MALMEN checkpoint {path} was trained for {saved}, but this editor is {self.config}: "
                "build it with the same layers, module, rank and n_blocks"
            )
        self.nets.load_state_dict(torch.load(path / "malmen.pt", map_location=model_device(self.model)))
        self.fitted = True

    # ------------------------------------------------------------------------------------ internals
    def _encode(self, examples: list[EditExample], kind: str) -> EditBatch:
        return encode_update(
            self.tokenizer, APIUpdate(f"malmen-{kind}", "", tuple(examples)), model_device(self.model)
        )

    def _train_step(
        self, batches: tuple[EditBatch, ...], base: list[torch.Tensor], optimizer: torch.optim.Optimizer
    ) -> tuple[float, float]:
        """One meta-step: shift, LM losses → dL/dW, restore the weights, dL/dW → the network."""
        edit, gen, loc = batches
        cache = self._cache(edit)
        for (keys, grads), (key, _) in zip(cache, self.slots, strict=True):
            self.nets[key].normalizer.update(torch.cat((keys, grads), -1))
        shifts = self._shifts(cache)  # the network's graph stays alive through the LM passes
        with torch.no_grad():
            reference = self._logits(loc)
            self._add([s.detach() for s in shifts])
        gen_loss = target_nll(self.model, gen)
        gen_grads = torch.autograd.grad(gen_loss, self.weights)
        loc_loss = locality_kl(reference, self._logits(loc), answer_mask(loc.labels))
        loc_grads = torch.autograd.grad(self.loc_coef * loc_loss, self.weights)
        self._restore(base)
        optimizer.zero_grad()
        surrogate = sum(
            (s * (g + h).T.float()).sum() for s, g, h in zip(shifts, gen_grads, loc_grads, strict=True)
        )
        surrogate.backward()
        self._bound_step(optimizer)
        return gen_loss.item(), loc_loss.item()

    def _bound_step(self, optimizer: torch.optim.Optimizer) -> None:
        params = list(self.nets.parameters())
        if self.norm_on == "grad":
            nn.utils.clip_grad_norm_(params, self.max_norm)
        optimizer.step()
        if self.norm_on == "param":
            with torch.no_grad():
                for p in params:
                    p.mul_((self.max_norm / p.norm()).clamp(max=1.0))

    def _cache(self, batch: EditBatch) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(keys, value gradients) of each edited module at the target-predicting tokens, fp32."""
        seen: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        handles = [
            self.model.get_submodule(name).register_forward_hook(_recorder(seen, i))
            for i, name in enumerate(self.module_names)
        ]
        try:
            logits = self._logits(batch)
        finally:
            for handle in handles:
                handle.remove()
        loss = F.cross_entropy(
            logits[:, :-1].flatten(0, 1).float(),
            batch.labels[:, 1:].flatten(),
            ignore_index=IGNORE_INDEX,
            reduction="sum",
        )
        outputs = [seen[i][1] for i in range(len(self.module_names))]
        grads = torch.autograd.grad(loss, outputs)
        mask = answer_mask(batch.labels)
        return [(seen[i][0][mask].float(), g[mask].float()) for i, g in enumerate(grads)]

    def _shifts(self, cache: list[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
        """Each module's (key_size × value_size) shift, in fp32."""
        shifts = []
        for (keys, grads), (key, index) in zip(cache, self.slots, strict=True):
            net = self.nets[key]
            shifts.append(ridge_shift(keys, net(keys, grads, index), net.ridge(index)))
        return shifts

    def _logits(self, batch: EditBatch) -> torch.Tensor:
        return self.model(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False
        ).logits

    @torch.no_grad()
    def _add(self, shifts: list[torch.Tensor]) -> None:
        for weight, shift in zip(self.weights, shifts, strict=True):
            weight.add_(shift.T.to(weight.dtype))

    @torch.no_grad()
    def _restore(self, saved: list[torch.Tensor]) -> None:
        for weight, copy in zip(self.weights, saved, strict=True):
            weight.copy_(copy)


def meta_batch(
    updates: Sequence[APIUpdate], batch_size: int, rng: random.Random
) -> tuple[list[EditExample], list[EditExample], list[EditExample]]:
    """Edit, generalization and locality examples of one meta-step over `batch_size` random APIs:
    each API's examples but one random held-out example are edit rows, the held-out one its
    generalization row (an API with one example uses it for both), and one example of a random API
    outside the batch its locality row."""
    chosen = rng.sample(range(len(updates)), batch_size)
    others = [u for i, u in enumerate(updates) if i not in chosen]
    edit, gen, loc = [], [], []
    for i in chosen:
        examples = list(updates[i].examples)
        held = rng.randrange(len(examples))
        gen.append(examples[held])
        edit.extend(examples[:held] + examples[held + 1 :] or examples)
        loc.append(rng.choice(rng.choice(others).examples))
    return edit, gen, loc


def _recorder(seen: dict[int, tuple[torch.Tensor, torch.Tensor]], index: int):
    """A forward hook keeping a module's input (detached: a key) and output (for its gradient)."""

    def hook(module: nn.Module, args: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        seen[index] = (args[0].detach(), output)

    return hook


def answer_mask(labels: torch.Tensor) -> torch.Tensor:
    """True at the positions whose logits predict a target token (labels are not shifted)."""
    mask = torch.zeros_like(labels, dtype=torch.bool)
    mask[:, :-1] = labels[:, 1:] != IGNORE_INDEX
    return mask


def locality_kl(reference: torch.Tensor, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL(unedited ‖ edited) of the next-token distributions at `mask`, averaged over positions."""
    return F.kl_div(
        logits[mask].float().log_softmax(-1),
        reference[mask].float().log_softmax(-1),
        reduction="batchmean",
        log_target=True,
    )
