"""RQ1 labels from a served model (opt-in), asked with the published audit's own prompts (its Appendix A:
edit intent, Figure 5; application domain, Figure 6; AI/ML subcategory, Figure 7), so a run with a
strong model reproduces the paper's method rather than an approximation of it.

Each answer is read as JSON (`task_type`, `category`, `classification`) or as a bare label; an answer
that is not one of the allowed labels falls back to the deterministic rule for that label, and is
counted. The JSON schemas the paper gave as structured output are written into the prompt text, since
not every OpenAI-compatible server takes a response schema. The language is never asked: it is read
from the problem, as the paper read it from the benchmarks' repositories.
"""

from __future__ import annotations

import json
import re
from typing import Any

from core.openai_client import OpenAIClient
from core.problems import Problem
from eval.audit import labels as L
from eval.audit.rules import Label, ai_subcategory

INTENT_PROMPT = """Classify the following code-editing task into exactly ONE of these 11 task types (from the Conventional Commits specification, as used in the AIDev dataset):
feat New feature or functionality addition
fix Bug fix --- correcting errors, incorrect behavior, or defects
docs Documentation-only changes (comments, docstrings, READMEs)
refac Code restructuring without changing external behavior
chore Maintenance / housekeeping (dependency bumps, config cleanup)
build Build system or external-dependency changes
ci CI/CD pipeline configuration changes
sty Code style / formatting changes (whitespace, naming, linting)
perf Performance optimization
test Adding or modifying tests
other Does not fit any of the above categories
Important rules:
- Classify based on what the INSTRUCTION asks the developer to do, using the original code as context.
- "feat" = adding new functionality that did not exist before.
- "fix" = the instruction describes correcting a bug, error, or wrong behavior.
- "refac" = restructuring or rewriting existing code with no new behavior.
- "perf" = the primary goal is making code faster or more efficient.
- "test" = the primary goal is adding, fixing, or improving tests.
- "docs" = the change is purely about comments, docstrings, or documentation.
- "sty" = purely cosmetic: formatting, renaming for style, linting fixes.
- "chore" = maintenance tasks like updating dependencies or config files.
- "build" / "ci" = changes to build systems or CI/CD pipelines.
- If the instruction asks to add a feature AND fix a bug, pick the dominant intent.
- Use "other" only when no category fits at all.
INSTRUCTION: {instruction}
ORIGINAL CODE: {code}
Return your classification as the structured JSON object: {{"task_type": one of ["feat","fix","docs","refac","chore","build","ci","sty","perf","test","other"], "confidence": one of ["high","medium","low"], "reasoning": string}}"""

DOMAIN_SYSTEM = """Please categorize the following code into one of these categories:
• User Interaction and Input Handling: Code that manages user inputs, prompts, and basic interaction with the system
• Frontend Development and UI Design: Code focused on designing user interfaces and creating interactive components
• Backend Development and APIs: Server-side logic, data management, and API integration for applications
• Algorithm Design and Problem Solving: Code implementing algorithms to solve computational problems or optimize tasks
• Data Processing and File Operations: Code that reads, writes, or processes data from files and other data sources
• Game Development and Simulations: Code focused on creating games, simulations, and managing game dynamics
• Artificial Intelligence and Machine Learning: Code related to AI and ML for training, inference, and application"""
DOMAIN_USER = """Only respond with the exact category name that best fits. No other text.
Here's the code: {code}
Return your classification as the structured JSON object: {{"category": one of {categories}}}"""

SUBCATEGORY_PROMPT = """You are classifying code-editing problems by the TYPE of AI/ML work involved. Given a code-editing task (instruction + code context), classify it into EXACTLY ONE of these categories:
AI-NATIVE-APPLICATION-DEV: Code that USES AI/ML models as services or components within a larger application. This includes:
- Calling LLM APIs (OpenAI, Anthropic, Ollama, HuggingFace Inference API, etc.)
- Using LangChain, LlamaIndex, or other LLM orchestration frameworks
- Building RAG pipelines, prompt templates, or chat interfaces that consume AI APIs
- Configuring or deploying pre-trained models as services (not training them)
- Agent framework configuration and tool-use setup
- Building applications ON TOP of AI capabilities
TRADITIONAL-ML-DEV: Code that BUILDS, TRAINS, or EVALUATES ML/AI models. This includes:
- Defining model architectures (CNN, RNN, Transformer layers)
- Training loops, loss functions, optimizers, learning rate schedules
- Data preprocessing FOR model training (feature engineering, train/val splits)
- Model evaluation metrics and validation
- Hyperparameter tuning
- Fine-tuning or adapter training (LoRA, PEFT) --- the training side, not inference/serving
ML-ADJACENT-TOOLING: Code that works WITH ML outputs but is not itself model-building or API-calling. This includes:
- Visualization of model results (heatmaps, confusion matrices, plots)
- Data analysis and exploration using ML library outputs
- Statistical analysis using scipy/sklearn for non-ML purposes
- File/data management utilities involving model artifacts
INSTRUCTION: {instruction}
CODE CONTEXT: {code}
Return your classification as the structured JSON object: {{"classification": one of ["AI-NATIVE-APPLICATION-DEV","TRADITIONAL-ML-DEV","ML-ADJACENT-TOOLING"], "confidence": one of ["high","medium","low"], "evidence": string}}"""

