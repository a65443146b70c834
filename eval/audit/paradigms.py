"""Which problems involve the emerging development paradigms the published audit's D6 names: agent
orchestration and prompt-template management.

D6 is not "the code calls an LLM": the paper counts EDIT-Bench's LangChain + Ollama problems and ten
AI-native problems, and still finds that "neither benchmark contains problems involving agent
orchestration or prompt template management". So an LLM SDK import alone decides nothing here; a
problem counts for a paradigm when its code (before or after the edit) uses that paradigm's
constructs:

- agent orchestration: an agent framework imported (LangGraph, CrewAI, AutoGen, smolagents), or an
  agent or tool-calling construct named (`AgentExecutor`, `create_react_agent`, `StateGraph`,
  `bind_tools`, `tool_calls`, `tool_choice`, ...);
- prompt-template management: a prompt-template construct named (`PromptTemplate`,
  `ChatPromptTemplate`, `MessagesPlaceholder`, a `prompt_template` variable in any spelling).

Identifiers are read as words (`AgentExecutor` and `agent_executor` are both "agent executor"), so
the same rules serve Python and JavaScript. Each hit is returned with the rule that fired, as the
RQ1 labels are, so any count can be checked by hand.
"""

from __future__ import annotations

from core.problems import Problem
from eval.audit.rules import _any, _words, code_text, modules

AGENT = "agent_orchestration"
PROMPT_TEMPLATES = "prompt_templates"
PARADIGMS = (AGENT, PROMPT_TEMPLATES)

AGENT_LIBS = frozenset(
    {"langgraph", "crewai", "autogen", "autogen_agentchat", "autogen_core", "smolagents", "swarm",
     "@langchain/langgraph", "@openai/agents"}
)  # fmt: skip
AGENT_WORDS = _any(
    ["agent executor", "create react agent", "create tool calling agent", "create openai functions agent",
     "create openai tools agent", "initialize agent", "state graph", "message graph", "bind tools",
     "tool calls", "tool choice", "tool node", "langchain agents", "multi agent", "agent orchestrator"]
)  # fmt: skip
TEMPLATE_WORDS = _any(
    ["prompt template", "prompt templates", "chat prompt template", "few shot prompt template",
     "messages placeholder", "langchain prompts", "langchain core prompts"]
)  # fmt: skip


def paradigms(p: Problem) -> dict[str, str | None]:
    """For each D6 paradigm, the rule that found it in `p`'s code, or None when none did."""
    words = _words(code_text(p))
    agent_libs = sorted(modules(p) & AGENT_LIBS)
    agent = AGENT_WORDS.search(words)
    template = TEMPLATE_WORDS.search(words)
    return {
        AGENT: (
            f"imports {', '.join(agent_libs[:3])}"
            if agent_libs
            else (f"names '{agent.group(0)}'" if agent else None)
        ),
        PROMPT_TEMPLATES: f"names '{template.group(0)}'" if template else None,
    }


def count(rows: dict[str, dict[str, str | None]]) -> dict[str, int]:
    """The audit's D6 totals: problems per paradigm, and `problems`, those with either."""
    totals = {name: sum(bool(hits[name]) for hits in rows.values()) for name in PARADIGMS}
    totals["problems"] = sum(any(hits.values()) for hits in rows.values())
    return totals
