"""Prompt formats: the exact EditCoder layout, the other paper formats, code extraction."""

from __future__ import annotations

import pytest

from train.formats import FORMATS, first_fenced_block, get_format

BEFORE = "def f(x):\n    return x\n"
AFTER = "def f(x):\n    return x + 1\n"


def test_editcoder_format_is_the_papers():
    fmt = FORMATS["editcoder"]
    assert (
        fmt.prompt(BEFORE, "Add one.")
        == f"## Code Before:\n{BEFORE}\n## Instruction:\nAdd one.\n## Code After:\n"
    )
    assert fmt.completion(AFTER) == AFTER
    assert fmt.extract(AFTER + "\n## Code Before:\nmore") == AFTER


def test_starcoder_commit_format():
    fmt = FORMATS["starcoder"]
    assert fmt.prompt(BEFORE, "Add one.") == f"<commit_before>{BEFORE}<commit_msg>Add one.<commit_after>"
    assert fmt.extract(AFTER + "<commit_before>junk") == AFTER


def test_octocoder_round_trip():
    fmt = FORMATS["octocoder"]
    prompt = fmt.prompt(BEFORE, "Add one.")
    assert prompt.startswith("Question: Add one.\n") and prompt.endswith("Answer:\n```python\n")
    assert fmt.extract(fmt.completion(AFTER)).strip() == AFTER.strip()


def test_chat_format_uses_the_chat_template(tiny_tokenizer):
    fmt = FORMATS["chat"]
    with pytest.raises(ValueError, match="chat template"):
        fmt.prompt(BEFORE, "Add one.", tiny_tokenizer)
    tiny_tokenizer.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    prompt = fmt.prompt(BEFORE, "Add one.", tiny_tokenizer)
    assert prompt.startswith("<system>You are PythonEditGPT") and prompt.endswith("<assistant>")
    assert f"```python\n{BEFORE}\n```" in prompt
    assert fmt.extract("Sure!\n" + fmt.completion(AFTER) + "\nDone.").strip() == AFTER.strip()


def test_an_untagged_fence_keeps_its_first_line():
    assert first_fenced_block("```\nimport os\nx = 1\n```") == "import os\nx = 1\n"
    assert first_fenced_block("```py\nimport os\n```") == "import os\n"
    assert first_fenced_block("no code here") is None


def test_unknown_format_names_the_choices():
    with pytest.raises(ValueError, match="editcoder"):
        get_format("alpaca")
