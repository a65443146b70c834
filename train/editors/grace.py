"""GRACE (Hartvigsen et al. 2023, "Aging with GRACE"): a codebook of edits around one layer.

Weights stay as they are. A codebook entry is a key (the wrapped module's input at an edit
prompt's last token), a value (a learned vector that replaces the module's output) and a
deferral radius. A prompt whose key lies within an entry's radius gets that value from its
last token on, through every generated token; any other prompt passes through untouched,
bit for bit, which is GRACE's claim to locality.

Generation needs the KV cache on: the prompt's forward (more than one token) picks each
row's entry from its last token, and single-token decode steps reuse that choice row by row
(batches are left-padded, so the last column is every row's last prompt token). Without a
cache every step would re-read the whole sequence and query at the newest token instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from core.editing import APIUpdate, EditorOptions
from core.errors import ConfigError
from train.editors.common import encode_update, layer_module_name, model_device, target_nll, trainable_only


class GraceAdaptor(nn.Module):
    """The codebook around `inner`, a position-wise module (an MLP projection)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.values = nn.ParameterList()
        self.register_buffer("keys", None)  # (entries, d_in), float32
        self.register_buffer("radii", None)  # (entries,)
        self.owners: list[str] = []  # the API update each entry was made for
        self.active: torch.Tensor | None = None  # each row's entry from the last prompt forward, -1 for none
        self.queries: torch.Tensor | None = None  # each row's query in the last prompt forward
        self.query_outputs: torch.Tensor | None = None  # the module's output there: a new entry's start
        self.query_positions: torch.Tensor | None = None  # set while editing: each row's last prompt token

    def add(self, key: torch.Tensor, value: torch.Tensor, radius: float, owner: str) -> int:
        """A new entry (`value`: its start, the module's own output at the key's token); returns its index."""
        key = key.detach().float()[None]
        self.values.append(nn.Parameter(value.detach().float().clone(), requires_grad=False))
        radius_t = torch.tensor([radius], device=key.device)
        self.keys = key if self.keys is None else torch.cat([self.keys, key])
        self.radii = radius_t if self.radii is None else torch.cat([self.radii, radius_t])
        self.owners.append(owner)
        return len(self.owners) - 1

    def query(self, hidden: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        """Each row's codebook query: the module's input at its query token (A-GRACE overrides it)."""
        return hidden[torch.arange(len(start), device=hidden.device), start]

    def distances(self, queries: torch.Tensor) -> torch.Tensor:
        """Euclidean distances (rows, entries), in float32 (direct differences, not cdist's matmul form)."""
        return (queries.float()[:, None] - self.keys[None]).norm(dim=-1)

    @contextmanager
    def forcing(self, positions: torch.Tensor) -> Iterator[None]:
        """Query at `positions` instead of the last column (teacher forcing on prompt + target)."""
        self.query_positions = positions
        try:
            yield
        finally:
            self.query_positions = None

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """A forward of several tokens is a prompt's: it looks each row up by its last token (or
        `query_positions`) and replaces from there on. A one-token forward with as many rows as
        the last prompt forward is a decode step: those rows' entries replace its output."""
        out = self.inner(hidden)
        rows, length = hidden.shape[:2]
        decoding = length == 1 and self.active is not None and len(self.active) == rows
        if decoding:
            start = torch.zeros(rows, dtype=torch.long, device=hidden.device)
        else:
            start = self.query_positions
            if start is None:
                start = torch.full((rows,), length - 1, dtype=torch.long, device=hidden.device)
            self.queries = self.query(hidden, start).detach()
            self.query_outputs = out[torch.arange(rows, device=hidden.device), start].detach()
            self.active = None
            if self.owners:
                nearest_distance, nearest = self.distances(self.queries).min(dim=1)
                self.active = torch.where(nearest_distance <= self.radii[nearest], nearest, -1)
        if self.active is None or not bool((self.active >= 0).any()):
            return out
        positions = torch.arange(length, device=hidden.device)
        replace = (self.active >= 0)[:, None] & (positions[None] >= start[:, None])
        values = torch.stack(list(self.values))[self.active.clamp(min=0)].to(out.dtype)
        return torch.where(replace[..., None], values[:, None, :], out)


@dataclass
class GRACEOptions(EditorOptions):
    """The API-update study's settings (App. D: an adapter at layer 27, key radius 1, value vectors
    optimised for 30 iterations at learning rate 1), on EasyEdit's GRACE for 7B Llama models
    (hparams/GRACE/llama-7b.yaml: mlp.down_proj, euclidean distance, Adam; its n_iter is 100)."""

    layer: int = 27
    module: str = "mlp.down_proj"
    epsilon: float = 1.0  # a new entry's key radius
    n_iter: int = 30
    lr: float = 1.0

    def __post_init__(self) -> None:
        if self.epsilon <= 0 or self.n_iter < 1:
            raise ConfigError(
                f"GRACE needs epsilon > 0 and n_iter >= 1 (got epsilon={self.epsilon}, n_iter={self.n_iter})"
            )


class GRACEEditor:
    """GRACE around `module` of decoder layer `layer`: each edit example's prompt gets a codebook
    entry (or reuses/expands its own update's nearest one, or splits radii with another
    update's), then the values in play are trained on the targets, nothing else."""

    name = "grace"
    options: type[GRACEOptions] = GRACEOptions

    def __init__(self, model: nn.Module, tokenizer: Any, options: GRACEOptions | None = None) -> None:
        o = options or self.options()
        self.model = model
        self.tokenizer = tokenizer
        self.epsilon, self.n_iter, self.lr = o.epsilon, o.n_iter, o.lr
        self.target = layer_module_name(model, o.layer, o.module)
        self.original = model.get_submodule(self.target)
        self.adaptor: GraceAdaptor | None = None

    def edit(self, update: APIUpdate) -> dict[str, float]:
        if self.adaptor is None:
            self.adaptor = self._new_adaptor()
            self.model.set_submodule(self.target, self.adaptor)
        adaptor = self.adaptor
        batch = encode_update(self.tokenizer, update, model_device(self.model))
        before, splits = len(adaptor.owners), 0
        with adaptor.forcing(batch.prompt_lengths - 1):
            with torch.no_grad():
                target_nll(self.model, batch)  # records every example's query
            used = set()
            for key, value in zip(adaptor.queries, adaptor.query_outputs, strict=True):
                entry, split = self._place(adaptor, key, value, update.api_id)
                used.add(entry)
                splits += split
            values = [adaptor.values[i] for i in sorted(used)]
            optimizer = torch.optim.Adam(values, lr=self.lr)
            with trainable_only(self.model, values):
                for _ in range(self.n_iter):
                    target_nll(self.model, batch).backward()
                    optimizer.step()
                    optimizer.zero_grad()
            with torch.no_grad():
                loss = target_nll(self.model, batch).item()
        return {
            "loss": loss,
            "steps": self.n_iter,
            "entries": len(adaptor.owners),
            "new_entries": len(adaptor.owners) - before,
            "splits": splits,
        }

    def _new_adaptor(self) -> GraceAdaptor:
        """The codebook wrapper put around the module at the first edit (a seam for A-GRACE's keys)."""
        return GraceAdaptor(self.original)

    def _place(
        self, adaptor: GraceAdaptor, key: torch.Tensor, value: torch.Tensor, owner: str
    ) -> tuple[int, bool]:
        """GRACE's codebook update for one key: (the entry it trains, whether radii were split).

        A key farther than epsilon + r from its nearest entry opens a new entry of radius
        epsilon. Near an entry of the same update, that entry is reused and its radius grows to
        cover the key; near another update's entry, a new one is made and both radii become
        half their distance, so the two balls meet at most at the midpoint (where the nearer key,
        the older on a tie, answers) and neither answers for the other's prompts.
        """
        if adaptor.owners:
            distance, nearest = (t.item() for t in adaptor.distances(key[None])[0].min(dim=0))
            if distance <= self.epsilon + adaptor.radii[nearest].item():
                if adaptor.owners[nearest] == owner:
                    adaptor.radii[nearest] = max(adaptor.radii[nearest].item(), distance)
                    return nearest, False
                entry = adaptor.add(key, value, distance / 2, owner)
                adaptor.radii[nearest] = distance / 2
                return entry, True
        return adaptor.add(key, value, self.epsilon, owner), False

    def notice(self) -> str:
        return ""

    def reset(self) -> None:
        if self.adaptor is not None:
            self.model.set_submodule(self.target, self.original)
            self.adaptor = None
