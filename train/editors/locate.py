"""What the locate-then-edit editors (ROME, MEMIT, PMET, AlphaEdit) share.

They all write a key-value pair into MLP down-projections: the **key** is the projection's
input at the subject's last token, averaged over short prefixes the model writes itself
(ROME's "context templates"), and the **value** is a vector, found by a few Adam steps, that
makes the model produce the target when it replaces a hidden state at that token.

For code edits the **subject** is the modified API's name (`subject_request`): its last
occurrence in the edit prompt, or, when the prompt does not name it (the usual case: the
benchmark drops problems whose prompt calls the API), the prompt is extended with the target's
text up to and including the API's first name there, and the target keeps the rest. So the
edited token is always the API's last name token, and what the model must produce after it
is what the edit changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from core.editing import APIUpdate, EditExample, EditorOptions
from core.errors import ConfigError
from train.editors.common import (
    IGNORE_INDEX,
    decoder_layers_name,
    layer_module_name,
    model_device,
    pad_rows,
    prompt_and_target,
    trainable_only,
)
from train.editors.moments import MomentOptions, SecondMoments

# First tokens of the prefixes the model writes for itself (ROME samples from "The",
# "Therefore", "Because", "I", "You"; code models get code openings instead).
PREFIX_STARTS = ("#", "import", "def", "for", "x =")
DEFAULT_PREFIXES = (
    (5, 10),
    (10, 10),
)  # (tokens, count) pairs: ROME's and MEMIT's context_template_length_params
KL_PROMPT = "{} is a"  # ROME's essence prompt: the subject's own next-token distribution is kept


@dataclass(frozen=True)
class EditRequest:
    """One edit example as the locate-then-edit editors see it: `prompt` names the subject,
    whose last character ends at `subject_end`; `target` follows the prompt."""

    prompt: str
    target: str
    subject: str
    subject_end: int


def _identifier_spans(text: str, name: str) -> list[tuple[int, int]]:
    """Where `name` occurs in `text` as a whole name (not inside a longer identifier)."""
    pattern = rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])"
    return [m.span() for m in re.finditer(pattern, text)]


def subject_request(example: EditExample, names: Sequence[str]) -> EditRequest:
    """The subject of a code edit: the modified API's name tokens in the edit prompt.

    The names are tried in order (the most specific, e.g. `math.square_root`, first): the last
    occurrence in the prompt wins; failing that, the first occurrence in the target, and the
    prompt is extended up to its end. An API named nowhere is a ValueError.
    """
    for name in names:
        spans = _identifier_spans(example.prompt, name)
        if spans:
            return EditRequest(example.prompt, example.target, name, spans[-1][1])
    for name in names:
        spans = _identifier_spans(example.target, name)
        if spans:
            end = spans[0][1]
            prompt = example.prompt + example.target[:end]
            return EditRequest(prompt, example.target[end:], name, len(prompt))
    raise ValueError(
        f"no name of the edited API ({', '.join(names)}) occurs in the edit prompt or its target; "
        "locate-then-edit editors need the API named at the token they edit"
    )


def requests_of(update: APIUpdate) -> list[EditRequest]:
    if not update.examples:
        raise ValueError(f"API update {update.api_id!r} has no edit examples")
    names = update.subject_names()
    return [subject_request(example, names) for example in update.examples]


def subject_index(tokenizer: Any, text: str, end: int) -> int:
    """The index (BOS included) of the token holding character `end - 1` of `text`."""
    if getattr(tokenizer, "is_fast", False):
        offsets = tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
        hits = [i for i, (start, stop) in enumerate(offsets) if start < end and stop > start]
        if hits:
            return hits[-1]
    return len(tokenizer(text[:end])["input_ids"]) - 1


# ----------------------------------------------------------------------------------- prefixes
def model_prefixes(
    model: nn.Module, tokenizer: Any, lengths: Sequence[Sequence[int]], seed: int = 0
) -> list[list[str]]:
    """Groups of prefixes: the empty one, then per (tokens, count) `count` texts of `tokens`
    new tokens sampled from the model (top-k 5, as ROME) after the code openings."""
    groups: list[list[str]] = [[""]]
    device = model_device(model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    # the sampling RNG (CPU, and the model's GPU) is seeded here and restored after
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        for tokens, count in lengths:
            texts: list[str] = []
            for i, start in enumerate(PREFIX_STARTS):
                n = len(range(i, count, len(PREFIX_STARTS)))  # the starts take turns
                if n == 0:
                    continue
                # one start at a time: equal lengths, so no padding (CodeLlama's tokenizer has no pad)
                inputs = tokenizer([start], return_tensors="pt").to(device)
                with torch.no_grad():
                    out = model.generate(
                        **inputs,
                        do_sample=True,
                        top_k=5,
                        max_new_tokens=tokens,
                        min_new_tokens=tokens,
                        num_return_sequences=n,
                        pad_token_id=pad,
                    )
                texts += tokenizer.batch_decode(out, skip_special_tokens=True)
            groups.append([text.replace("\r", " ") for text in texts])
    return groups


def with_prefix(prefix: str, request: EditRequest) -> tuple[str, int]:
    """The prompt after `prefix` (on a line of its own) and the subject's end in it."""
    if not prefix:
        return request.prompt, request.subject_end
    head = prefix.rstrip("\n") + "\n"
    return head + request.prompt, len(head) + request.subject_end


