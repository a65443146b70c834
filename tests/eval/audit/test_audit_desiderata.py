"""The six desiderata (D1-D6) decided from the published audit's own figures for CanItEdit and EDIT-Bench:
the audit dicts below are built from the numbers the paper reports (RQ1, RQ2, Section 4), and the report
must reach the paper's conclusions: D1, D2, D3 and D6 unmet for both; D4 and D5 decided by named
thresholds (moving a threshold moves the verdict). No sandbox starts here.
"""

from __future__ import annotations

import pytest

from core.problems import Problem
from eval.audit import labels as L
from eval.audit import paradigms
from eval.audit.desiderata import Thresholds, decide
from eval.audit.report import render

# where the paper leaves a count unstated it is named so, never spread over the stated categories
UNSTATED = "not stated in the paper"
TOTALS_NOT_REPORTED = {
    "before_timeouts": None, "test_functions_median": None, "mutants_run": 0, "kill_rate_outside": None,
    "kill_rate_outside_covered": None, "kill_rate_inside": None, "killed_outside": 0, "scored_outside": 0,
    "killed_inside": 0, "scored_inside": 0, "identical_instruction_groups": None,
}  # fmt: skip
CLASSIFIER = {"source": "model", "model": "Claude Sonnet 4.6 (the published audit)", "fallbacks": {}}


def _audit(name: str, totals: dict, **labels) -> dict:
    return {
        "benchmark": name,
        "problems": [],
        "totals": {**TOTALS_NOT_REPORTED, **totals},
        "distributions": {
            "problems": totals["problems"],
            "by_language": {},
            "by_change_kind": {},
            "by_topic": {},
            "lines_before": {"n": 0},
            "lines_after": {"n": 0},
            "levenshtein": {"n": 0},
            "instruction_tokens": {},
        },  # fmt: skip
        "timings_s": {},
        "classifier": CLASSIFIER,
        **labels,
    }


def canitedit() -> dict:
    """CanItEdit as published: 105 Python problems (RQ1); feat 47.6%, fix 38.1%, two test problems,
    perf 4.8%, no docs/chore/build/ci (Figure 1's text); Algorithm 68.6%, Data 7.6%, Game 6.7%, AI/ML
    13 (Table 1), no Backend or Frontend, so the other 5 are User Interaction; median 13 tests (mean
    14.7), whole-file coverage median 100% (mean 99.8%), no diff-region view, fail-before/pass-after
    enforced by its pipeline (§2.2); 6 problems in 3 shared-codebase pairs: 102 distinct contexts (§4);
    one AI-native problem (Table 1), and no agent orchestration or prompt templates (D6)."""
    totals = {
        "problems": 105, "languages": {"python": 105}, "not_runnable": 0, "pass_after": 105, "fail_before": 105,
        "flaky": None, "assertions_median": 13, "assertions_mean": 14.7, "single_test": None,
        "coverage_measured": 105, "coverage_median": 100.0, "coverage_mean": 99.8, "diff_coverage_median": None,
        "diff_coverage_mean": None, "diff_coverage_measured": 0, "below_75": 0, "below_75_whole_file": None,
        "blind_outside": 0, "scope_measured": 0, "low_coverage_blind_outside": 0, "low_coverage_scoped": 0,
        "distinct_contexts": 102,
    }  # fmt: skip
    return _audit(
        "CanItEdit (published)", totals,
        languages={"Python": 105},
        intents={"feat": 50, "fix": 40, "test": 2, "perf": 5, "docs": 0, "chore": 0, "build": 0, "ci": 0,
                 UNSTATED: 8},
        domains={L.ALGORITHM: 72, L.DATA: 8, L.GAME: 7, L.AI_ML: 13, L.BACKEND: 0, L.FRONTEND: 0,
                 L.USER_INTERACTION: 5},
        ai_subcategories={L.TRADITIONAL_ML: 11, L.ML_ADJACENT: 1, L.AI_NATIVE: 1},
        emerging=1,
        paradigms={paradigms.AGENT: 0, paradigms.PROMPT_TEMPLATES: 0, "problems": 0},
    )  # fmt: skip


