"""The RQ1 label sets of the published audit of CanItEdit and EDIT-Bench, and the shares it compares
benchmarks with, each with its source, so the audit's labels and tables use the paper's own words.

Where each set comes from (the paper's section 3, RQ1, and its Appendix A prompts):

- edit intent: the Conventional Commit taxonomy of the AIDev dataset as RQ1's Approach names it
  (feat, fix, docs, test, refactor, perf, style, chore, build, ci), plus `other`, the eleventh
  answer of its edit-intent prompt (Figure 5). That prompt spells two of them `refac` and `sty`;
  a model answering with those spellings is read as `refactor` and `style` (`INTENT_ALIASES`).
- application domain: the seven Copilot Arena categories, as the domain prompt (Figure 6) names them.
- AI/ML subcategory: the three of the paper's Table 1 (Traditional ML Dev, ML-Adjacent Tooling,
  AI-Native Application Dev); the subcategory prompt (Figure 7) spells them in capitals with
  hyphens (`TRADITIONAL-ML-DEV`, ...), read as the same three.

The paper's Table 1 is the AI/ML subcategory table only; the edit-intent and domain comparisons are
its Figures 1 and 2 (plots, whose bars are not in the text). The reference shares below are the
ones the text states; a category whose share the text does not state has none here (never read off
a plot or filled in by subtraction).
"""

from __future__ import annotations

INTENTS = ("feat", "fix", "docs", "test", "refactor", "perf", "style", "chore", "build", "ci", "other")
INTENT_ALIASES = {"refac": "refactor", "sty": "style"}  # the spellings of the paper's prompt (Figure 5)

AI_ML = "Artificial Intelligence and Machine Learning"
ALGORITHM = "Algorithm Design and Problem Solving"
BACKEND = "Backend Development and APIs"
DATA = "Data Processing and File Operations"
FRONTEND = "Frontend Development and UI Design"
GAME = "Game Development and Simulations"
USER_INTERACTION = "User Interaction and Input Handling"
# the order of the paper's domain prompt (Figure 6)
DOMAINS = (USER_INTERACTION, FRONTEND, BACKEND, ALGORITHM, DATA, GAME, AI_ML)

TRADITIONAL_ML = "Traditional ML Dev"
ML_ADJACENT = "ML-Adjacent Tooling"
AI_NATIVE = "AI-Native Application Dev"
AI_SUBCATEGORIES = (TRADITIONAL_ML, ML_ADJACENT, AI_NATIVE)  # the rows of the paper's Table 1
SUBCATEGORY_ALIASES = {
    "TRADITIONAL-ML-DEV": TRADITIONAL_ML,
    "ML-ADJACENT-TOOLING": ML_ADJACENT,
    "AI-NATIVE-APPLICATION-DEV": AI_NATIVE,
    "Traditional ML Development": TRADITIONAL_ML,
    "AI-Native Application Development": AI_NATIVE,
}

# LLM SDKs and agent frameworks: a problem that imports one belongs to D6's emerging paradigms (and its
# AI/ML subcategory is AI-Native Application Dev)
EMERGING = frozenset(
    {"openai", "anthropic", "langchain", "langchain_core", "langgraph", "llama_index", "litellm", "autogen",
     "crewai", "dspy", "guidance", "semantic_kernel", "haystack", "mcp"}
)  # fmt: skip

# Problem.language codes -> the names the paper uses
LANGUAGE_NAMES = {
    "python": "Python", "js": "JavaScript", "javascript": "JavaScript", "ts": "TypeScript",
    "typescript": "TypeScript", "java": "Java", "cpp": "C++", "c++": "C++", "c": "C", "cs": "C#",
    "csharp": "C#", "go": "Go", "rust": "Rust", "rs": "Rust", "ruby": "Ruby", "php": "PHP",
}  # fmt: skip
# the languages RQ1 and D1 name as used in the wild (a benchmark without them shows them at 0)
REFERENCE_LANGUAGES = ("Python", "TypeScript", "JavaScript", "Java", "C#", "Go", "Rust")


def normalise(value: object, labels: tuple[str, ...], aliases: dict[str, str] | None = None) -> str | None:
    """`value` as one of `labels` (case, spaces, hyphens and underscores ignored; `aliases` too), or
    None when it is none of them."""
    if not isinstance(value, str):
        return None
    key = _key(value)
    for label in (*labels, *(aliases or {})):
        if _key(label) == key:
            return (aliases or {}).get(label, label)
    return None


def _key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