# the cuts the paper states: the intent prompt's code "truncated to 80 lines / 4000 chars", the
# subcategory prompt's "first 800 chars"; the domain prompt states none and gets the intent's cut
INTENT_LINES, INTENT_CHARS, SUBCATEGORY_CHARS = 80, 4000, 800


def _cut(code: str, lines: int, chars: int) -> str:
    return "\n".join(code.splitlines()[:lines])[:chars]


def _instruction(p: Problem) -> str:
    """The first instruction (CanItEdit: the descriptive one; the paper does not say which it used)."""
    return next(iter(p.instructions.values()), "")


def prompts(p: Problem) -> dict[str, list[dict[str, str]]]:
    """The chat messages of the three questions about `p`."""
    code = _cut(p.before, INTENT_LINES, INTENT_CHARS)
    categories = json.dumps(list(L.DOMAINS), ensure_ascii=False)
    return {
        "intent": [{"role": "user", "content": INTENT_PROMPT.format(instruction=_instruction(p), code=code)}],
        "domain": [
            {"role": "system", "content": DOMAIN_SYSTEM},
            {"role": "user", "content": DOMAIN_USER.format(code=code, categories=categories)},
        ],
        "ai_subcategory": [
            {
                "role": "user",
                "content": SUBCATEGORY_PROMPT.format(
                    instruction=_instruction(p), code=p.before[:SUBCATEGORY_CHARS]
                ),
            }
        ],
    }


FIELDS = {
    "intent": ("task_type", L.INTENTS, L.INTENT_ALIASES),
    "domain": ("category", L.DOMAINS, None),
    "ai_subcategory": ("classification", L.AI_SUBCATEGORIES, L.SUBCATEGORY_ALIASES),
}


def parse(reply: str, field: str) -> str | None:
    """The label in a reply: the JSON object's key for `field`, else the whole reply as a bare label
    (quotes, backticks and a final full stop dropped); None when neither is an allowed label."""
    key, allowed, aliases = FIELDS[field]
    text = reply.strip()
    found = re.search(r"\{.*\}", text, re.S)
    if found:
        try:
            answer: Any = json.loads(found.group(0))
        except json.JSONDecodeError:
            answer = None
        if isinstance(answer, dict) and key in answer:
            return L.normalise(answer[key], allowed, aliases)
    return L.normalise(text.strip("`'\" \n.").removeprefix("json").strip(), allowed, aliases)


def ask(
    client: OpenAIClient, model: str, p: Problem, rules: dict[str, Label], sampling: dict[str, Any]
) -> tuple[dict[str, Label], dict[str, str]]:
    """The model's labels for `p`, each falling back to the rule's when the answer is not a label;
    returns (labels, the raw answers that fell back)."""
    messages = prompts(p)
    out, fell_back = {"language": rules["language"]}, {}
    for field in ("intent", "domain"):
        reply = client.chat(model, messages[field], **sampling)[0]
        value = parse(reply, field)
        if value is None:
            fell_back[field] = reply[:200]
            out[field] = Label(rules[field].value, f"rules (model answer not a label): {rules[field].rule}")
        else:
            out[field] = Label(value, f"model {model}")
    if out["domain"].value != L.AI_ML:
        out["ai_subcategory"] = Label(None, "not AI/ML")
        return out, fell_back
    reply = client.chat(model, messages["ai_subcategory"], **sampling)[0]
    value = parse(reply, "ai_subcategory")
    if value is None:
        rule = ai_subcategory(p, L.AI_ML)  # the rules' subcategory, for the domain the model chose
        fell_back["ai_subcategory"] = reply[:200]
        out["ai_subcategory"] = Label(rule.value, f"rules (model answer not a label): {rule.rule}")
    else:
        out["ai_subcategory"] = Label(value, f"model {model}")
    return out, fell_back
