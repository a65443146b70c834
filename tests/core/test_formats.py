"""Prompt formats: the exact EditCoder layout, the other paper formats, code extraction."""

from __future__ import annotations

import pytest

from core.formats import FORMATS, first_fenced_block, get_format

BEFORE = "def f(x):\n    return x\n"
AFTER = "def f(x):\n    return x + 1\n"


def _upstream_edit_prompt(old: str, instr: str, new: str) -> str:
    """nuprl/CanItEdit's `edit_prompt` (editpackft/format.py) and `direct_edit_prompt`
    (benchmark/generate_completions.py), written out from their f-strings."""
    return "## Code Before:\n" + old + "\n" + "## Instruction:\n" + instr + "\n" + "## Code After:\n" + new


# benchmark/generate_completions.py, DirectEditModel's stop_tokens (the paper-era code, 1a87cb4)
UPSTREAM_DIRECT_STOP = ["## Code After:", "## Instruction:", "## Code Before:"]


def test_editcoder_format_is_the_papers():
    fmt = FORMATS["editcoder"]
    instruction = "Add one."
    assert fmt.prompt(BEFORE, instruction) == _upstream_edit_prompt(BEFORE, instruction, "")
    # a training example is the prompt followed by the completion, as the training data was
    assert fmt.prompt(BEFORE, instruction) + fmt.completion(AFTER) == _upstream_edit_prompt(
        BEFORE, instruction, AFTER
    )
    assert sorted(fmt.stop) == sorted(UPSTREAM_DIRECT_STOP)
    # each stop string cuts a completion where upstream's vLLM stop would, even without a newline
    for stop in UPSTREAM_DIRECT_STOP:
        assert fmt.extract(AFTER + stop + "\nmore") == AFTER
    assert fmt.extract("x = 1  ## Code After: y") == "x = 1  "


def test_starcoder_commit_format():
    fmt = FORMATS["starcoder"]
    assert fmt.prompt(BEFORE, "Add one.") == f"<commit_before>{BEFORE}<commit_msg>Add one.<commit_after>"
    assert fmt.extract(AFTER + "<commit_before>junk") == AFTER


def test_octocoder_round_trip():
    fmt = FORMATS["octocoder"]
    prompt = fmt.prompt(BEFORE, "Add one.")
    assert prompt.startswith("Question: Add one.\n") and prompt.endswith("Answer:\n```python\n")
    assert fmt.extract(fmt.completion(AFTER)).strip() == AFTER.strip()


UPSTREAM_SYSTEM = (
    "You are PythonEditGPT. You will be provided the original code snippet and an instruction that "
    "specifies the changes you need to make. You will produce the changed code, based on the original "
    "code and the instruction given. Only produce the code, do not include any additional prose."
)


def _upstream_chat_1shot(old: str, instr: str) -> list[dict[str, str]]:
    """nuprl/CanItEdit benchmark/generate_completions.py `openai_edit_prompt_1shot` (the paper's
    Fig. 6b), re-typed from its triple-quoted strings, each of which upstream `.strip()`s."""
    shot_user = """
## Code Before
```py
def add(a, b):
    return a + b
```

## Instruction
Add a "sub" function that subtracts two numbers. Also write docstrings for both functions and change a,b to x,y.
"""
    shot_assistant = """
## Code After
```py
def add(x, y):
    \"\"\"Adds two numbers.\"\"\"
    return x + y

def sub(x, y):
    \"\"\"Subtracts two numbers.\"\"\"
    return x - y
```
         """
    user = f"""
## Code Before
```py
{old}
```
## Instruction
{instr}
"""
    return [
        {"role": "system", "content": UPSTREAM_SYSTEM},
        {"role": "user", "content": shot_user.strip()},
        {"role": "assistant", "content": shot_assistant.strip()},
        {"role": "user", "content": user.strip()},
    ]


def _upstream_codeblock_extract(new: str) -> str:
    """Upstream's `python_markdown_codeblock_extract`, the chat models' post-processing."""
    buf, inside = "", False
    for line in new.split("\n"):
        if line.startswith("```"):
            if inside:
                break
            inside = True
        elif inside:
            buf += line + "\n"
    return buf


def test_chat_format_is_upstreams_one_shot_prompt():
    fmt = FORMATS["chat"]
    assert fmt.messages(BEFORE, "Add one.\n") == _upstream_chat_1shot(BEFORE, "Add one.\n")
    assert fmt.messages("", "x") == _upstream_chat_1shot("", "x")
    assert fmt.stop == ()


@pytest.mark.parametrize(
    "answer",
    [
        "## Code After\n```py\nx = 1\n\ny = 2\n```\nDone.",
        "Sure:\n```python\nimport os\n```\n```py\nsecond\n```",
        "```py\nnever closed\nx = 2",
        "no fence at all",
        "inline ```py fences``` are not blocks",
        "",
    ],
)
def test_chat_extraction_agrees_with_upstream(answer):
    assert FORMATS["chat"].extract(answer) == _upstream_codeblock_extract(answer)


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
    assert prompt.count("<user>") == 2 and f"```py\n{BEFORE}\n```" in prompt
    assert fmt.extract("Sure!\n" + fmt.completion(AFTER) + "\nDone.").strip() == AFTER.strip()


def test_an_untagged_fence_keeps_its_first_line():
    assert first_fenced_block("```\nimport os\nx = 1\n```") == "import os\nx = 1\n"
    assert first_fenced_block("```py\nimport os\n```") == "import os\n"
    # deliberately unlike upstream, which drops the line that opens the fence
    assert first_fenced_block("```import os\nx = 1\n```") == "import os\nx = 1\n"
    assert first_fenced_block("no code here") is None


def test_unknown_format_names_the_choices():
    with pytest.raises(ValueError, match="editcoder"):
        get_format("alpaca")
