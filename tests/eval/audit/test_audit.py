"""`python -m eval.audit`: hand-made problems where each check must fire, the shipped fixtures with
Table 1, HumanEvalFix in every language (Go and Rust where their toolchains are), unsolved problems
from model results, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_eval_run import run_eval

from core.benchmarks import load_benchmark
from core.sandbox import SandboxLimits, make_sandbox
from eval import languages
from eval.audit.audit import AuditOptions, run_audit
from eval.audit.linecoverage import unavailable
from eval.audit.report import render
from eval.toolchains import sandbox_paths

CASES = REPO / "tests" / "fixtures" / "audit_cases.jsonl"


@pytest.fixture(scope="module")
def sandbox():
    with make_sandbox(workers=2, read_only=sandbox_paths()) as sb:
        yield sb


@pytest.fixture(scope="module")
def cases(sandbox):
    problems = load_benchmark("canitedit", str(CASES)).problems
    audit = run_audit("cases", problems, sandbox, SandboxLimits(timeout_s=15), AuditOptions(repeats=12))
    return audit, {r["name"]: r for r in audit["problems"]}


def test_each_check_fires_on_its_hand_made_problem(cases):
    audit, rows = cases
    assert rows["reference_fails"]["pass_after"] is False
    assert rows["before_passes"]["fail_before"] is False
    miss = rows["tests_miss_the_edit"]
    assert miss["fail_before"] is False and miss["diff_coverage"] == 0.0
    blind = rows["blind_outside_the_diff"]
    assert blind["pass_after"] and blind["fail_before"] and blind["scope"]["blind_outside"] is True
    assert blind["mutation"]["outside"]["uncovered"] >= 3 and blind["coverage"] < 75
    assert rows["flaky_test"]["flaky"] is True
    clusters = audit["independence"]["clusters"]
    ids = {rows["shared_codebase_remove"]["id"], rows["shared_codebase_total"]["id"]}
    assert any(ids <= set(c) for c in clusters) and audit["totals"]["distinct_contexts"] == 6
    for name in ("shared_codebase_remove", "shared_codebase_total"):
        assert (
            rows[name]["pass_after"]
            and rows[name]["fail_before"]
            and not rows[name]["scope"]["blind_outside"]
        )
    t = audit["totals"]  # a mutant on a line no test runs is a regression nobody would notice
    assert t["kill_rate_outside"] < t["kill_rate_outside_covered"]
    report = render(audit, [])
    assert "counts as surviving" in report
    assert "| distinct contexts | 6 / 7 | 103 / 105 (cited; its pairs give 102) | 86 / 108 |" in report
    assert "- [ ] **Validated**" in report and "mutation testing" in report
    # the published audit's D1-D6, each decided where it can be offline and saying so where not
    assert "- [ ] **D1 languages in proportion to ecosystem usage**: unmet" in report
    assert "Python 100.0% of the problems" in report
    # D2 and D3 from the RQ1 labels (the deterministic rules): seven small functions, all algorithmic,
    # fixes and features only
    assert (
        "- [ ] **D2 domains anchored to real editing workloads**: unmet; each Copilot Arena share" in report
    )
    assert "backend + frontend 0.0% (46% in Copilot Arena)" in report
    assert (
        "- [ ] **D3 maintenance, documentation and testing edits**: unmet; docs + chore + build + ci 0 of 7"
        in report
    )
    assert "Labels from the deterministic rules" in report and "## Table 1: representativeness" in report
    assert (
        audit["domains"] == {"Algorithm Design and Problem Solving": 7}
        and audit["classifier"]["source"] == "rules"
    )
    reference = rows["reference_fails"]  # corrective in its taxonomy: a fix, and the rule says so
    assert (reference["intent"], reference["labelled_by"]["intent"]) == (
        "fix",
        "taxonomy.change_kind=corrective",
    )
    assert reference["language_label"] == "Python" and reference["ai_subcategory"] is None
    assert "**D4 preservation of existing behaviour" in report and "**D5 problem independence" in report
    # D6: small functions, no agent orchestration or prompt templates, each row saying so
    assert audit["paradigms"] == {"agent_orchestration": 0, "prompt_templates": 0, "problems": 0}
    assert reference["paradigms"] == {"agent_orchestration": None, "prompt_templates": None}
    assert (
        "- [ ] **D6 emerging development paradigms (agent orchestration, prompt templates)**: unmet; "
        "agent orchestration 0, prompt-template management 0 problem(s)" in report
    )


def test_the_shipped_fixtures_with_table1(sandbox):
    problems = load_benchmark("fixtures").problems
    options = AuditOptions(repeats=1, mutants_per_region=4, scope=False)
    audit = run_audit("fixtures", problems, sandbox, SandboxLimits(timeout_s=15), options)
    t = audit["totals"]
    assert t["problems"] == 14 and t["pass_after"] == 14 and t["fail_before"] == 14
    assert t["coverage_measured"] == 14 and t["mutants_run"] > 0
    table = audit["distributions"]
    assert sum(table["by_change_kind"].values()) == 14 and table["lines_before"]["mean"] > 0
    assert "Levenshtein" in render(audit, [])


@pytest.mark.parametrize("language", ["python", "js", "cpp", "java", "go", "rust"])
def test_humanevalfix_every_language(sandbox, language):
    if language in ("go", "rust") and (why := languages.unavailable(language)) is not None:
        pytest.skip(f"HumanEvalFix {language} cannot run here: {why}")
    problems = load_benchmark("humanevalfix", languages=[language]).problems[:3]
    options = AuditOptions(repeats=1, mutants_per_region=3, scope=language == "python")
    audit = run_audit("humanevalfix", problems, sandbox, SandboxLimits(timeout_s=60), options)
    for row in audit["problems"]:
        assert row["pass_after"] and row["fail_before"], row["id"]
        assert row["assertions"] >= 1
        if unavailable(language) is None:
            assert row["coverage"] is not None and row["coverage"] > 50, row
        else:
            assert row["coverage_error"] == unavailable(language)
    if language == "python":
        t = audit["totals"]
        assert t["mutants_run"] > 0
        # the published audit's cut: diff-region coverage below 75 %, its figures under EDIT-Bench
        diff = [r["diff_coverage"] for r in audit["problems"] if r.get("diff_coverage") is not None]
        assert (t["below_75"], t["diff_coverage_measured"]) == (sum(c < 75 for c in diff), len(diff))
        report = render(audit, [])
        assert f"| suites below 75% diff-region coverage | {t['below_75']} of {len(diff)} (" in report
        assert report.count("| — | 39 of 91 (42.9%) |") == 1 and "| — | 85.7% |" in report
        assert "| diff-region coverage (mean) |" in report and "| — | 64.9% |" in report


def test_unsolved_problems_and_recovered_references(tmp_path, sandbox):
    bench = [
        "benchmark=canitedit",
        f"benchmark.path={CASES}",
        "gen.n=1",
        "score.ks=[1]",
        "score.excess_code=false",
    ]
    run_eval([*bench, "model=identity", f"out={tmp_path / 'identity'}"])
    fixed = {"problem": "1", "completions": ["def double(x):\n    return x * 2\n"]}
    (tmp_path / "replay.jsonl").write_text(json.dumps(fixed) + "\n")
    run_eval(
        [*bench, "model=replay", f"model.path={tmp_path / 'replay.jsonl'}", f"out={tmp_path / 'replay'}"]
    )
    problems = load_benchmark("canitedit", str(CASES)).problems
    options = AuditOptions(repeats=1, mutation=False, scope=False,
                           model_results=[str(tmp_path / "identity"), str(tmp_path / "replay")])  # fmt: skip
    audit = run_audit("cases", problems, sandbox, SandboxLimits(timeout_s=15), options)
    unsolved = audit["unsolved"]
    assert "1" not in unsolved["unsolved"]  # the replayed fix passes
    assert unsolved["recovered_references"]["1"].startswith("def double")
    assert unsolved["unsolved"]["7"]["cause"] in (
        "reference_fails",
        "unknown",
    )  # flaky: it depends on the draw
    assert set(unsolved["unsolved"]) >= {"4", "5", "6"}
    assert "3" not in unsolved["unsolved"]  # its tests miss the edit: the unedited code "solves" it


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eval.audit", *args], cwd=cwd, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def test_cli_takes_a_file_and_writes_the_audit(tmp_path):
    done = _cli([f"benchmark={CASES}", f"out={tmp_path / 'a'}", "repeats=1", "mutation.per_region=2"], REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    audit = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert {"id", "language", "pass_after", "fail_before", "coverage", "diff_coverage", "intent", "domain",
            "ai_subcategory", "labelled_by"} <= set(audit["problems"][0])  # fmt: skip
    assert (tmp_path / "a" / "report.md").is_file() and (tmp_path / "a" / "coverage.png").is_file()
    missing = _cli(
        [f"benchmark={CASES}", f"out={tmp_path / 'b'}", f"model_results=[{tmp_path / 'nope'}]"], REPO
    )
    assert (
        missing.returncode == 2
        and missing.stderr.strip().startswith("error:")
        and "samples.jsonl" in missing.stderr
    )


def test_editbench_problems_are_reported_not_run(tmp_path):
    fixture = REPO / "tests" / "fixtures" / "editbench_sample.jsonl"
    done = _cli(["benchmark=editbench", f"benchmark.path={fixture}", f"out={tmp_path}", "repeats=1"], REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    audit = json.loads((tmp_path / "audit.json").read_text())
    assert audit["totals"]["not_runnable"] == audit["totals"]["problems"] == 5
    assert all(r["pass_after"] is None and r["not_runnable"] for r in audit["problems"])
    assert audit["totals"]["assertions_median"] is not None and audit["distributions"]["problems"] == 5
    assert "not run here: 5" in (tmp_path / "report.md").read_text()


def test_the_papers_tables_regenerate_from_finished_audits(tmp_path):
    """`python -m eval.tables audit RUN...` on two real audits: Table 1 and the RQ2/RQ3 figures."""
    fixture = REPO / "tests" / "fixtures" / "editbench_sample.jsonl"
    runs = {"cases": [f"benchmark={CASES}", "repeats=1", "mutation.per_region=2"],
            "editbench": ["benchmark=editbench", f"benchmark.path={fixture}", "repeats=1"]}  # fmt: skip
    for name, args in runs.items():
        done = _cli([*args, f"out={tmp_path / name}"], REPO)
        assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run(
        [sys.executable, "-m", "eval.tables", "audit", str(tmp_path / "cases"), str(tmp_path / "editbench")],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Table 1" in done.stdout and "Traditional ML Dev" in done.stdout
    assert str(tmp_path / "cases") in done.stdout and str(tmp_path / "editbench") in done.stdout
    assert "75%" in done.stdout


def test_bad_inputs_stop_before_the_audit_runs(tmp_path):
    row = json.loads(CASES.read_text().splitlines()[0])
    (tmp_path / "tax.jsonl").write_text(json.dumps({**row, "taxonomy": "corrective"}) + "\n")
    done = _cli([f"benchmark={tmp_path / 'tax.jsonl'}", f"out={tmp_path / 'o1'}"], REPO)
    assert done.returncode == 2 and "taxonomy" in done.stderr and "Traceback" not in done.stderr
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "samples.jsonl").write_text("[1, 2]\n")
    done = _cli([f"benchmark={CASES}", f"out={tmp_path / 'o2'}", f"model_results=[{tmp_path / 'm'}]"], REPO)
    assert (
        done.returncode == 2
        and "not a record" in done.stderr
        and not (tmp_path / "o2" / "audit.json").exists()
    )
    (tmp_path / "file").write_text("x")
    done = _cli([f"benchmark={CASES}", f"out={tmp_path / 'file'}"], REPO)
    assert done.returncode == 2 and "is a file" in done.stderr


def test_d3_and_d6_need_what_the_paper_asks_not_any_one_problem():
    """One docs problem in four is under AIDev's 31.4%, and an LLM SDK import is no agent orchestration:
    neither ticks its desideratum (they used to); reaching the shares, and each paradigm, does."""
    from eval.audit.report import _desiderata

    totals = {"problems": 4, "not_runnable": 4, "languages": {"python": 2, "ts": 1, "go": 1},
              "distinct_contexts": 4, "pass_after": 0}  # fmt: skip
    text = "\n".join(_desiderata({"totals": totals, "intents": {"feat": 3, "docs": 1}, "emerging": 1}))
    assert (
        "- [ ] **D3 maintenance, documentation and testing edits**: unmet; docs + chore + build + ci 1 of 4"
        in text
    )
    assert (
        "- [ ] **D6 emerging development paradigms (agent orchestration, prompt templates)**: undecided"
        in text
    )
    assert "- [ ] **D1 languages" in text and "Python 50.0%" in text  # 3 languages, one above 30%
    found = {"agent_orchestration": 1, "prompt_templates": 1, "problems": 1}
    audit = {"totals": totals, "intents": {"docs": 1, "ci": 1, "test": 1, "feat": 1}, "paradigms": found}
    text = "\n".join(_desiderata(audit))
    assert (
        "- [x] **D3 maintenance, documentation and testing edits**: met; docs + chore + build + ci 2 of 4"
        in text
    )
    assert "- [x] **D6 emerging development paradigms" in text
    found["prompt_templates"] = 0
    assert "- [ ] **D6 emerging development paradigms" in "\n".join(_desiderata(audit))
