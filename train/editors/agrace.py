"""A-GRACE (Li et al. 2025, "Model editing for LLMs4Code: how far are we?"): GRACE with learned keys.

GRACE keys a codebook entry on the wrapped module's input at the prompt's last token. A-GRACE
keys it on `encoder(mean)`: `mean` is the wrapped module's input (for `mlp.down_proj` the gated
activation act(gate(x)) * up(x), one vector of the intermediate size per token) averaged, in
float32, over the prompt's tokens: every token the attention mask attends (the tokenizer's BOS
included, left padding left out) up to and including the last prompt token. `encoder` is a
two-layer MLP (Linear d -> d/4, LeakyReLU(0.5), Dropout while fitting only, Linear d/4 -> 256)
trained so that prompts of one API land close together and prompts of different APIs far apart.
Radii and the conflict rule are GRACE's, on Euclidean distances in the encoder's 256-d space;
the values, their training and generation (a value replaces the module's output from the last
prompt token through every generated token, KV-cache decode steps reusing the prompt forward's
choice) are GRACE's too (train/editors/grace.py). The adaptor learns the attention mask through
a forward pre-hook on the model, registered at the first edit and removed by `reset`.

`fit(updates, out)` learns the encoder from a benchmark's edit split, each update's examples one
modified API's reliability prompts. The paper pulls an edit prompt towards its paraphrases and
pushes it from specificity prompts; here the specificity prompts are test data, never trained
on, so positives are every two prompts of one update and negatives, one per positive, pair its
first prompt with a random prompt of another update, drawn afresh every epoch (seeded) so the
positives meet many other APIs. Loss: the mean over a batch of y d^2 + (1 - y) relu(margin - d)^2
(y = 1 for positives). Held out for early stopping: whole APIs, a seeded `val_fraction` (at
least one) of the updates with two or more prompts; the validation pairs are every positive of a
held-out API and one negative each against any other update, drawn once, so training never sees
them. Training stops after `patience` epochs without a lower validation loss and keeps the best
epoch's encoder. `out` gets `encoder.pt` (the state_dict) and `encoder.json` (the encoder's
shape, the wrapped module, the fit settings, the held-out APIs and the fit's figures).

Defaults are the API-update study's (App. D: GRACE's layer 27, radius 1, 30 value iterations at
lr 1; encoder output 256, margin 0.5, up to 100 epochs, batch 64, lr 1e-4, weight decay 1e-4,
patience 10), checked against the A-GRACE authors' code (xpq-tech/code-llmedit:
train_agrace_encoder.py, codellmeditor/models/agrace/). Where the two differ the paper is followed:
the script trains with margin 1 (the radius) and patience 5, and validates on its test split's
paraphrases and neighbourhood prompts by accuracy at distance 1, where here the held-out APIs'
contrastive loss decides (the paper names no metric, and with margin 0.5 inside radius 1 the
loss, not the accuracy at the radius, is what training optimises). Note that margin 0.5 pushes
other APIs' prompts only 0.5 away, inside a radius-1 ball: `margin` above `epsilon` keeps them out.
Taken from the code where the paper is silent: the hidden width d/4, the LeakyReLU slope and Adam
with L2 weight decay. The script's Dropout(0.5) is an option, off by default: each side of a pair
gets its own mask, so positives cannot meet, and on the tests' edit split the keys never reached
the margin once dropout was off for editing. The reference's adaptor finds left padding by
comparing neighbouring hidden states, starts values at random and replaces only the last prompt
token's output (no decode step); here the attention mask, the module's own output and GRACE's
replacement from the last prompt token on.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.hooks import RemovableHandle

from core.editing import APIUpdate
from core.errors import ConfigError
from core.progress import tqdm
from train.editors.common import model_device
from train.editors.grace import GraceAdaptor, GRACEEditor, GRACEOptions

ENCODER_WEIGHTS = "encoder.pt"
ENCODER_META = "encoder.json"


@dataclass(frozen=True)
class EncoderConfig:
    """The key encoder's shape, saved beside its weights so `load` can rebuild it."""

    in_dim: int
    hidden_dim: int
    out_dim: int
    dropout: float
    negative_slope: float = 0.5


