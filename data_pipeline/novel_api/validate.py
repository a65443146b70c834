"""Task validation beyond C1: C2 (the base model fails without knowledge) and C3 (a strong model
solves it with the full bundle), with served models (OpenAI-compatible).

C2 keeps a task when the base model fails at least 2 of `samples` (3) attempts with no knowledge
(the API is really new to it); C3 keeps it when the strong model passes with every S/E/M part
shown (the task is solvable from the knowledge). A check whose model is not configured is
skipped and recorded as `null`. Completions run in the sandbox under the spy, like evaluation.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from core.batches import run_all
from core.benchmarks.novelapi import CANDIDATE_FILE, instruction, program
from core.formats import get_format
from core.knowledge import PARTS, render_knowledge
from core.openai_client import OpenAIClient
from core.sandbox import Sandbox
from data_pipeline.novel_api.tasks import library_unverified

if TYPE_CHECKING:
    from data_pipeline.novel_api.app import ValidateConfig


def _passes(sandbox: Sandbox, task: dict, completions: list[str]) -> list[bool]:
    chat = get_format("chat")
    jobs = [(program(chat.extract(text), task["paths"]), task["tests"]) for text in completions]
    if not jobs:
        return []
    unverified = library_unverified(sandbox, task["library"])
    results = sandbox.run_many(jobs, candidate_file=CANDIDATE_FILE, unverified=unverified, channel=True)
    return [r.passed for r in results]


def _ask(client: OpenAIClient, model: str, task: dict, knowledge: str, n: int) -> list[str]:
    chat = get_format("chat")
    messages = chat.messages(task["context"], instruction(task, knowledge))
    return client.chat(model, messages, n=n, temperature=0.8 if n > 1 else 0.0)


def validate_tasks(
    tasks: list[dict[str, Any]], bundles: dict[str, dict], sandbox: Sandbox, cfg: ValidateConfig
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(kept tasks, manifest). Tasks go through `core.batches` one at a time, in order: each asks the
    served models, then runs their completions as one batch of sandbox runs."""
    client = OpenAIClient(cfg)

    def checks(part: list[dict[str, Any]]) -> list[tuple[bool | None, bool | None]]:
        (task,) = part
        c2 = c3 = None
        if cfg.base_model:
            fails = _passes(sandbox, task, _ask(client, cfg.base_model, task, "", cfg.samples)).count(False)
            c2 = fails >= 2
        if cfg.strong_model and c2 is not False:  # no need to ask when C2 already dropped it
            full = render_knowledge(bundles[task["qualname"]], PARTS)
            c3 = any(_passes(sandbox, task, _ask(client, cfg.strong_model, task, full, 1)))
        return [(c2, c3)]

    dropped: Counter = Counter()
    kept = []
    for task, (c2, c3) in zip(
        tasks, run_all(tasks, checks, label="validate", chunk=1, in_flight=1), strict=True
    ):
        if c2 is False:
            dropped["c2_base_model_solves"] += 1
        elif c3 is False:
            dropped["c3_strong_model_fails"] += 1
        else:
            kept.append({**task, "c2": c2, "c3": c3})
    manifest = {
        "input": len(tasks),
        "kept": len(kept),
        "dropped": dict(dropped),
        "c2": "skipped" if not cfg.base_model else cfg.base_model,
        "c3": "skipped" if not cfg.strong_model else cfg.strong_model,
    }
    return kept, manifest