def editbench(rest: str) -> dict:
    """EDIT-Bench's 108 core problems as published: Python 89.8%, JavaScript (with React) 10.2%; feat
    42.6%, fix 36.1%, two test problems, perf 4.6%, no docs/chore/build/ci; AI/ML 36.1%, Backend 13.9%,
    Frontend 10.2%, Data 12.0%, Game 8.3% (the other 21 are Algorithm or User Interaction, unstated:
    `rest` takes them); median 4 tests (mean 4.7), 14 single-test problems; 91 executable with a
    recovered reference (15 solved by no model, 2 that did not run), no fail-before validation;
    whole-file coverage median 40.0% (mean 48.7%), diff-region median 85.7% (mean 64.9%), 39 of 91
    below 75%, 59% of those (23) blind outside the edit, 56% of all suites (51 of 91) scoped to the
    edit; 86 distinct contexts; the LangChain + Ollama cluster among 10 AI-native problems (Table 1),
    the most that can import an LLM SDK, yet no agent orchestration or prompt templates (D6)."""
    totals = {
        "problems": 108, "languages": {"python": 97, "js": 11}, "not_runnable": 17, "pass_after": 91,
        "fail_before": None, "flaky": None, "assertions_median": 4, "assertions_mean": 4.7, "single_test": 14,
        "coverage_measured": 91, "coverage_median": 40.0, "coverage_mean": 48.7, "diff_coverage_median": 85.7,
        "diff_coverage_mean": 64.9, "diff_coverage_measured": 91, "below_75": 39, "below_75_whole_file": None,
        "blind_outside": 51, "scope_measured": 91, "low_coverage_blind_outside": 23, "low_coverage_scoped": 39,
        "distinct_contexts": 86,
    }  # fmt: skip
    return _audit(
        "EDIT-Bench (published)", totals,
        languages={"Python": 97, "JavaScript": 11},
        intents={"feat": 46, "fix": 39, "test": 2, "perf": 5, "docs": 0, "chore": 0, "build": 0, "ci": 0,
                 UNSTATED: 16},
        domains={L.AI_ML: 39, L.BACKEND: 15, L.FRONTEND: 11, L.DATA: 13, L.GAME: 9, rest: 21},
        ai_subcategories={L.TRADITIONAL_ML: 11, L.ML_ADJACENT: 18, L.AI_NATIVE: 10},
        emerging=10,
        paradigms={paradigms.AGENT: 0, paradigms.PROMPT_TEMPLATES: 0, "problems": 0},
    )  # fmt: skip


PUBLISHED = {
    "CanItEdit": canitedit(),
    "EDIT-Bench, the 21 unstated in Algorithm": editbench(L.ALGORITHM),
    "EDIT-Bench, the 21 unstated in User Interaction": editbench(L.USER_INTERACTION),
}


def _status(audit: dict, thresholds: Thresholds | None = None) -> dict[str, str]:
    return {v.code: v.status for v in decide(audit, thresholds)}


@pytest.mark.parametrize("name", PUBLISHED)
def test_the_papers_figures_leave_d1_d2_d3_d6_unmet(name):
    audit = PUBLISHED[name]
    status = _status(audit)
    assert [status[d] for d in ("D1", "D2", "D3", "D6")] == ["unmet"] * 4
    # what used to tick D3 and D6: two test problems, and problems that import an LLM SDK
    assert audit["intents"]["test"] == 2 and audit["emerging"] > 0
    report = render(audit, [])
    for code in ("D1", "D2", "D3", "D6"):
        assert f"- [ ] **{code} " in report
    assert (
        "**D3 maintenance, documentation and testing edits**: unmet; docs + chore + build + ci 0 of" in report
    )
    assert "at least 31.4%, their share of human PRs in AIDev); test 2 of" in report
    assert "agent orchestration 0, prompt-template management 0 problem(s) (at least 1 each)" in report


def test_d2_judges_each_domain_as_the_paper_does():
    """RQ1: Data Processing and Game Development have "reasonable coverage" in both; Algorithm (CanItEdit),
    AI/ML, Backend and Frontend (EDIT-Bench) and the absent Backend and Frontend (CanItEdit) do not."""
    ci = next(v for v in decide(canitedit()) if v.code == "D2").evidence
    eb = next(v for v in decide(editbench(L.USER_INTERACTION)) if v.code == "D2").evidence
    outside = lambda text: text.split("outside: ")[1].split("; backend")[0]  # noqa: E731
    for domain in (L.DATA, L.GAME):
        assert domain not in outside(ci) and domain not in outside(eb)
    for domain in (L.ALGORITHM, L.BACKEND, L.FRONTEND):
        assert domain in outside(ci)
    for domain in (L.AI_ML, L.BACKEND, L.FRONTEND):
        assert domain in outside(eb)
    assert "backend + frontend 24.1% (46% in Copilot Arena)" in eb
    # the tolerance is ours and named: wide enough, EDIT-Bench's Frontend (9.8 points off) comes within it
    wide = decide(editbench(L.USER_INTERACTION), Thresholds(d2_tolerance_points=10))[1]
    assert L.FRONTEND not in outside(wide.evidence) and L.BACKEND in outside(wide.evidence)


