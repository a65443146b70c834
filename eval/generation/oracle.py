"""`model=reference` answers with the reference edit, `model=identity` with the unedited code.

They go through the same prompt format, extraction, sandbox and scoring as a real model,
so a benchmark checks itself: reference must pass everything, identity nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from core.formats import PromptFormat
from eval.generation.base import GenerationRequest, SamplingConfig


class OracleGenerator:
    def __init__(self, kind: str, fmt: PromptFormat):
        self.name, self.fmt = kind, fmt

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig
    ) -> Iterator[tuple[GenerationRequest, list[str]]]:
        for request in requests:
            code = request.problem.after if self.name == "reference" else request.problem.before
            yield request, [self.fmt.completion(code)] * n

    def close(self) -> None:
        return None
