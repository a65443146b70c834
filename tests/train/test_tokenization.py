"""Encoding edit examples: completion-only labels, whole-text labels, EOS, overlong policies."""

from __future__ import annotations

from datasets import Dataset

from core.formats import FORMATS
from train.config import LossOn, Overlong
from train.tokenization import IGNORE_INDEX, encode_dataset, encode_example

FMT = FORMATS["editcoder"]
ROW = {
    "before": "def f(x):\n    return x\n",
    "after": "def f(x):\n    return x + 1\n",
    "instruction": "Add one.",
}


def test_completion_only_labels_cover_the_edit_and_eos(tiny_tokenizer):
    out = encode_example(ROW, tiny_tokenizer, FMT, LossOn.completion, 4096, Overlong.drop)
    prompt_ids = tiny_tokenizer(FMT.prompt(ROW["before"], ROW["instruction"]))["input_ids"]
    n = len(prompt_ids)
    assert out["input_ids"][:n] == prompt_ids  # the prompt is tokenized exactly as at inference
    assert out["labels"][:n] == [IGNORE_INDEX] * n
    assert out["labels"][n:] == out["input_ids"][n:]
    assert out["input_ids"][-1] == tiny_tokenizer.eos_token_id == out["labels"][-1]
    assert tiny_tokenizer.decode(out["input_ids"][n:-1]) == ROW["after"]


def test_loss_on_all_reproduces_whole_text_training(tiny_tokenizer):
    out = encode_example(ROW, tiny_tokenizer, FMT, LossOn.all, 4096, Overlong.drop)
    assert out["labels"] == out["input_ids"]


def test_overlong_rows_are_dropped_or_truncated_and_counted(tiny_tokenizer):
    long_row = dict(ROW, after=ROW["after"] * 60)
    ds = Dataset.from_list([ROW, long_row, dict(ROW, before=ROW["before"] * 80)])
    kept, report = encode_dataset(ds, tiny_tokenizer, FMT, LossOn.completion, 128, Overlong.drop)
    assert (report.input, report.kept, report.dropped) == (3, 1, {"overlong": 2})
    kept, report = encode_dataset(ds, tiny_tokenizer, FMT, LossOn.completion, 128, Overlong.truncate)
    assert (report.input, report.kept, report.truncated, report.dropped) == (3, 3, 2, {})
    assert max(len(ids) for ids in kept["input_ids"]) == 128
    # a long edit keeps its prompt and the edit's start; a long prompt keeps its end and half the room
    # for the edit, whose tokens are the targets
    long_edit, long_prompt = kept[1], kept[2]
    assert long_edit["labels"][0] == -100 and long_edit["labels"][-1] != -100
    assert sum(label != -100 for label in long_prompt["labels"]) == min(
        64, sum(label != -100 for label in kept[0]["labels"])
    )
    assert long_prompt["input_ids"][0] == tiny_tokenizer.bos_token_id or tiny_tokenizer.bos_token_id is None
    assert report.input == report.kept + sum(report.dropped.values())
