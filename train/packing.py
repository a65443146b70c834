"""Packing statistics, on top of trl's best-fit-decreasing packer.

trl packs tokenized rows into `max_length` bins (`pack_dataset(..., strategy="bfd")`) and
records each bin's document lengths in `seq_lengths`; its padding-free collator turns those
into position ids that restart at every document and masks each document's first label.
transformers then builds a block-diagonal mask from the position ids (SDPA, eager) or
passes them to FlashAttention 2 as varlen boundaries, so documents never attend to each other.

>>> rows = Dataset.from_dict({"input_ids": [[1, 2, 3], [4, 5], [6]], "labels": [[1, 2, 3], [4, 5], [6]]})
>>> pack(rows, max_length=4)["seq_lengths"]
[[3, 1], [2]]
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from datasets import Dataset
from trl.data_utils import pack_dataset


def pack(ds: Dataset, max_length: int) -> Dataset:
    """Best-fit-decreasing packing of `input_ids`/`labels` rows into `max_length` bins."""
    return pack_dataset(ds.select_columns(["input_ids", "labels"]), max_length, strategy="bfd")


def packing_efficiency(packed: Dataset, max_length: int) -> float:
    """Real tokens over the token slots of the packed rows (1.0 = every row full)."""
    lengths = [sum(s) for s in packed["seq_lengths"]]
    return sum(lengths) / (len(lengths) * max_length)


def non_pad_fraction(batches: Iterable[dict[str, torch.Tensor]]) -> float:
    """Non-pad tokens over all positions the model computes, across collated batches."""
    real = total = 0
    for batch in batches:
        total += batch["input_ids"].numel()
        mask = batch.get("attention_mask")
        real += int(mask.sum()) if mask is not None else batch["input_ids"].numel()
    return real / max(total, 1)
