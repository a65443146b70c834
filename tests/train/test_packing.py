"""Packing: no attention across documents, labels masked at boundaries, EOS in the loss, full rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from core.formats import FORMATS
from train.config import DataConfig, DatasetSpec, LossOn, Overlong, TinyModelConfig
from train.edit_data import load_edit_splits
from train.modeling import tiny_llama_config
from train.packing import non_pad_fraction, pack, packing_efficiency
from train.tokenization import IGNORE_INDEX, encode_dataset


@pytest.fixture
def encoded(tiny_tokenizer):
    rows = load_edit_splits(DataConfig(datasets=[DatasetSpec(synthetic=12)], val_size=0)).train
    ds, _ = encode_dataset(rows, tiny_tokenizer, FORMATS["editcoder"], LossOn.completion, 512, Overlong.drop)
    return ds


def _model(tokenizer, attn: str):
    torch.manual_seed(0)
    config = tiny_llama_config(TinyModelConfig(max_position_embeddings=2048), tokenizer)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=torch.float32)
    model.config.use_cache = False
    return model.eval()


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_logits_equal_each_document_run_alone(encoded, tiny_tokenizer, attn):
    model = _model(tiny_tokenizer, attn)
    packed = pack(encoded, max_length=2048)
    assert len(packed) == 1 and len(packed[0]["seq_lengths"]) == len(encoded)
    batch = DataCollatorForLanguageModeling(pad_token_id=tiny_tokenizer.pad_token_id, padding_free=True)(
        [packed[0]]
    )
    assert "attention_mask" not in batch  # a mask would hide the document boundaries
    with torch.no_grad():
        packed_logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits[0]
        start = 0
        for n in packed[0]["seq_lengths"]:
            doc = batch["input_ids"][:, start : start + n]
            alone = model(input_ids=doc).logits[0]
            torch.testing.assert_close(packed_logits[start : start + n], alone, atol=2e-5, rtol=1e-4)
            start += n
        # Control: the same row without restarting positions lets documents see each other.
        leaky = model(input_ids=batch["input_ids"]).logits[0]
        first = packed[0]["seq_lengths"][0]
        assert not torch.allclose(leaky[first : first + 5], packed_logits[first : first + 5], atol=1e-3)


def test_labels_are_masked_at_every_document_start_and_eos_stays(encoded, tiny_tokenizer):
    packed = pack(encoded, max_length=1024)
    collate = DataCollatorForLanguageModeling(pad_token_id=tiny_tokenizer.pad_token_id, padding_free=True)
    batch = collate(list(packed))
    labels, positions, ids = batch["labels"][0], batch["position_ids"][0], batch["input_ids"][0]
    starts = (positions == 0).nonzero().flatten().tolist()
    assert len(starts) == len(encoded)
    assert all(labels[s] == IGNORE_INDEX for s in starts)
    ends = [s - 1 for s in starts[1:]] + [len(ids) - 1]
    eos = tiny_tokenizer.eos_token_id
    assert tiny_tokenizer.pad_token_id == eos  # the hard case: pad is EOS
    assert all(ids[e] == eos and labels[e] == eos for e in ends)


def test_eos_survives_padded_collation_when_pad_is_eos(encoded, tiny_tokenizer):
    collate = DataCollatorForLanguageModeling(pad_token_id=tiny_tokenizer.pad_token_id)
    batch = collate([encoded[i] for i in range(4)])
    eos = tiny_tokenizer.eos_token_id
    for row in range(4):
        n = int(batch["attention_mask"][row].sum())
        assert batch["labels"][row, n - 1] == eos  # the real EOS is a target
        assert (batch["labels"][row, n:] == IGNORE_INDEX).all()  # the pads (also EOS ids) are not


def test_non_pad_fraction_is_high_on_a_realistic_length_mix():
    rng = np.random.default_rng(0)
    # Commit edits: log-normal token lengths (median ~350, long tail), up to the 8192-token row.
    lengths = np.clip(rng.lognormal(mean=np.log(350), sigma=0.9, size=4000), 16, 8192).astype(int)
    ds = Dataset.from_dict({"input_ids": [[1] * n for n in lengths], "labels": [[1] * n for n in lengths]})
    packed = pack(ds, max_length=8192)
    assert sum(sum(s) for s in packed["seq_lengths"]) == lengths.sum()  # nothing lost
    assert packing_efficiency(packed, 8192) >= 0.98
    padded = [
        DataCollatorForLanguageModeling(pad_token_id=0)([{"input_ids": [1] * n} for n in lengths[i : i + 8]])
        for i in range(0, 800, 8)
    ]
    assert non_pad_fraction(padded) < 0.8  # what per-example padding wastes on the same mix
