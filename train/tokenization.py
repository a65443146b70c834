"""Turn edit examples into `input_ids` and `labels` for SFT.

The prompt and the completion are tokenized separately and concatenated, so the prompt's
tokens are exactly those the model sees at inference (where it is tokenized alone). EOS is
appended to every completion and kept in the loss: labels are built here, never from
`input_ids == pad_token_id`, so a tokenizer whose pad is its EOS still learns to stop.

>>> # loss_on="completion": prompt labels are -100, completion and EOS are targets
>>> # input_ids = [*prompt_ids, *completion_ids, eos]
>>> # labels    = [-100] * len(prompt_ids) + [*completion_ids, eos]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from datasets import Dataset

from core.formats import PromptFormat
from train.config import LossOn, Overlong

IGNORE_INDEX = -100


@dataclass
class EncodeReport:
    """How many rows each policy kept or dropped; `input == kept + sum(dropped)`."""

    input: int
    kept: int
    truncated: int
    dropped: dict[str, int]
    tokens: int
    target_tokens: int
    squared_tokens: int = 0  # the sum of each kept row's length squared: attention's cost (train/mfu.py)

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def encode_example(
    example: dict,
    tokenizer: Any,
    fmt: PromptFormat,
    loss_on: LossOn,
    max_length: int,
    overlong: Overlong,
) -> dict:
    """One example to `input_ids`/`labels`, or `drop_reason` set when a policy rejects it."""
    prompt = fmt.prompt(example["before"], example["instruction"], tokenizer)
    prompt_ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    completion_ids = tokenizer(fmt.completion(example["after"]), add_special_tokens=False)["input_ids"]
    completion_ids = [*completion_ids, tokenizer.eos_token_id]
    input_ids = prompt_ids + completion_ids
    if loss_on == LossOn.completion:
        labels = [IGNORE_INDEX] * len(prompt_ids) + completion_ids
    else:
        labels = list(input_ids)
    reason, truncated = "", False
    if len(input_ids) > max_length:
        if overlong == Overlong.drop:
            reason = "overlong"
        elif len(prompt_ids) + min(len(completion_ids), max_length // 2) <= max_length:
            input_ids, labels, truncated = input_ids[:max_length], labels[:max_length], True  # the edit's end
        else:  # the prompt would leave the edit too little room: keep the prompt's end (trl's keep_end)
            keep = min(len(completion_ids), max_length // 2)
            head = prompt_ids[:1] if prompt_ids[:1] == [tokenizer.bos_token_id] else []
            prompt_ids = head + prompt_ids[len(prompt_ids) - (max_length - keep - len(head)) :]
            input_ids = prompt_ids + completion_ids[:keep]
            if loss_on == LossOn.completion:
                labels = [IGNORE_INDEX] * len(prompt_ids) + completion_ids[:keep]
            else:
                labels = list(input_ids)
            truncated = True
    return {"input_ids": input_ids, "labels": labels, "drop_reason": reason, "truncated": truncated}


def encode_dataset(
    ds: Dataset,
    tokenizer: Any,
    fmt: PromptFormat,
    loss_on: LossOn,
    max_length: int,
    overlong: Overlong,
    num_proc: int | None = None,
) -> tuple[Dataset, EncodeReport]:
    """Tokenize a split; rows rejected by the overlong policy are dropped and counted."""
    encoded = ds.map(
        encode_example,
        fn_kwargs={
            "tokenizer": tokenizer,
            "fmt": fmt,
            "loss_on": loss_on,
            "max_length": max_length,
            "overlong": overlong,
        },
        remove_columns=ds.column_names,
        num_proc=num_proc,
        desc="Tokenizing edit examples",
    )
    reasons = Counter(r for r in encoded["drop_reason"] if r)
    truncated = sum(t for t, r in zip(encoded["truncated"], encoded["drop_reason"], strict=False) if not r)
    kept = encoded.filter(lambda r: not r, input_columns="drop_reason", num_proc=num_proc)
    kept = kept.remove_columns(["drop_reason", "truncated"])
    lengths = [len(ids) for ids in kept["input_ids"]]
    targets = sum(sum(1 for label in labels if label != IGNORE_INDEX) for labels in kept["labels"])
    report = EncodeReport(
        input=len(ds),
        kept=len(kept),
        truncated=truncated,
        dropped=dict(reasons),
        tokens=sum(lengths),
        target_tokens=targets,
        squared_tokens=sum(n * n for n in lengths),
    )
    return kept, report
