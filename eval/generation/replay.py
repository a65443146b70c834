"""`model=replay`: serves scripted completions from a jsonl file, so every metric can be checked exactly.

Each line is `{"problem": ID, "split": SPLIT (optional), "completions": [TEXT, ...]}` (or
`"completion": TEXT`); lines for the same key add up, in order. A request takes the
completions of (problem, split), else those of the problem with no split, cycling through them
when it asks for more samples than the file has. A problem the file does not name gets empty
completions (they score as degenerate or empty), and the run logs how many there were.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

from core.errors import UserError
from eval.generation.base import GenerationRequest, SamplingConfig

log = logging.getLogger(__name__)


def read_script(path: Path) -> dict[tuple[str, str | None], list[str]]:
    if not path.is_file():
        raise UserError(f"model.path={str(path)!r}: model=replay needs a .jsonl file of scripted completions")
    script: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise UserError(f"{path}:{line_no}: not JSON ({err.msg})") from err
        texts = (
            row.get("completions", [row["completion"]] if "completion" in row else None)
            if isinstance(row, dict)
            else None
        )
        if not isinstance(row, dict) or "problem" not in row or not isinstance(texts, list):
            raise UserError(f"{path}:{line_no}: expected {{'problem': ID, 'completions': [...]}}")
        if not all(isinstance(t, str) for t in texts):
            raise UserError(f"{path}:{line_no}: every completion must be a string")
        script[(str(row["problem"]), row.get("split"))].extend(texts)
    return dict(script)


class ReplayGenerator:
    name = "replay"

    def __init__(self, path: str):
        self.script = read_script(Path(path))
        self.missing = 0

    def generate(
        self, requests: Sequence[GenerationRequest], n: int, sampling: SamplingConfig
    ) -> Iterator[tuple[GenerationRequest, list[str]]]:
        for request in requests:
            texts = self.script.get((request.problem.id, request.split)) or self.script.get(
                (request.problem.id, None)
            )
            if not texts:
                self.missing += 1
                yield request, [""] * n
                continue
            yield request, [texts[i % len(texts)] for i in range(n)]

    def close(self) -> None:
        if self.missing:
            log.warning("model=replay: %d requests had no scripted completion (served empty)", self.missing)
