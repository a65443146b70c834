"""Validity: the reference passes its tests, the code before the edit fails them, and neither flips.

Each program runs `repeats` times (default 3). A problem is `pass_after` when every run of the
reference passes, `fail_before` when no run of the before code does, and `flaky` when the runs of
either disagree. A before run that times out is not repeated (a program that never ends keeps not
ending; repeating it only costs the timeout again); its status is kept, so the report can say
which problems fail by timeout.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from core.problems import Problem
from core.sandbox import SandboxLimits
from eval.execute import run_programs


def check_validity(
    problems: Sequence[Problem], sandbox, limits: SandboxLimits, repeats: int = 3
) -> dict[str, dict]:
    """Per problem id: pass_after, fail_before, flaky, and the statuses of every run."""
    runs: dict[str, dict[str, list]] = {p.id: {"after": [], "before": []} for p in problems}
    first = [(p, side) for p in problems for side in ("after", "before")]
    _run(first, sandbox, limits, runs)
    again = [  # a code before the edit that timed out is not run again
        (p, side)
        for _ in range(repeats - 1)
        for p in problems
        for side in ("after", "before")
        if not (side == "before" and runs[p.id]["before"][0].status == "timeout")
    ]
    _run(again, sandbox, limits, runs)
    return {p.id: _verdict(runs[p.id]) for p in problems}


def _run(jobs: list[tuple[Problem, str]], sandbox, limits: SandboxLimits, runs: dict) -> None:
    programs = [(p, p.program(getattr(p, side))) for p, side in jobs]
    for (problem, side), result in zip(jobs, run_programs(sandbox, programs, limits), strict=True):
        runs[problem.id][side].append(result)


def _verdict(runs: dict[str, list]) -> dict[str, Any]:
    after = [r.passed for r in runs["after"]]
    before = [r.passed for r in runs["before"]]
    return {
        "pass_after": all(after),
        "fail_before": not any(before),
        "flaky": len(set(after)) > 1 or len(set(before)) > 1,
        "after_statuses": dict(Counter(r.status for r in runs["after"])),
        "before_statuses": dict(Counter(r.status for r in runs["before"])),
        "before_timeout": any(r.status == "timeout" for r in runs["before"]),
        "reference_runtime_s": round(min(r.duration_s for r in runs["after"]), 4),
        "reference_error": next((r.detail or r.stderr[-300:] for r in runs["after"] if not r.passed), None),
    }