# ------------------------------------------------------------------------------------ batches
@dataclass(frozen=True)
class Rows:
    """Right-padded token rows, each with its subject's token index and (maybe) target labels."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    subject: torch.Tensor  # (rows,) token index of the subject's last token


def encode_rows(
    tokenizer: Any, texts: Sequence[tuple[str, int]], targets: Sequence[str | None], device: torch.device
) -> Rows:
    """Prompt and target tokenized apart (as generation sees the prompt); EOS ends a target."""
    rows = [
        prompt_and_target(tokenizer, text, target) for (text, _), target in zip(texts, targets, strict=True)
    ]
    input_ids, mask, labels = pad_rows(tokenizer, rows)
    subjects = torch.tensor([subject_index(tokenizer, text, end) for text, end in texts], device=device)
    return Rows(input_ids.to(device), mask.to(device), labels.to(device), subjects)


def _output_tensor(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


@contextmanager
def capture(modules: dict[str, nn.Module], inputs: bool = True) -> Iterator[dict[str, torch.Tensor]]:
    """Record each module's input (or output) of the next forward, by name."""
    seen: dict[str, torch.Tensor] = {}
    handles = []
    for name, module in modules.items():

        def hook(mod: nn.Module, args: tuple, out: Any, name: str = name) -> None:
            seen[name] = args[0] if inputs else _output_tensor(out)

        handles.append(module.register_forward_hook(hook))
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def add_at(module: nn.Module, rows: torch.Tensor, cols: torch.Tensor, delta: torch.Tensor) -> Iterator[None]:
    """Add `delta` to `module`'s output at (rows[i], cols[i]) for every i, in the next forwards."""

    def hook(mod: nn.Module, args: tuple, out: Any) -> Any:
        hidden = _output_tensor(out)
        change = torch.zeros_like(hidden)
        change[rows, cols] = delta.to(hidden.dtype)
        hidden = hidden + change
        return (hidden, *out[1:]) if isinstance(out, tuple) else hidden

    handle = module.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def forward(model: nn.Module, rows: Rows) -> torch.Tensor:
    return model(input_ids=rows.input_ids, attention_mask=rows.attention_mask, use_cache=False).logits


# --------------------------------------------------------------------------------------- keys
def subject_keys(
    model: nn.Module,
    tokenizer: Any,
    requests: Sequence[EditRequest],
    modules: dict[str, nn.Module],
    prefixes: Sequence[Sequence[str]],
) -> dict[str, torch.Tensor]:
    """Per module, (requests, d_in) float32 keys: its input at each request's subject token,
    averaged over each prefix group, then over the groups (MEMIT's compute_ks)."""
    device = model_device(model)
    out: dict[str, list[torch.Tensor]] = {name: [] for name in modules}
    for request in requests:
        texts = [with_prefix(prefix, request) for group in prefixes for prefix in group]
        rows = encode_rows(tokenizer, texts, [None] * len(texts), device)
        with torch.no_grad(), capture(modules) as seen:
            forward(model, rows)
        index = torch.arange(len(texts), device=device)
        for name in modules:
            at_subject = seen[name][index, rows.subject].float()
            groups, start = [], 0
            for group in prefixes:
                groups.append(at_subject[start : start + len(group)].mean(0))
                start += len(group)
            out[name].append(torch.stack(groups).mean(0))
    return {name: torch.stack(keys) for name, keys in out.items()}


