"""The score stage: pass@k and ExcessCode per split, a per-problem table, results.json."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.excess_code import (
    CoverageError,
    CoverageReport,
    coverage_reports,
    excess_code,
    excess_code_changed_lines_of,
    excess_code_of_problem,
    excess_code_repo,
    excess_code_repo_of,
    excess_code_repo_stderr,
)
from eval.execute import declared_unverified
from eval.metrics import aggregate_pass_at_k
from eval.samples import Key, SampleStore, run_missing


def measure_coverage(
    store: SampleStore,
    problems: dict[str, Problem],
    sandbox: Sandbox,
    limits: SandboxLimits,
    progress: Callable[[int], None] | None = None,
    probes: bool = True,
) -> int:
    """Coverage of every passing Python sample not measured yet, through the resumable loop: taken
    from its verdict run where that run measured it, else run in the sandbox's worker pool: split
    under probes where the verdict run was split and ``probes`` (score.coverage=probes), else under
    coverage.py; returns how many were measured."""
    samples = store.of_type("sample")
    executions = store.of_type("execution")
    # longest verdict runs first: traced, they dominate, and started last one would run alone
    todo = [(k, problems[k[0]]) for k, e in sorted(executions.items()) if e["passed"]]
    todo.sort(key=lambda item: -float(executions[item[0]].get("duration_s") or 0.0))

    def work(chunk: list[tuple[Key, Problem]]) -> list[dict[str, Any]]:
        python = [key for key, problem in chunk if problem.language == "python"]
        reports = {
            key: _measured(executions[key], samples[key]["code"], problems[key[0]].tests) for key in python
        }
        python = [key for key in python if reports[key] is None]
        jobs = [(samples[key]["code"], problems[key[0]].tests) for key in python]
        unverified = declared_unverified(sandbox, [problems[key[0]] for key in python])
        split = [probes and executions[key].get("mode") == "split" for key in python]
        measured = coverage_reports(sandbox, jobs, limits, unverified, split)
        reports |= dict(zip(python, measured, strict=True))
        return [_coverage(problem, samples[key]["code"], reports.get(key)) for key, problem in chunk]

    return run_missing(store, "coverage", todo, work, progress)


def _measured(execution: dict, code: str, tests: str) -> CoverageReport | CoverageError | None:
    """The coverage the verdict run measured (a split run with score.coverage=probes), if any."""
    if "coverage" not in execution:
        return None
    try:
        return CoverageReport.from_measured(execution["coverage"], len((code + "\n" + tests).splitlines()))
    except CoverageError as err:
        return err


def pending_coverage(store: SampleStore) -> int:
    measured = store.of_type("coverage")
    return sum(e["passed"] and k not in measured for k, e in store.of_type("execution").items())


def _coverage(problem: Problem, code: str, report) -> dict[str, Any]:
    if report is None:
        return {"error": "coverage is measured for Python only"}
    if isinstance(report, CoverageError):
        return {"error": str(report)[:500]}
    return {
        "uncovered": len(report.reported_missing),
        "percent": report.percent,
        "excess": excess_code_repo_of(problem.before, code, problem.tests, report),
        "excess_changed": excess_code_changed_lines_of(problem.before, code, report),
    }


def _judged(record: dict) -> str:
    """How a passing record was judged: "split", "split, delegated" (a check decided by the
    program's own code, such as == between two of its objects), "in_process" or "command"."""
    mode = record.get("mode", "in_process")  # records written before split runs existed
    if mode == "split" and record.get("delegated_checks"):
        return "split, delegated"
    return mode


def score(store: SampleStore, problems: dict[str, Problem], splits: Sequence[str], ks: Sequence[int]) -> dict:
    """{"metrics": {split: {...}}, "per_problem": [...]} from the records in `store`."""
    executions, coverage = store.of_type("execution"), store.of_type("coverage")
    counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    statuses: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    # passes by how they were judged (docs/sandbox.md): split, split with delegated checks, in process, command
    judged: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    excess: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    excess_changed: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    percents: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for key, record in sorted(executions.items()):  # key order: sums do not depend on completion order
        problem, split, _ = key
        if split not in splits or problem not in problems:
            continue
        counts[split][problem][0] += 1
        counts[split][problem][1] += int(record["passed"])
        statuses[split][record["status"]] += 1
        if record["passed"]:
            judged[split][_judged(record)] += 1
        cov = coverage.get(key)
        if record["passed"] and cov is not None and "excess" in cov:
            excess[split][problem].append(cov["excess"])
            excess_changed[split][problem].append(cov["excess_changed"])
            percents[split][problem].append(cov["percent"])
    metrics: dict[str, dict[str, Any]] = {}
    per_problem = []
    for split in splits:
        per = {p: (n, c) for p, (n, c) in counts[split].items()}
        if not per:
            continue
        usable_ks = [k for k in ks if k <= min(n for n, _ in per.values())]
        m: dict[str, Any] = aggregate_pass_at_k(per, usable_ks)
        m.update(
            # names and sources of the two published metrics: core.excess_metrics
            excess_code=excess_code(percents[split]),
            excess_code_repo=excess_code_repo(excess[split]),
            excess_code_repo_stderr=excess_code_repo_stderr(excess[split]),
            excess_code_changed_lines=excess_code_repo(excess_changed[split]),
            problems=len(per),
            samples=sum(n for n, _ in per.values()),
            statuses=dict(sorted(statuses[split].items())),
            passes_by_mode=dict(sorted(judged[split].items())),
        )
        metrics[split] = m
        for problem, (n, c) in sorted(per.items()):
            ratios = excess[split].get(problem, [])
            percents_of = percents[split].get(problem, [])
            per_problem.append(
                {
                    "problem": problem,
                    "name": problems[problem].name,
                    "split": split,
                    "n": n,
                    "passed": c,
                    "pass@1": c / n,
                    "excess_code": excess_code_of_problem(percents_of),
                    "excess_code_repo": 100 * sum(ratios) / len(ratios) if ratios else None,
                }
            )
    return {"metrics": metrics, "per_problem": per_problem}