class KeyEncoder(nn.Module):
    """Two-layer MLP from a prompt's mean representation to its codebook key."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.fc1 = nn.Linear(config.in_dim, config.hidden_dim)
        self.dropout = nn.Dropout(config.dropout)
        self.fc2 = nn.Linear(config.hidden_dim, config.out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(F.leaky_relu(self.fc1(x), self.config.negative_slope)))


@dataclass
class AGRACEOptions(GRACEOptions):
    """GRACE's options plus how `fit` trains the encoder: App. D's values (output 256, margin 0.5,
    up to 100 epochs, batch 64, lr 1e-4, weight decay 1e-4, patience 10), dropout off (see the
    module docstring); `checkpoint`: a folder `fit` wrote (None: fit first)."""

    out_dim: int = 256
    dropout: float = 0.0
    margin: float = 0.5
    epochs: int = 100
    batch_size: int = 64
    encoder_lr: float = 1e-4
    weight_decay: float = 1e-4
    patience: int = 10
    val_fraction: float = 0.1  # APIs held out for early stopping
    seed: int = 0
    checkpoint: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("out_dim", "epochs", "batch_size", "patience"):
            if getattr(self, name) < 1:
                raise ConfigError(f"editor.options.{name}={getattr(self, name)} must be at least 1")
        if not 0 < self.val_fraction < 1:
            raise ConfigError(
                f"editor.options.val_fraction={self.val_fraction} must lie strictly between 0 and 1"
            )
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"editor.options.dropout={self.dropout} must lie in [0, 1)")
        if self.margin <= 0:
            raise ConfigError(f"editor.options.margin={self.margin} must be positive")


def prompt_means(
    hidden: torch.Tensor, start: torch.Tensor, attention_mask: torch.Tensor | None
) -> torch.Tensor:
    """Each row's mean of `hidden` (rows, tokens, d) over its attended tokens at or before `start`, float32.

    `attention_mask` is the model's (rows, cached + tokens), or None when every token is attended.
    """
    rows, length = hidden.shape[:2]
    take = torch.arange(length, device=hidden.device)[None] <= start[:, None]
    if attention_mask is not None:
        if attention_mask.dim() != 2 or len(attention_mask) != rows:
            raise ValueError(
                f"A-GRACE reads the model's 2-D attention mask (rows, tokens); got {tuple(attention_mask.shape)}"
            )
        take = take & attention_mask[:, -length:].to(hidden.device).bool()
    weights = take.float()
    return torch.bmm(weights[:, None], hidden.float())[:, 0] / weights.sum(dim=1, keepdim=True)


class MeanKeyAdaptor(GraceAdaptor):
    """GRACE's codebook queried by the encoder of the prompt's mean module input."""

    def __init__(self, inner: nn.Module, encoder: KeyEncoder) -> None:
        super().__init__(inner)
        self.encoder = encoder
        self.attention_mask: torch.Tensor | None = None  # the current model forward's

    def see_inputs(self, module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:
        """Forward pre-hook on the whole model: its attention mask tells prompt tokens from padding."""
        self.attention_mask = kwargs.get("attention_mask")

    def query(self, hidden: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        return self.encoder(prompt_means(hidden, start, self.attention_mask))

    def train(self, mode: bool = True) -> MeanKeyAdaptor:
        super().train(mode)
        self.encoder.eval()  # dropout is for fitting: a prompt's key must not be random
        return self


@dataclass(frozen=True)
class PairSplit:
    """The contrastive pairs, as rows (first prompt, second prompt, label: 1 same API, 0 different).

    Training's negatives are drawn afresh every epoch, so its positives meet many other APIs;
    validation's are drawn once, so its loss compares across epochs.
    """

    api_of: torch.Tensor  # each prompt's API, numbered
    train_positives: torch.Tensor  # (pairs, 2)
    train_pool: torch.Tensor  # the prompts of the APIs not held out, where training draws negatives
    val: torch.Tensor  # (pairs, 3)
    held_out: tuple[str, ...]

    def train_pairs(self) -> torch.Tensor:
        """Every training positive and one fresh negative each (from the global RNG: `fit` seeds it)."""
        return with_negatives(self.train_positives, self.train_pool, self.api_of, None)


def contrastive_pairs(owners: Sequence[str], val_fraction: float, seed: int) -> PairSplit:
    """The pairs of the prompts whose APIs are `owners` (one per prompt), whole APIs held out for validation."""
    members: dict[str, list[int]] = defaultdict(list)
    for i, owner in enumerate(owners):
        members[owner].append(i)
    paired = sorted(api for api, prompts in members.items() if len(prompts) >= 2)
    if len(paired) < 2 or len(members) < 3:
        raise ValueError(
            "A-GRACE's encoder needs at least three modified APIs, two of them with two or more edit "
            f"examples (one is held out for early stopping); got {len(members)} APIs, {len(paired)} with two or more"
        )
    random.Random(seed).shuffle(paired)
    held_out = paired[: min(max(1, round(val_fraction * len(paired))), len(paired) - 1)]
    number = {api: n for n, api in enumerate(members)}
    api_of = torch.tensor([number[owner] for owner in owners])
    train_pool = torch.tensor([i for i, owner in enumerate(owners) if owner not in held_out])
    val_positives = _positives(held_out, members)
    val = with_negatives(
        val_positives, torch.arange(len(owners)), api_of, torch.Generator().manual_seed(seed)
    )
    train_positives = _positives([api for api in members if api not in held_out], members)
    return PairSplit(api_of, train_positives, train_pool, val, tuple(held_out))


def _positives(apis: Sequence[str], members: dict[str, list[int]]) -> torch.Tensor:
    pairs = [pair for api in apis for pair in combinations(members[api], 2)]
    return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)


def with_negatives(
    positives: torch.Tensor, pool: torch.Tensor, api_of: torch.Tensor, generator: torch.Generator | None
) -> torch.Tensor:
    """`positives` labelled 1, then per positive its first prompt with a random prompt of `pool` of another API."""
    anchors = positives[:, 0]
    partners = pool[torch.randint(len(pool), (len(anchors),), generator=generator)]
    while (clash := api_of[partners] == api_of[anchors]).any():
        partners[clash] = pool[torch.randint(len(pool), (int(clash.sum()),), generator=generator)]
    labels = torch.ones(len(positives), dtype=torch.long)
    return torch.cat(
        [torch.column_stack([positives, labels]), torch.column_stack([anchors, partners, labels * 0])]
    )


def contrastive_loss(
    first: torch.Tensor, second: torch.Tensor, label: torch.Tensor, margin: float
) -> torch.Tensor:
    """Mean of y d^2 + (1 - y) relu(margin - d)^2 (d: Euclidean distance, y = 1 for a positive pair)."""
    squared = (first - second).pow(2).sum(dim=-1)
    distance = squared.clamp_min(1e-12).sqrt()  # no infinite gradient at d = 0
    return (label * squared + (1 - label) * F.relu(margin - distance).pow(2)).mean()


def train_encoder(
    reps: torch.Tensor, split: PairSplit, settings: AGRACEOptions
) -> tuple[KeyEncoder, dict[str, float]]:
    """The encoder of the best validation epoch, trained on the pairs of `reps` (prompts, d); seeded."""
    config = EncoderConfig(reps.shape[1], max(1, reps.shape[1] // 4), settings.out_dim, settings.dropout)
    with torch.random.fork_rng(devices=[reps.device] if reps.device.type == "cuda" else []):
        torch.manual_seed(settings.seed)
        encoder = KeyEncoder(config).to(reps.device)
        optimizer = torch.optim.Adam(
            encoder.parameters(), lr=settings.encoder_lr, weight_decay=settings.weight_decay
        )
        best, best_loss, best_epoch = encoder.state_dict(), math.inf, 0
        progress = tqdm(range(1, settings.epochs + 1), desc="A-GRACE encoder", leave=False)
        for epoch in progress:
            train_loss = _train_epoch(encoder, optimizer, reps, split.train_pairs(), settings)
            val_loss = _pair_loss(encoder, reps, split.val, settings.margin)
            progress.set_postfix(train=f"{train_loss:.4f}", val=f"{val_loss:.4f}")
            if val_loss < best_loss:
                best_loss, best_epoch = val_loss, epoch
                best = {name: t.detach().clone() for name, t in encoder.state_dict().items()}
            elif epoch - best_epoch >= settings.patience:
                break
        train_pairs = split.train_pairs()
    encoder.load_state_dict(best)
    encoder.eval().requires_grad_(False)
    figures = {"epochs": epoch, "best_epoch": best_epoch, "val_loss": best_loss}
    for part, pairs in (("train", train_pairs), ("val", split.val)):
        positive, negative = mean_distances(encoder, reps, pairs)
        figures[f"{part}_pairs"] = len(pairs)
        figures[f"{part}_positive_distance"] = positive
        figures[f"{part}_negative_distance"] = negative
    return encoder, figures


def _train_epoch(
    encoder: KeyEncoder,
    optimizer: torch.optim.Optimizer,
    reps: torch.Tensor,
    pairs: torch.Tensor,
    settings: AGRACEOptions,
) -> float:
    """One pass over the shuffled pairs; the pairs' mean loss."""
    encoder.train()
    total = 0.0
    for batch in pairs[torch.randperm(len(pairs))].split(settings.batch_size):
        label = batch[:, 2].to(reps.device).float()
        loss = contrastive_loss(
            encoder(reps[batch[:, 0]]), encoder(reps[batch[:, 1]]), label, settings.margin
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(batch)
    return total / len(pairs)


@torch.no_grad()
def _pair_loss(encoder: KeyEncoder, reps: torch.Tensor, pairs: torch.Tensor, margin: float) -> float:
    encoder.eval()
    label = pairs[:, 2].to(reps.device).float()
    return contrastive_loss(encoder(reps[pairs[:, 0]]), encoder(reps[pairs[:, 1]]), label, margin).item()


@torch.no_grad()
def mean_distances(encoder: KeyEncoder, reps: torch.Tensor, pairs: torch.Tensor) -> tuple[float, float]:
    """Mean key distance of the positive pairs and of the negative pairs."""
    encoder.eval()
    distance = (encoder(reps[pairs[:, 0]]) - encoder(reps[pairs[:, 1]])).norm(dim=-1)
    positive = pairs[:, 2].to(reps.device).bool()
    return distance[positive].mean().item(), distance[~positive].mean().item()


class AGRACEEditor(GRACEEditor):
    """A-GRACE around `module` of decoder layer `layer`: GRACE (see GRACEEditor) whose keys come from
    an encoder that `fit` trains once per model and benchmark and `load` (or `checkpoint`) reads back."""

    name = "a-grace"
    options: type[AGRACEOptions] = AGRACEOptions

    def __init__(self, model: nn.Module, tokenizer: Any, options: AGRACEOptions | None = None) -> None:
        settings = options or AGRACEOptions()
        super().__init__(model, tokenizer, settings)
        self.settings = settings
        self.encoder: KeyEncoder | None = None
        self.hook: RemovableHandle | None = None
        if settings.checkpoint is not None:
            self.load(Path(settings.checkpoint))

    @property
    def fitted(self) -> bool:
        return self.encoder is not None

    def fit(self, updates: Sequence[APIUpdate], out: Path) -> dict[str, float]:
        """Train the encoder on the updates' prompts, keep it, and write it to the folder `out`."""
        self._require_empty_codebook("fit")
        examples = [(update.api_id, example.prompt) for update in updates for example in update.examples]
        split = contrastive_pairs(
            [api for api, _ in examples], self.settings.val_fraction, self.settings.seed
        )
        reps = self._prompt_means([prompt for _, prompt in examples])
        encoder, figures = train_encoder(reps, split, self.settings)
        self._save(encoder, Path(out), split.held_out, figures)
        self.encoder = encoder
        return figures

    def _save(
        self, encoder: KeyEncoder, out: Path, held_out: Sequence[str], figures: dict[str, float]
    ) -> None:
        out.mkdir(parents=True, exist_ok=True)
        torch.save(encoder.state_dict(), out / ENCODER_WEIGHTS)
        meta = {
            "module": self.target,
            "encoder": asdict(encoder.config),
            "settings": asdict(self.settings),
            "held_out": list(held_out),
            "figures": figures,
        }
        (out / ENCODER_META).write_text(json.dumps(meta, indent=2) + "\n")

    def load(self, path: Path) -> None:
        """Use the encoder a `fit` wrote to the folder `path`."""
        self._require_empty_codebook("load")
        path = Path(path)
        meta = json.loads((path / ENCODER_META).read_text())
        config = EncoderConfig(**meta["encoder"])
        width = getattr(self.original, "in_features", config.in_dim)
        if meta["module"] != self.target or width != config.in_dim:
            raise ValueError(
                f"{path} holds an encoder of {meta['module']} ({config.in_dim} inputs), not of {self.target} "
                f"({width} inputs): fit one for this model and the editor options layer/module"
            )
        encoder = KeyEncoder(config)
        encoder.load_state_dict(torch.load(path / ENCODER_WEIGHTS, map_location="cpu", weights_only=True))
        self.encoder = encoder.to(next(self.original.parameters()).device).eval().requires_grad_(False)

    def keys(self, prompts: Sequence[str]) -> torch.Tensor:
        """Each prompt's key, the prompt alone in its forward: what an edit of it stores, up to rounding."""
        encoder = self._fitted_encoder()
        with torch.no_grad():
            return encoder(self._prompt_means(prompts))

    def edit(self, update: APIUpdate) -> dict[str, float]:
        self._fitted_encoder()
        return super().edit(update)

    def reset(self) -> None:
        super().reset()
        if self.hook is not None:
            self.hook.remove()
            self.hook = None

    def _new_adaptor(self) -> GraceAdaptor:
        adaptor = MeanKeyAdaptor(self.original, self._fitted_encoder())
        self.hook = self.model.register_forward_pre_hook(adaptor.see_inputs, with_kwargs=True)
        return adaptor

    def _fitted_encoder(self) -> KeyEncoder:
        if self.encoder is None:
            raise ValueError(
                "A-GRACE's key encoder is not trained: call fit(updates, out) on the edit split first, "
                "or build the editor with checkpoint=<a folder that fit wrote>"
            )
        return self.encoder

    def _require_empty_codebook(self, action: str) -> None:
        if self.adaptor is not None:
            raise ValueError(
                f"A-GRACE cannot {action} an encoder while the codebook holds edits keyed by the current one: "
                "call reset() first"
            )

    def _prompt_means(self, prompts: Sequence[str]) -> torch.Tensor:
        """Each prompt's mean module input (prompts, d), each prompt alone in its forward (no padding)."""
        seen: list[torch.Tensor] = []
        hook = self.original.register_forward_hook(lambda module, args, out: seen.append(args[0]))
        means = []
        try:
            with torch.no_grad():
                for prompt in tqdm(prompts, desc="A-GRACE prompt representations", leave=False):
                    inputs = self.tokenizer(prompt, return_tensors="pt")
                    self.model(input_ids=inputs["input_ids"].to(model_device(self.model)), use_cache=False)
                    hidden = seen.pop()
                    last = torch.tensor([hidden.shape[1] - 1], device=hidden.device)
                    means.append(prompt_means(hidden, last, None)[0])
        finally:
            hook.remove()
        return torch.stack(means)
