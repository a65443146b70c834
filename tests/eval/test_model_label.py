"""Reports name a model by its path unless model.name says otherwise."""

from __future__ import annotations

import pytest

from eval.config import EvalModelConfig


@pytest.mark.parametrize(
    ("name", "path", "label"),
    [
        ("model", "deepseek-ai/deepseek-coder-6.7b-instruct", "deepseek-coder-6.7b-instruct"),
        ("model", "/runs/editcoder-6.7b/", "editcoder-6.7b"),
        ("model", "/runs/editcoder-6.7b/checkpoint-500", "editcoder-6.7b/checkpoint-500"),
        ("model", "runs/tiny/final", "tiny"),
        ("mine", "/runs/editcoder-6.7b", "mine"),
        ("reference", None, "reference"),
        ("model", None, "model"),
    ],
)
def test_the_label_comes_from_the_path_by_default(name, path, label):
    assert EvalModelConfig(name=name, path=path).label() == label