def outputs_at_subject(
    model: nn.Module, tokenizer: Any, requests: Sequence[EditRequest], module: nn.Module
) -> torch.Tensor:
    """(requests, d) float32: `module`'s output at each request's subject token, prompt alone."""
    rows = encode_rows(
        tokenizer, [(r.prompt, r.subject_end) for r in requests], [None] * len(requests), model_device(model)
    )
    with torch.no_grad(), capture({"m": module}, inputs=False) as seen:
        forward(model, rows)
    return seen["m"][torch.arange(len(requests), device=rows.subject.device), rows.subject].float()


# ------------------------------------------------------------------------------------- values
@dataclass(frozen=True)
class ValueOptions:
    """ROME/MEMIT's value optimisation (compute_v / compute_z), EasyEdit's llama-7b settings."""

    steps: int = 25  # v_num_grad_steps
    lr: float = 0.5  # v_lr
    weight_decay: float = 1e-3  # v_weight_decay, on |delta| / |init|^2
    clamp_norm_factor: float = 4.0  # |delta| <= factor * |init|
    kl_factor: float = 0.0625


def optimise_values(
    model: nn.Module,
    tokenizer: Any,
    request: EditRequest,
    sites: Sequence[nn.Module],
    prefixes: Sequence[Sequence[str]],
    options: ValueOptions,
) -> list[torch.Tensor]:
    """Per site, the output at the subject token (of the prompt alone) plus the delta that makes
    the model give the target after every prefixed prompt: Adam on target NLL + KL on the
    subject's own prompt + weight decay, each delta projected into a ball of its init's norm
    times `clamp_norm_factor`. One site is ROME's and MEMIT's; PMET optimises two."""
    device = model_device(model)
    texts = [with_prefix(prefix, request) for group in prefixes for prefix in group]
    kl_text = KL_PROMPT.format(request.subject)
    rows = encode_rows(
        tokenizer, [*texts, (kl_text, len(request.subject))], [request.target] * len(texts) + [None], device
    )
    n = len(texts)
    index = torch.arange(n + 1, device=device)
    with torch.no_grad(), capture(dict(enumerate(sites)), inputs=False) as seen:
        logits = forward(model, rows)
    inits = [seen[i][0, rows.subject[0]].detach().float() for i in range(len(sites))]
    kl_init = F.log_softmax(logits[n, rows.subject[n]].float(), dim=-1)
    deltas = [torch.zeros_like(init, requires_grad=True) for init in inits]
    optimizer = torch.optim.Adam(deltas, lr=options.lr)
    labels = rows.labels[:n, 1:]
    with trainable_only(model, []):  # no parameter gradients, only the deltas'
        for step in range(options.steps):
            with _added(sites, index, rows.subject, deltas):
                logits = forward(model, rows)
            log_probs = F.log_softmax(logits[:n, :-1].float(), dim=-1)
            picked = log_probs.gather(-1, labels.clamp(min=0)[..., None])[..., 0]
            mask = (labels != IGNORE_INDEX).float()
            nll = -((picked * mask).sum(1) / mask.sum(1)).mean()
            kl = F.kl_div(
                kl_init,
                F.log_softmax(logits[n, rows.subject[n]].float(), -1),
                log_target=True,
                reduction="sum",
            )
            decay = sum(d.norm() / init.norm() ** 2 for d, init in zip(deltas, inits, strict=True))
            loss = nll + options.kl_factor * kl + options.weight_decay * decay
            if loss.item() < 5e-2 or step == options.steps - 1:
                break
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                for d, init in zip(deltas, inits, strict=True):
                    limit = options.clamp_norm_factor * init.norm()
                    if d.norm() > limit:
                        d.mul_(limit / d.norm())
    return [init + d.detach() for init, d in zip(inits, deltas, strict=True)]


@contextmanager
def _added(
    sites: Sequence[nn.Module], index: torch.Tensor, cols: torch.Tensor, deltas: Sequence[torch.Tensor]
) -> Iterator[None]:
    with ExitStack() as stack:
        for site, delta in zip(sites, deltas, strict=True):
            stack.enter_context(add_at(site, index, cols, delta.expand(len(index), -1)))
        yield


