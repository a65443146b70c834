"""`eval.audit.tables.tables` and report.md's RQ1 section from hand-written audit.json files: Table 1 in the
paper's layout with a column per run (named by its folder), the RQ2/RQ3 figures, D2 and D3 decided from
the labels, and a clear error for a folder without an audit. No sandbox starts here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import UserError
from eval.audit import labels as L
from eval.audit.report import render
from eval.audit.tables import tables

TOTALS = {
    "problems": 4, "languages": {"python": 3, "js": 1}, "not_runnable": 0, "pass_after": 4, "fail_before": 3,
    "before_timeouts": 0, "flaky": 0, "assertions_median": 6.5, "assertions_mean": 7.0, "test_functions_median": 0,
    "single_test": 1, "coverage_measured": 4, "coverage_median": 92.5, "coverage_mean": 80.0,
    "diff_coverage_median": 70.0, "diff_coverage_mean": 55.0, "diff_coverage_measured": 4, "below_75": 2,
    "below_75_ids": ["2", "3"], "below_75_whole_file": 1, "mutants_run": 40, "kill_rate_outside": 75.0,
    "kill_rate_outside_covered": 80.0, "kill_rate_inside": 90.0, "killed_outside": 15, "scored_outside": 20,
    "killed_inside": 18, "scored_inside": 20, "blind_outside": 1, "scope_measured": 3,
    "low_coverage_blind_outside": 1, "low_coverage_scoped": 2, "distinct_contexts": 3,
    "identical_instruction_groups": 0,
}  # fmt: skip


def audit(benchmark: str, **extra) -> dict:
    rows = [
        {"id": str(i), "language": "python", "diff_coverage": c}
        for i, c in enumerate([100.0, 0.0, 40.0, 100.0])
    ]
    return {
        "benchmark": benchmark,
        "problems": rows,
        "totals": dict(TOTALS),
        "independence": {"problems_sharing": 2, "clusters": [["1", "2"]], "distinct_contexts": 3},
        "distributions": {
            "problems": 4,
            "by_language": {},
            "by_change_kind": {},
            "by_topic": {},
            "lines_before": {"n": 0},
            "lines_after": {"n": 0},
            "levenshtein": {"n": 0},
            "instruction_tokens": {},
        },  # fmt: skip
        "emerging": 0,
        "timings_s": {"total": 1.0},
        "classifier": {"source": "rules", "model": None, "fallbacks": {}, "fallback_answers": {}},
        "languages": {"Python": 3, "JavaScript": 1},
        "intents": {"feat": 2, "fix": 1, "docs": 1},
        "domains": {L.BACKEND: 1, L.FRONTEND: 1, L.AI_ML: 2},
        "ai_subcategories": {L.TRADITIONAL_ML: 1, L.AI_NATIVE: 1},
        **extra,
    }


def write(folder: Path, data: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "audit.json").write_text(json.dumps(data))
    return folder


def _row(text: str, first: str) -> list[str]:
    """The cells of the Markdown row starting with `first`."""
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| {first} |"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def test_tables_render_table1_and_rq23_with_a_column_per_run(tmp_path):
    unsolved = {"models": ["a", "b"], "problems_seen": 4, "unsolved": {"3": {"cause": "timeout", "models": 2}},
                "causes": {"timeout": 1}, "recovered_references": {}}  # fmt: skip
    a = write(tmp_path / "runs" / "bench_a", audit("bench_a", unsolved=unsolved))
    old = audit("bench_b")
    for key in ("classifier", "languages", "intents", "domains", "ai_subcategories"):
        old.pop(key)  # audited before the classifier
    b = write(tmp_path / "runs" / "bench_b", old)
    text = tables([a, b])
    head_a, head_b = f"bench_a (`{a}`)", f"bench_b (`{b}`)"
    assert (
        "## Table 1: representativeness (RQ1)" in text
        and "### AI/ML subcategory (the paper's Table 1)" in text
    )
    header = next(ln for ln in text.splitlines() if ln.startswith("| Intent |"))
    assert header == (
        f"| Intent | {head_a} | {head_b} | EDIT-Bench (published) | CanItEdit (published) | AIDev human PRs | "
        "AIDev agent PRs |"
    )
    assert _row(text, "feat") == ["2 (50.0%)", "not classified", "42.6", "47.6", "—", "—"]
    assert _row(text, "docs") == ["1 (25.0%)", "not classified", "0.0", "0.0", "—", "12.8"]
    assert _row(text, "**docs + chore + build + ci**") == [
        "1 (25.0%)",
        "not classified",
        "0.0",
        "0.0",
        "31.4",
        "19.8",
    ]
    assert _row(text, L.BACKEND) == ["1 (25.0%)", "not classified", "13.9", "0.0", "26"]
    assert _row(text, "**Backend + Frontend**") == ["2 (50.0%)", "not classified", "24.1", "0.0", "46"]
    assert _row(text, "TypeScript")[:2] == ["0 (0.0%)", "not classified"]  # absent, as the paper stresses
    # Table 1: shares of the AI/ML problems, beside the paper's
    assert _row(text, L.TRADITIONAL_ML) == ["1 (50.0%)", "not classified", "11 (28.2)", "11 (84.6)"]
    assert f"| ML Subcategory | {head_a} (2 AI/ML) | {head_b} (0 AI/ML) |" in text
    # RQ2/RQ3: the figures of each run, the published ones beside them
    assert _row(text, "tests (median)") == ["6.5", "6.5", "13", "4"]
    assert _row(text, "suites below 75% diff-region coverage") == ["2 of 4 (50.0%)", "2 of 4 (50.0%)", "—",
                                                                   "39 of 91 (42.9%)"]  # fmt: skip
    assert _row(text, "0% diff-region coverage") == ["1", "1", "—", "11"]
    assert _row(text, "mutants killed outside the diff")[0] == "75.0% (15 of 20)"
    assert _row(text, "problems sharing a codebase")[0] == "2 of 4 (50.0%) in 1 cluster(s)"
    assert _row(text, "unsolved by every model")[:2] == [
        "1 of 4 over 2 model run(s); causes: timeout 1",
        "no model results given",
    ]
    assert f"- `{a}/audit.json`: benchmark bench_a, 4 problems; labels from the deterministic rules" in text
    assert f"- `{b}/audit.json`: benchmark bench_b, 4 problems; no RQ1 labels" in text


def test_a_folder_without_an_audit_is_a_user_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no audit.json"):
        tables([tmp_path / "empty"])
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "audit.json").write_text("{")
    with pytest.raises(UserError, match="not JSON"):
        tables([tmp_path / "broken"])
    with pytest.raises(UserError, match="at least one"):
        tables([])


def test_report_has_table1_and_decides_d2_d3_from_the_labels():
    report = render(audit("bench"), [])
    assert "## Table 1: representativeness (the published audit's RQ1)" in report
    assert "| Language | This benchmark | EDIT-Bench (published) |" in report
    # backend 25%, frontend 25%, AI/ML 50% (7% in Copilot Arena), algorithm and data 0%: outside the cut
    assert (
        "- [ ] **D2 domains anchored to real editing workloads**: unmet; each Copilot Arena share" in report
    )
    assert "backend + frontend 50.0% (46% in Copilot Arena)" in report
    assert f"{L.AI_ML} 50.0% (7%)" in report
    # one docs problem in four: 25%, under the 31.4% of human PRs D3 cites
    assert (
        "- [ ] **D3 maintenance, documentation and testing edits**: unmet; docs + chore + build + ci 1 of 4"
        in report
    )
    assert report.count("Labels from the deterministic rules (`eval/audit/rules.py`): estimates") == 2
    model = audit("bench", classifier={"source": "model", "model": "judge", "fallbacks": {"intent": 2}})
    assert "Labels from the served model judge with the published audit's prompts" in render(model, [])
    assert "2 answer(s) outside the labels fell back" in render(model, [])
