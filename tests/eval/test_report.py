"""report.md: both published ExcessCode metrics, the paper's and the repository's, each named with
where it was published; results.json written before the rename read under today's names; NA for
what a run lacks, pass@k as a percentage everywhere, no empty sections."""

from __future__ import annotations

from eval.report import render_report

METRICS = {
    "descriptive": {
        "pass@1": 0.25,
        "pass@1_stderr": 0.125,
        "pass@5": 0.5,
        "pass@5_stderr": 0.25,
        "excess_code": 7.25,
        "excess_code_repo": 12.3456,
        "excess_code_repo_stderr": 1.5,
        "excess_code_changed_lines": 20.0,
        "problems": 2,
        "samples": 10,
        "statuses": {"failed": 6, "passed": 4},
    },
    "lazy": {  # nothing passed: no coverage
        "pass@1": 0.0,
        "pass@1_stderr": 0.0,
        "excess_code": None,
        "excess_code_repo": None,
        "excess_code_repo_stderr": None,
        "problems": 2,
        "samples": 10,
        "statuses": {"failed": 10},
    },
}
PER_PROBLEM = [
    {
        "name": "p1",
        "split": "descriptive",
        "n": 5,
        "passed": 2,
        "pass@1": 0.4,
        "excess_code": 3.0,
        "excess_code_repo": 4.5,
    }
]
# A split as results.json had it when `excess_code` held the repository's metric.
LEGACY = {
    "pass@1": 0.25,
    "excess_code": 12.3456,
    "excess_code_stderr": 1.5,
    "excess_code_v1": 7.25,
    "mean_median_coverage": 7.25,
    "problems": 2,
    "samples": 10,
    "statuses": {"failed": 6, "passed": 4},
}


def _table_row(report: str, start: str) -> list[str]:
    [line] = [line for line in report.splitlines() if line.startswith(start)]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_both_excess_code_metrics_appear_named_with_their_source():
    report = render_report("m", "canitedit", {"metrics": METRICS, "per_problem": PER_PROBLEM})
    header = _table_row(report, "| Model |")
    assert header == ["Model", "Split", "pass@1 (%)", "ExcessCode (paper)", "ExcessCode (repo)"]
    assert _table_row(report, "| m | descriptive |") == [
        "m",
        "descriptive",
        "25.0 ± 12.5",
        "7.25",
        "12.35 ± 1.50",
    ]
    assert _table_row(report, "| m | lazy |") == ["m", "lazy", "0.0 ± 0.0", "NA", "NA"]
    sources = {line.split("**")[1]: line for line in report.splitlines() if line.startswith("- **")}
    paper, repo = sources["ExcessCode (paper)"], sources["ExcessCode (repo)"]
    assert "§5.1 and Table 3" in paper and "median line coverage" in paper and "`excess_code`" in paper
    assert "pass_k.py" in repo and "v2 evaluation code" in repo and "`excess_code_repo`" in repo
    assert "Table 3" not in repo
    by_split = _table_row(report, "| Split | Problems |")
    assert by_split[5:] == ["ExcessCode (paper)", "ExcessCode (repo)", "ExcessCode (changed lines, ours)"]
    assert _table_row(report, "| descriptive | 2 | 10 |")[5:] == ["7.25", "12.35", "20.00"]


def test_legacy_results_are_read_under_todays_names():
    """`excess_code` of an older file is the repository's metric: it must not show as the paper's."""
    report = render_report("m", "canitedit", {"metrics": {"descriptive": LEGACY}})
    assert _table_row(report, "| m | descriptive |") == ["m", "descriptive", "25.0", "7.25", "12.35 ± 1.50"]
    older = {k: v for k, v in LEGACY.items() if k not in ("excess_code_v1", "mean_median_coverage")}
    report = render_report("m", "canitedit", {"metrics": {"descriptive": older}})
    assert _table_row(report, "| m | descriptive |")[3:] == ["NA", "12.35 ± 1.50"]


def test_pass_at_k_is_a_percentage_everywhere():
    report = render_report("m", "canitedit", {"metrics": METRICS, "per_problem": PER_PROBLEM})
    by_split = _table_row(report, "| Split | Problems |")
    assert by_split[3:5] == ["pass@1 (%)", "pass@5 (%)"] and "pass@1_stderr" not in by_split
    assert _table_row(report, "| descriptive | 2 | 10 |")[3:5] == ["25.0 ± 12.5", "50.0 ± 25.0"]
    assert _table_row(report, "| p1 |") == ["p1", "descriptive", "2/5", "40.0", "3.00", "4.50"]
    assert "0.25" not in report and "0.4 " not in report


def test_no_per_problem_section_without_rows():
    console = render_report("m", "canitedit", {"metrics": METRICS})
    assert "Per problem" not in console and "## Execution statuses" in console
    assert "Per problem" not in render_report("m", "canitedit", {"metrics": METRICS, "per_problem": []})
