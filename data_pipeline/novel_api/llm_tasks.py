"""The LLM task generator: a served model writes each level's task from the API's full bundle.

Prompt templates live in `configs/novel_api/task_prompt.yaml`; the model answers with JSON
(`description`, `reference`, `context`, `call`). A reply that is not JSON, lacks a key, whose
context does not hold exactly one `# TODO` line, or whose description names the API is
discarded (the builder counts the API as `no_usable_example` when no level survives); the
rest goes through the same harness, spy and C1 as the deterministic generator's tasks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from core.knowledge import PARTS, render_knowledge
from core.openai_client import EndpointError, OpenAIClient
from data_pipeline.novel_api.tasks import LEVELS, TODO, Draft, strip_name

if TYPE_CHECKING:
    from data_pipeline.novel_api.app import LLMConfig

KEYS = ("description", "reference", "context", "call")


def parse_reply(text: str) -> dict[str, str] | None:
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        return None
    try:
        reply = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(reply, dict) or not all(isinstance(reply.get(k), str) for k in KEYS):
        return None
    return {k: reply[k] for k in KEYS}


@dataclass
class LLMTaskGenerator:
    client: OpenAIClient
    model: str
    template: dict[str, str]
    temperature: float = 0.2

    @classmethod
    def from_config(cls, cfg: LLMConfig) -> LLMTaskGenerator:
        template = yaml.safe_load(Path(cfg.template).read_text())
        return cls(OpenAIClient(cfg), cfg.model, template, cfg.temperature)

    def __call__(self, bundle: dict[str, Any]) -> list[Draft]:
        knowledge = render_knowledge(bundle, PARTS)
        drafts = []
        for level in LEVELS:
            messages = [
                {"role": "system", "content": self.template["system"]},
                {
                    "role": "user",
                    "content": self.template["user"].format(
                        library=bundle["library"], knowledge=knowledge, level=level
                    ),
                },
            ]
            try:
                reply = parse_reply(self.client.chat(self.model, messages, temperature=self.temperature)[0])
            except EndpointError:
                reply = None
            if reply is None or reply["context"].count(TODO) != 1 or TODO in reply["reference"]:
                continue
            if strip_name(reply["description"], bundle) != reply["description"]:
                continue  # the description names the API
            qual = bundle["qualname"]
            drafts.append(
                Draft(
                    f"{qual}/L{level}",
                    qual,
                    level,
                    reply["description"],
                    reply["context"],
                    reply["reference"],
                    _awaited(reply["call"]),
                    generator="llm",
                )
            )
        return drafts


def _awaited(call: str) -> str:
    """`asyncio.run(solve())` with no import of asyncio needed: the tests import nothing."""
    return re.sub(r"^\s*asyncio\.run\(", "__import__('asyncio').run(", call)


def both_routes(deterministic: Callable[[dict[str, Any]], list[Draft]], llm: LLMTaskGenerator):
    """`tasks.generator=both`: the deterministic tasks of a bundle and the model's, the model's ids
    marked `/llm` so the two never collide; the manifest counts each route's (`per_generator`)."""

    def generate(bundle: dict[str, Any]) -> list[Draft]:
        written = [replace(d, id=f"{d.id}/llm") for d in llm(bundle)]
        return [*deterministic(bundle), *written]

    return generate