# ------------------------------------------------------------------------------------ options
@dataclass
class LocateOptions(EditorOptions):
    """What ROME and the MEMIT family share: the edited module, the value optimisation (EasyEdit's
    llama-7b settings), the model's own prefixes, the corpus of the second moments and a seed."""

    module: str = "mlp.down_proj"
    v_steps: int = 25
    v_lr: float = 0.5
    v_weight_decay: float = 1e-3
    clamp_norm_factor: float = 4.0
    kl_factor: float = 0.0625
    # (tokens, count): the model's own prefixes the keys are averaged over
    prefixes: list[list[int]] = field(default_factory=lambda: [list(p) for p in DEFAULT_PREFIXES])
    corpus: str = "stdlib"
    stats_samples: int = 100_000
    stats_chunk_tokens: int = 1024
    stats_dir: str | None = None  # None: $EDITFORGE_CACHE or ~/.cache/editforge, /second_moments
    seed: int = 0

    def __post_init__(self) -> None:
        if self.v_steps < 1:
            raise ConfigError(f"editor.options.v_steps={self.v_steps} must be at least 1")
        if self.stats_samples < 1 or self.stats_chunk_tokens < 2:
            raise ConfigError("editor.options.stats_samples >= 1 and stats_chunk_tokens >= 2 are needed")
        if any(len(p) != 2 or min(p) < 1 for p in self.prefixes):
            raise ConfigError(
                f"editor.options.prefixes={self.prefixes}: give [tokens, count] pairs of positive numbers"
            )

    def values(self) -> ValueOptions:
        return ValueOptions(
            self.v_steps, self.v_lr, self.v_weight_decay, self.clamp_norm_factor, self.kl_factor
        )

    def moments(self) -> MomentOptions:
        return MomentOptions(
            self.corpus, self.stats_samples, self.stats_chunk_tokens, stats_dir=self.stats_dir
        )


# -------------------------------------------------------------------------------- weight sets
class EditedWeights:
    """The down-projections of `layers`, with an exact copy of each as built (for `reset`)."""

    def __init__(self, model: nn.Module, layers: Sequence[int], module: str) -> None:
        if not layers:
            raise ConfigError("a locate-then-edit editor needs at least one layer")
        self.names = {layer: layer_module_name(model, layer, module) for layer in layers}
        self.modules = {layer: model.get_submodule(name) for layer, name in self.names.items()}
        self.original = {layer: m.weight.detach().clone() for layer, m in self.modules.items()}

    def weight(self, layer: int) -> torch.Tensor:
        return self.modules[layer].weight

    def add(self, layer: int, delta: torch.Tensor) -> None:
        """W += delta, computed in float32/64 and added in the weight's own dtype."""
        with torch.no_grad():
            weight = self.weight(layer)
            weight.copy_((weight.double() + delta.double()).to(weight.dtype))

    def reset(self) -> None:
        with torch.no_grad():
            for layer, module in self.modules.items():
                module.weight.copy_(self.original[layer])

    def max_abs_change(self) -> float:
        return max((m.weight - self.original[k]).abs().max().item() for k, m in self.modules.items())


class LocateThenEdit:
    """What ROME and the MEMIT family share: the edited down-projections (exact `reset`), the
    value options, and the prefixes and second moments, both taken once from the model as built
    (at the first edit, before any weight changes), as the reference implementations cache them."""

    name = ""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        layers: Sequence[int],
        options: LocateOptions,
        second_moments: bool = True,
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.layers = check_layers(layers, model)
        self.weights = EditedWeights(model, self.layers, options.module)
        self.values = options.values()
        self.prefix_lengths = [tuple(p) for p in options.prefixes]
        self.moments = SecondMoments(model, tokenizer, options.moments()) if second_moments else None
        self.seed = options.seed
        self.prefixes: list[list[str]] | None = None
        self.moment: dict[int, torch.Tensor] = {}  # layer -> E[kkᵀ]

    def setup(self) -> list[list[str]]:
        """The prefix groups, sampling them and reading E[kkᵀ] on the first call."""
        if self.prefixes is None:
            self.prefixes = model_prefixes(self.model, self.tokenizer, self.prefix_lengths, self.seed)
        if self.moments is not None and not self.moment:
            got = self.moments.get([self.weights.names[layer] for layer in self.layers])
            self.moment = {layer: got[self.weights.names[layer]] for layer in self.layers}
        return self.prefixes

    def notice(self) -> str:
        return ""

    def reset(self) -> None:
        self.weights.reset()


def layer_module(model: nn.Module, layer: int, module: str = "") -> nn.Module:
    """Decoder layer `layer` itself, or `module` inside it."""
    layers, _ = decoder_layers_name(model)
    return model.get_submodule(f"{layers}.{layer}" + (f".{module}" if module else ""))


def check_layers(layers: Sequence[int], model: nn.Module) -> list[int]:
    _, count = decoder_layers_name(model)
    bad = [layer for layer in layers if not 0 <= layer < count]
    if bad:
        raise ConfigError(
            f"editor.options.layers={list(layers)}: the model has {count} decoder layers (0..{count - 1})"
        )
    return list(layers)
