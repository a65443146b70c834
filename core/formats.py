"""Prompt formats shared by training and evaluation.

A model is evaluated in exactly the format it was trained in, so both sides build prompts
here. A format turns (before, instruction) into a prompt and `after` into the completion
the model must produce; `extract` recovers code from a generated completion.

>>> fmt = FORMATS["editcoder"]
>>> fmt.prompt("x = 1\\n", "Make x two")
'## Code Before:\\nx = 1\\n\\n## Instruction:\\nMake x two\\n## Code After:\\n'
>>> fmt.completion("x = 2\\n")
'x = 2\\n'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.errors import ConfigError

CHAT_SYSTEM_PROMPT = (
    "You are PythonEditGPT. You will be provided the original code snippet and an instruction that "
    "specifies the changes you need to make. You will produce the changed code, based on the original "
    "code and the instruction given. Only produce the code, do not include any additional prose."
)

# The one worked example of CanItEdit's chat prompt (the paper's Fig. 6b; nuprl/CanItEdit
# benchmark/generate_completions.py, `openai_edit_prompt_1shot`).
CHAT_SHOT_USER = (
    "## Code Before\n```py\ndef add(a, b):\n    return a + b\n```\n\n## Instruction\n"
    'Add a "sub" function that subtracts two numbers. Also write docstrings for both functions '
    "and change a,b to x,y."
)
CHAT_SHOT_ASSISTANT = (
    '## Code After\n```py\ndef add(x, y):\n    """Adds two numbers."""\n    return x + y\n\n'
    'def sub(x, y):\n    """Subtracts two numbers."""\n    return x - y\n```'
)

# Fences open and close at the start of a line, as CanItEdit's `python_markdown_codeblock_extract`.
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)(?:^```|\Z)", re.DOTALL | re.MULTILINE)
_LANG_TAG = re.compile(r"^[A-Za-z0-9_+#.-]{1,20}$")


def first_fenced_block(text: str) -> str | None:
    """Code of the first fenced block, or None when there is no fence.

    A fence without a language tag keeps its first line (the text after ``` is code). Every
    line of the result ends with a newline.
    """
    match = _FENCE.search(text)
    if match is None:
        return None
    tag, body = match.group(1).strip(), match.group(2)
    # Deliberately unlike CanItEdit's extractors, which drop that line: "```x = 1" keeps "x = 1".
    if tag and not _LANG_TAG.match(tag):
        body = match.group(1) + "\n" + body
    return body if body == "" or body.endswith("\n") else body + "\n"  # an unclosed block's last line too


@dataclass(frozen=True)
class PromptFormat:
    """Base-model formats: a fixed template and a completion that ends at EOS."""

    name: str
    template: str  # uses {before} and {instruction}
    completion_template: str = "{after}"
    stop: tuple[str, ...] = ()

    def prompt(self, before: str, instruction: str, tokenizer: Any = None) -> str:
        return self.template.format(before=before, instruction=instruction)

    def completion(self, after: str) -> str:
        return self.completion_template.format(after=after)

    def extract(self, generated: str) -> str:
        """Code from a completion (generated text after the prompt)."""
        for stop in self.stop:
            generated = generated.split(stop, 1)[0]
        if "```" in self.completion_template:
            block = first_fenced_block("```python\n" + generated)
            return block if block is not None else generated
        return generated


@dataclass(frozen=True)
class ChatFormat(PromptFormat):
    """Chat models, as CanItEdit prompts them (the paper's Fig. 6b): the PythonEditGPT system
    prompt, one worked example, the code in a ```py fence; rendered by the tokenizer's chat template."""

    shot: tuple[tuple[str, str], ...] = (("user", CHAT_SHOT_USER), ("assistant", CHAT_SHOT_ASSISTANT))

    def messages(self, before: str, instruction: str) -> list[dict[str, str]]:
        """The conversation, for chat APIs that take messages rather than text."""
        return [
            {"role": "system", "content": CHAT_SYSTEM_PROMPT},
            *({"role": role, "content": content} for role, content in self.shot),
            # upstream strips the formatted message (an instruction's trailing newline goes)
            {"role": "user", "content": self.template.format(before=before, instruction=instruction).strip()},
        ]

    def prompt(self, before: str, instruction: str, tokenizer: Any = None) -> str:
        if tokenizer is None or getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(f"prompt_format={self.name!r} needs a tokenizer with a chat template")
        return tokenizer.apply_chat_template(
            self.messages(before, instruction), tokenize=False, add_generation_prompt=True
        )

    def extract(self, generated: str) -> str:
        """The first fenced block; "" when the answer has no fence, as upstream."""
        block = first_fenced_block(generated)
        return block if block is not None else ""


FORMATS: dict[str, PromptFormat] = {
    fmt.name: fmt
    for fmt in (
        PromptFormat(
            name="editcoder",
            template="## Code Before:\n{before}\n## Instruction:\n{instruction}\n## Code After:\n",
            # CanItEdit's stop list for EditCoder and other direct (base) models
            stop=("## Code After:", "## Instruction:", "## Code Before:"),
        ),
        PromptFormat(
            name="starcoder",
            template="<commit_before>{before}<commit_msg>{instruction}<commit_after>",
            stop=("<commit_before>", "<commit_msg>", "<commit_after>"),
        ),
        PromptFormat(
            name="octocoder",
            template="Question: {instruction}\n```python\n{before}\n```\n\nAnswer:\n```python\n",
            completion_template="{after}\n```",
            stop=("\nQuestion:",),
        ),
        ChatFormat(
            name="chat",
            # upstream's final user turn: no blank line before "## Instruction", unlike its example
            template="## Code Before\n```py\n{before}\n```\n## Instruction\n{instruction}",
            completion_template="## Code After\n```py\n{after}\n```",
        ),
    )
}


def get_format(name: str) -> PromptFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ConfigError(f"unknown prompt format {name!r}; choose one of {sorted(FORMATS)}") from None
