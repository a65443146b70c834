"""The RQ1 classifier: each problem's language, edit intent, application domain and AI/ML subcategory,
in the published audit's label sets (`labels.py`), so D2 and D3 can be decided for any benchmark.

By default the labels come from deterministic rules (`rules.py`): no model, no cost, estimates. With
`classifier.model=NAME` (and `classifier.base_url=...`, an OpenAI-compatible server) a served model is
asked with the paper's own prompts (`classify_model.py`); an answer outside the labels falls back to
the rule for that label, and the fallbacks are counted.

Label sets, as the paper names them: the edit intents are AIDev's Conventional Commit types plus the
prompt's `other`; the domains are the seven Copilot Arena categories the paper's domain prompt lists
(the paper says seven and lists seven); the AI/ML subcategories are the three rows of its Table 1.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from core.errors import ConfigError, UserError
from core.openai_client import EndpointConfig, EndpointError, OpenAIClient
from core.problems import Problem
from core.progress import tqdm
from eval.audit import labels as L
from eval.audit.rules import Label, classify_rules

log = logging.getLogger("eval.audit")
FIELDS = ("language", "intent", "domain", "ai_subcategory")


class ClassifierError(UserError):
    """The served model could not be asked (after the client's retries)."""


@dataclass
class ClassifierConfig(EndpointConfig):
    """`classifier.*` of the audit: null model -> the deterministic rules; a model -> that served model,
    asked with the published audit's prompts (keys of `EndpointConfig` say where and how patiently)."""

    model: str | None = None
    temperature: float = 0.0
    concurrency: int = 4  # problems asked at once

    def validate(self) -> None:
        defaults = EndpointConfig()
        if self.model is None:
            changed = [
                f"classifier.{k}"
                for k in ("base_url", "api_key_env")
                if getattr(self, k) != getattr(defaults, k)
            ]
            if changed:
                raise ConfigError(
                    f"{', '.join(changed)} set but classifier.model is not: give classifier.model=<served model "
                    "name> to label with a model, or drop them to label with the deterministic rules"
                )
            return
        if not self.model.strip():
            raise ConfigError("classifier.model is empty: give a served model's name, or null for the rules")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"classifier.base_url={self.base_url!r} is not an http(s) URL of an OpenAI-compatible server "
                "(e.g. http://localhost:8000/v1)"
            )
        if self.temperature < 0 or self.concurrency < 1 or self.max_retries < 0 or self.timeout_s <= 0:
            raise ConfigError(
                "classifier: temperature must be >= 0, concurrency >= 1, max_retries >= 0 and timeout_s > 0"
            )


@dataclass(frozen=True)
class Labels:
    language: str
    intent: str
    domain: str
    ai_subcategory: str | None
    by: dict[str, str]  # label -> the rule that decided it, or "model NAME"

    def as_row(self) -> dict[str, Any]:
        """The fields an audit row gets."""
        return {
            "language_label": self.language,
            "intent": self.intent,
            "domain": self.domain,
            "ai_subcategory": self.ai_subcategory,
            "labelled_by": dict(self.by),
        }


def _labels(found: dict[str, Label]) -> Labels:
    return Labels(
        language=str(found["language"].value),
        intent=str(found["intent"].value),
        domain=str(found["domain"].value),
        ai_subcategory=found["ai_subcategory"].value,
        by={k: found[k].rule for k in FIELDS},
    )


def classify(
    problems: Sequence[Problem], config: ClassifierConfig | None = None
) -> tuple[dict[str, Labels], dict[str, Any]]:
    """Labels per problem id, and a summary: where the labels come from, the fallbacks, the totals."""
    rules = {p.id: classify_rules(p) for p in problems}
    summary: dict[str, Any] = {"source": "rules", "model": None, "fallbacks": {}, "fallback_answers": {}}
    if config is None or config.model is None:
        labels = {pid: _labels(found) for pid, found in rules.items()}
    else:
        from eval.audit.classify_model import ask

        client, model = OpenAIClient(config), config.model
        sampling = {"temperature": config.temperature}

        def one(p: Problem) -> tuple[dict[str, Label], dict[str, str]]:
            try:
                return ask(client, model, p, rules[p.id], sampling)
            except EndpointError as err:
                raise ClassifierError(
                    f"classifier.model={model}: {err}; check classifier.base_url and classifier.model, or drop "
                    "classifier.model to label with the deterministic rules"
                ) from err

        with ThreadPoolExecutor(max_workers=config.concurrency) as pool:  # three questions per problem
            answers = list(
                tqdm(pool.map(one, problems), total=len(problems), desc="classifying", unit="problem")
            )
        labels = {p.id: _labels(found) for p, (found, _) in zip(problems, answers, strict=True)}
        fell_back = {p.id: bad for p, (_, bad) in zip(problems, answers, strict=True) if bad}
        summary.update(
            source="model",
            model=model,
            base_url=config.base_url,
            fallbacks=dict(Counter(field for bad in fell_back.values() for field in bad)),
            fallback_answers=fell_back,
        )
        log.info(
            "classifier: %s labelled %d problems, fallbacks %s", model, len(problems), summary["fallbacks"]
        )
    summary.update(counts(labels.values()))
    return labels, summary


def counts(labels: Sequence[Labels] | Any) -> dict[str, dict[str, int]]:
    """Totals per label set, in the paper's order (labels never given are left out)."""
    labels = list(labels)

    def ordered(values: list[Any], order: Sequence[str]) -> dict[str, int]:
        c = Counter(v for v in values if v is not None)
        return {k: c[k] for k in (*order, *sorted(set(c) - set(order))) if c[k]}

    return {
        "languages": ordered([x.language for x in labels], L.REFERENCE_LANGUAGES),
        "intents": ordered([x.intent for x in labels], L.INTENTS),
        "domains": ordered([x.domain for x in labels], L.DOMAINS),
        "ai_subcategories": ordered([x.ai_subcategory for x in labels], L.AI_SUBCATEGORIES),
    }


def describe(summary: dict[str, Any]) -> str:
    """Where the labels come from, in words a report reader needs to weigh them."""
    if summary.get("source") == "model":
        fallbacks = sum(summary.get("fallbacks", {}).values())
        return (
            f"labels from the served model {summary['model']} with the published audit's prompts (Appendix A); "
            f"{fallbacks} answer(s) outside the labels fell back to the deterministic rules"
        )
    return (
        "labels from the deterministic rules (`eval/audit/rules.py`): estimates, not the paper's LLM labels"
    )
