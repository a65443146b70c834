"""What every generation backend takes and returns.

A backend gets `GenerationRequest`s (a problem, a split and the prompt built in the
model's format) and yields `(request, completions)` as soon as a request's completions
exist, so the runner can append them to samples.jsonl before the next batch starts.

`max_new_tokens` is a cap: backends that know the model's context (hf, vllm) give each
request at most what its prompt leaves of it (`new_token_budget`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.formats import PromptFormat
from core.problems import Problem


@dataclass(frozen=True)
class GenerationRequest:
    problem: Problem
    split: str
    prompt: str  # text prompt (chat models: the rendered template, or "" when the backend takes messages)
    messages: tuple[tuple[str, str], ...] = ()  # (role, content), for chat APIs
    first_index: int = 0  # the index of the first sample asked for (those before it exist already)

    def seeds(self, seed: int, n: int) -> list[int]:
        """The seeds of the ``n`` samples asked for: one per sample, from (seed, problem, split,
        index) alone, so a resumed run, another batch size or a subset draws what one uninterrupted
        run draws."""
        return [sample_seed(seed, self.problem.id, self.split, self.first_index + i) for i in range(n)]

    @property
    def instruction(self) -> str:
        return self.problem.instructions[self.split]


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.2
    top_p: float = 0.95
    max_new_tokens: int = 8192  # the CanItEdit paper's limit
    stop: tuple[str, ...] = ()
    seed: int = 0


def sample_seed(seed: int, problem: str, split: str, index: int) -> int:
    """A 63-bit seed for one sample, a function of what identifies it and nothing else.

    >>> sample_seed(0, "p", "s", 1) == sample_seed(0, "p", "s", 1) != sample_seed(0, "p", "s", 2)
    True
    """
    digest = hashlib.sha256(f"{seed}\0{problem}\0{split}\0{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def new_token_budget(max_new_tokens: int, prompt_tokens: int, context: int | None) -> int:
    """New tokens a request may have: the cap, or what the prompt leaves of the context if less.

    >>> new_token_budget(8192, 1000, 4096), new_token_budget(8192, 1000, None), new_token_budget(64, 5000, 4096)
    (3096, 8192, 0)
    """
    if context is None:
        return max_new_tokens
    return max(min(max_new_tokens, context - prompt_tokens), 0)


class Generator(Protocol):
    name: str

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig
    ) -> Iterator[tuple[GenerationRequest, list[str]]]: ...

    def close(self) -> None: ...


def oracle_generator(kind: str, fmt: PromptFormat, path: str | None = None) -> Generator:
    """The generator of a model kind that is not weights: `reference` and `identity` (the oracles)
    or `replay` (scripted completions read from `path`). Weights generate through a backend
    (`eval.generation.backends`)."""
    if kind in ("reference", "identity"):
        from eval.generation.oracle import OracleGenerator

        return OracleGenerator(kind, fmt)
    if kind == "replay":
        from eval.generation.replay import ReplayGenerator

        return ReplayGenerator(path or "")
    raise ValueError(f"unknown model kind {kind!r}; choose reference, identity or replay")