def test_d4_and_d5_follow_their_named_thresholds():
    eb, ci = editbench(L.ALGORITHM), canitedit()
    # EDIT-Bench: 39 of 91 below the 75% cut and 51 of 91 suites blind outside the edit
    assert _status(eb)["D4"] == "unmet"
    d4 = next(v for v in decide(eb) if v.code == "D4").evidence
    assert "39 of 91 suites (42.9%) below 75% diff-region coverage (at most 0%)" in d4
    assert "51 of 91 suites (56.0%) blind outside the edit (at most 10%)" in d4
    assert "23 of 39 low-coverage suites blind outside" in d4 and "fail before not measured" in d4
    lenient = Thresholds(d4_max_below_cut=0.5, d4_max_blind_outside=0.6)
    assert _status(eb, lenient)["D4"] == "undecided"  # what is left: fail-before was never validated
    assert _status(eb, Thresholds(d4_max_below_cut=0.5))["D4"] == "unmet"  # the blind suites alone
    # CanItEdit: validated, but the paper reports no diff-region view and no out-of-region measure
    assert _status(ci)["D4"] == "undecided"
    assert "pass after 105/105, fail before 105/105" in next(v for v in decide(ci) if v.code == "D4").evidence
    # D5: 86 of 108 distinct contexts (79.6%) against 102 of 105 (97.1%), the cut at 95% (ours)
    assert _status(eb)["D5"] == "unmet" and _status(ci)["D5"] == "met"
    assert _status(ci, Thresholds(d5_min_distinct=0.98))["D5"] == "unmet"
    # with the cut below 79.6%, EDIT-Bench's 17 problems without a running reference keep it open
    assert _status(eb, Thresholds(d5_min_distinct=0.75))["D5"] == "undecided"


def test_thresholds_out_of_range_are_refused():
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="d5_min_distinct"):
        Thresholds(d5_min_distinct=95).validate()
    with pytest.raises(ConfigError, match="d6_min_problems"):
        Thresholds(d6_min_problems=0).validate()


def _problem(before: str, after: str, language: str = "python") -> Problem:
    return Problem("1", "p", before, after, "", {"descriptive": "edit it"}, language=language)


def test_d6_paradigms_need_more_than_an_llm_sdk():
    chat = (
        "from langchain_ollama import ChatOllama\nllm = ChatOllama(model='llama3')\nprint(llm.invoke('hi'))\n"
    )
    assert paradigms.paradigms(_problem(chat, chat + "\n")) == {paradigms.AGENT: None,
                                                                paradigms.PROMPT_TEMPLATES: None}  # fmt: skip
    template = (
        chat
        + "from langchain_core.prompts import ChatPromptTemplate\nt = ChatPromptTemplate.from_messages([])\n"
    )
    found = paradigms.paradigms(_problem(chat, template))
    assert found[paradigms.PROMPT_TEMPLATES] and found[paradigms.AGENT] is None
    graph = "from langgraph.graph import StateGraph\ng = StateGraph(dict)\n"
    assert paradigms.paradigms(_problem(chat, graph))[paradigms.AGENT] == "imports langgraph"
    js = "const { AgentExecutor } = require('langchain/agents');\nconst promptTemplate = '{q}';\n"
    found = paradigms.paradigms(_problem(js, js, language="js"))
    assert found[paradigms.AGENT] == "names 'agent executor'"
    assert found[paradigms.PROMPT_TEMPLATES] == "names 'prompt template'"
    rows = {"a": found, "b": {paradigms.AGENT: None, paradigms.PROMPT_TEMPLATES: None}}
    assert paradigms.count(rows) == {paradigms.AGENT: 1, paradigms.PROMPT_TEMPLATES: 1, "problems": 1}
