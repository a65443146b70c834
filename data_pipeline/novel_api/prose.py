"""The optional LLM rewrite of M prose: a served model explains the mechanism from the docstring
and the source, in its own words (through `core/openai_client.py`). The docstring's text stays in
`M.prose_docstring`; a failed request keeps the docstring's prose and is counted."""

from __future__ import annotations

from collections import Counter
from typing import Any

from core.openai_client import EndpointError, OpenAIClient

PROMPT = (
    "Explain in one short paragraph how this Python API works and what it returns, for a programmer "
    "who will call it. Do not repeat the signature.\n\nDocumentation:\n{prose}\n\nSource:\n{code}"
)


def rewrite_prose(bundles: list[dict[str, Any]], client: OpenAIClient, model: str) -> tuple[list[dict], dict]:
    counts: Counter = Counter()
    out = []
    for bundle in bundles:
        m = dict(bundle.get("M") or {})
        message = PROMPT.format(prose=m.get("prose", ""), code=m.get("code", ""))
        try:
            text = client.chat(model, [{"role": "user", "content": message}], temperature=0.0)[0].strip()
        except EndpointError:
            text = ""
        if text:
            m["prose_docstring"], m["prose"] = m.get("prose", ""), text
            counts["rewritten"] += 1
        else:
            counts["kept_docstring"] += 1
        out.append({**bundle, "M": m})
    return out, dict(counts)
