"""What the weight editors share: edit examples as tensors, the target NLL, where a layer's
module is, and freezing everything but the parameters an edit trains."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from core.editing import APIUpdate
from core.errors import ConfigError

IGNORE_INDEX = -100


@dataclass(frozen=True)
class EditBatch:
    """An update's examples, right-padded: `labels` are -100 on prompt and pad tokens."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    prompt_lengths: torch.Tensor  # tokens of each row's prompt; its last one is at prompt_lengths - 1


def encode_update(tokenizer: Any, update: APIUpdate, device: torch.device | str) -> EditBatch:
    """Tokenize prompt and target apart (as `train/tokenization.py`), so the prompt's tokens are
    those the model sees when it generates; EOS ends every target and is kept in the loss."""
    if not update.examples:
        raise ValueError(f"API update {update.api_id!r} has no edit examples to train on")
    rows = [prompt_and_target(tokenizer, example.prompt, example.target) for example in update.examples]
    input_ids, attention_mask, labels = pad_rows(tokenizer, rows)
    lengths = torch.tensor([len(prompt) for prompt, _ in rows])
    return EditBatch(input_ids.to(device), attention_mask.to(device), labels.to(device), lengths.to(device))


def prompt_and_target(tokenizer: Any, prompt: str, target: str | None) -> tuple[list[int], list[int]]:
    """The prompt's tokens (BOS first) and the target's with EOS appended (none for no target)."""
    ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    if target is None:
        return ids, []
    return ids, [*tokenizer(target, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]


def pad_rows(tokenizer: Any, rows: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, ...]:
    """(input_ids, attention_mask, labels), right-padded; labels are -100 on prompts and pads."""
    width = max(len(prompt) + len(target) for prompt, target in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (prompt, target) in enumerate(rows):
        n = len(prompt) + len(target)
        input_ids[i, :n] = torch.tensor(prompt + target)
        labels[i, len(prompt) : n] = torch.tensor(target, dtype=torch.long)
        attention_mask[i, :n] = 1
    return input_ids, attention_mask, labels


def target_nll(model: nn.Module, batch: EditBatch) -> torch.Tensor:
    """Mean negative log-likelihood of the target tokens (EOS included) under teacher forcing."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False).logits
    return F.cross_entropy(
        logits[:, :-1].flatten(0, 1).float(), batch.labels[:, 1:].flatten(), ignore_index=IGNORE_INDEX
    )


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def decoder_layers_name(model: nn.Module) -> tuple[str, int]:
    """The dotted name of the decoder layers' ModuleList and its length, found by the config's
    layer count (`model.layers` in a Llama, `transformer.h` in GPT-2) rather than per architecture."""
    count = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == count:
            return name, count
    raise ValueError(f"cannot find the decoder layers of {type(model).__name__} (a ModuleList of {count})")


def layer_module_name(model: nn.Module, layer: int, module: str) -> str:
    """The dotted name of `module` (e.g. `mlp.down_proj`) inside decoder layer `layer`; a layer or
    module the model lacks is a ConfigError (a ValueError) that says what it has."""
    layers, count = decoder_layers_name(model)
    if not 0 <= layer < count:
        raise ConfigError(
            f"editor.options.layer={layer} is out of range: the model has {count} decoder layers (0..{count - 1})"
        )
    name = f"{layers}.{layer}.{module}"
    try:
        model.get_submodule(name)
    except AttributeError as err:
        raise ConfigError(
            f"editor.options.module={module!r}: decoder layer {layer} has no such module ({err})"
        ) from err
    return name


@contextmanager
def trainable_only(model: nn.Module, params: Iterable[nn.Parameter]) -> Iterator[None]:
    """Gradients for `params` alone inside the block; every parameter's requires_grad is restored after."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    trained = list(params)
    try:
        for p, _ in flags:
            p.requires_grad_(False)
        for p in trained:
            p.requires_grad_(True)
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
