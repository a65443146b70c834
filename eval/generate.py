"""The generate stage: prompts in the model's format, completions appended as they arrive."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from core.formats import ChatFormat, PromptFormat
from core.problems import Problem
from eval.generation.base import GenerationRequest, Generator, SamplingConfig
from eval.samples import SampleStore


def build_requests(
    problems: Sequence[Problem], splits: Sequence[str], fmt: PromptFormat, tokenizer: Any = None
) -> list[GenerationRequest]:
    """One request per (problem, split), showing `problem.shown`; chat formats carry their messages too."""
    requests = []
    for problem in problems:
        for split in problem.splits:
            if split not in splits:
                continue
            instruction = problem.instructions[split]
            messages: tuple[tuple[str, str], ...] = ()
            if isinstance(fmt, ChatFormat):
                messages = tuple((m["role"], m["content"]) for m in fmt.messages(problem.shown, instruction))
                prompt = fmt.prompt(problem.shown, instruction, tokenizer) if tokenizer is not None else ""
            else:
                prompt = fmt.prompt(problem.shown, instruction)
            requests.append(GenerationRequest(problem=problem, split=split, prompt=prompt, messages=messages))
    return requests


def generate_samples(
    store: SampleStore,
    requests: Sequence[GenerationRequest],
    generator: Generator,
    fmt: PromptFormat,
    n: int,
    sampling: SamplingConfig,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Top every request up to `n` samples; returns how many samples were made.

    A sample's `code` is what runs: the extracted code as the problem's `program` makes it.
    """
    by_need: dict[int, list[GenerationRequest]] = {}
    for request in requests:
        have = store.count(request.problem.id, request.split)
        if n - have > 0:
            by_need.setdefault(n - have, []).append(replace(request, first_index=have))
    made = 0
    for need, batch in sorted(by_need.items()):
        for request, completions in generator.generate(batch, need, sampling):
            start = store.count(request.problem.id, request.split)
            for offset, completion in enumerate(completions):
                store.append(
                    {
                        "type": "sample",
                        "problem": request.problem.id,
                        "split": request.split,
                        "index": start + offset,
                        "prompt": request.prompt or list(request.messages),
                        "completion": completion,
                        "code": request.problem.program(fmt.extract(completion)),
                    }
                )
            made += len(completions)
            if progress:
                progress(len(completions))
    return made