# ---------------------------------------------------------------------------------- the paper's shares
# Each reference column: (header naming the source, {row: cell}); rows not stated are absent.
LANGUAGE_REFERENCE = (
    "In the wild (Copilot Arena; Octoverse 2025)",
    {
        "Python": "20-30% of AI-assisted coding activity (Copilot Arena)",
        "TypeScript": "most-used language on GitHub by contributors (Octoverse)",
        "JavaScript": "actively used alongside Python (AIDev, Octoverse)",
        "Java": "actively used alongside Python (AIDev, Octoverse)",
        "C#": "actively used alongside Python (AIDev, Octoverse)",
        "Go": "actively used alongside Python (AIDev, Octoverse)",
    },
)
LANGUAGE_NOTE = (
    "Copilot Arena: 103 languages, none above 30% of activity; Octoverse: six languages cover 80% of new "
    "repositories. The paper gives no per-language shares beyond these."
)
# AIDev (Li et al. 2025) as RQ1's text states it; per-category feat/fix/style/chore/build/ci shares are
# only in the paper's Figure 1
INTENT_REFERENCE = (
    ("AIDev human PRs", {"perf": "0.9-1.3*"}),
    ("AIDev agent PRs", {"docs": "12.8", "test": "4.5", "refactor": "6.9", "perf": "0.9-1.3*"}),
)
INTENT_GROUP = ("docs + chore + build + ci", ("docs", "chore", "build", "ci"), ("31.4", "19.8"))
INTENT_NOTE = (
    "AIDev shares are those RQ1's text states (%); * the text gives 0.9-1.3% real-world prevalence for perf "
    "without saying which is human and which agent. D3 counts the same 31.4% as 'documentation, test writing, "
    "build configuration, and maintenance edits'."
)
# Copilot Arena's shares as RQ1 states them (%); User Interaction's is not stated (the six sum to 89%)
DOMAIN_REFERENCE = (
    "Copilot Arena",
    {BACKEND: "26", FRONTEND: "20", ALGORITHM: "18", DATA: "15", AI_ML: "7", GAME: "3"},
)
DOMAIN_SHARES = {BACKEND: 26.0, FRONTEND: 20.0, ALGORITHM: 18.0, DATA: 15.0, AI_ML: 7.0, GAME: 3.0}
DOMAIN_NOTE = "Copilot Arena shares as RQ1 states them (%); User Interaction's is not stated."
SUBCATEGORY_NOTE = (
    "Shares of the AI/ML problems. No real-world share per subcategory is given; Octoverse counts 1.1 million+ "
    "public repositories importing an LLM SDK (+178% year over year), the growth D6 points at."
)

# The benchmarks as the paper measured them (%), where its text states the figure. Data Processing
# and Game Development are given as "12.0% and 7.6%" and "8.3% and 6.7%" without saying which is
# which; only 13/108 gives 12.0, 8/105 gives 7.6, 9/108 gives 8.3 and 7/105 gives 6.7.
PUBLISHED_INTENTS = {
    "EDIT-Bench (published)": {"feat": "42.6", "fix": "36.1", "test": "1.9", "perf": "4.6-4.8",
                               "docs": "0.0", "chore": "0.0", "build": "0.0", "ci": "0.0"},
    "CanItEdit (published)": {"feat": "47.6", "fix": "38.1", "test": "1.9", "perf": "4.6-4.8",
                              "docs": "0.0", "chore": "0.0", "build": "0.0", "ci": "0.0"},
}  # fmt: skip
PUBLISHED_DOMAINS = {
    "EDIT-Bench (published)": {AI_ML: "36.1", BACKEND: "13.9", FRONTEND: "10.2", DATA: "12.0", GAME: "8.3"},
    "CanItEdit (published)": {ALGORITHM: "68.6", BACKEND: "0.0", FRONTEND: "0.0", DATA: "7.6", GAME: "6.7",
                              AI_ML: "12.4 (Table 1: 13 of 105)"},
}  # fmt: skip
PUBLISHED_LANGUAGES = {
    "EDIT-Bench (published)": {"Python": "89.8", "JavaScript": "10.2 (with JavaScript/React)"},
    "CanItEdit (published)": {"Python": "100.0"},
}
PUBLISHED_SUBCATEGORIES = {  # the paper's Table 1: n (%)
    "EDIT-Bench (published, 39)": {TRADITIONAL_ML: "11 (28.2)", ML_ADJACENT: "18 (46.2)", AI_NATIVE: "10 (25.6)"},
    "CanItEdit (published, 13)": {TRADITIONAL_ML: "11 (84.6)", ML_ADJACENT: "1 (7.7)", AI_NATIVE: "1 (7.7)"},
}  # fmt: skip
