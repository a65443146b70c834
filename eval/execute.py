"""Programs with their tests in the sandbox: the verdicts of the kinds whose problems are one
program plus tests (CanItEdit, HumanEvalFix, the fixtures, EDIT-Bench).

Cheap checks come first and fail a sample without running it (empty, too large, Python that
does not compile); everything else runs in the sandbox, Python in its interpreter harness (split
where the problem allows it: eval/split_mode.py) and other languages as their toolchain's command
line, whose tests write back the run token (eval/languages/).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from core.problems import Problem
from core.sandbox import ExecutionResult, Sandbox, SandboxLimits
from core.sandbox.declared import unverified_flags
from eval.excess_code import measured_runs
from eval.languages import command_job
from eval.split_mode import benchmark_modules, run_modes

log = logging.getLogger(__name__)


def precheck(code: str, language: str, max_bytes: int) -> tuple[str, str] | None:
    """(status, detail) for a sample that must fail without running, else None."""
    if not code.strip():
        return "empty", "the completion has no code"
    if len(code.encode("utf-8", errors="replace")) > max_bytes:
        return "too_large", f"the code exceeds {max_bytes} bytes"
    if language == "python":
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(code, "<completion>", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
            return "syntax_error", f"{type(err).__name__}: {err}"
    return None


def verdict(result: ExecutionResult) -> dict[str, Any]:
    """The execution record of a run; a passing split run measured for ExcessCode keeps its coverage."""
    record = {
        "status": result.status,
        "passed": result.passed,
        "exit_code": result.exit_code,
        "duration_s": round(result.duration_s, 4),
        "detail": result.detail,
        "stderr": result.stderr[-2000:],
        "mode": result.mode or "command",
        "fresh_scratch": result.fresh_scratch,  # False: the local backend, where a run's files can reach the next
    }
    if result.mode == "split":
        record.update(
            tests_passed=result.tests_passed,
            tests_total=result.tests_total,
            delegated_checks=result.delegated_checks,
        )
    if result.passed and result.coverage is not None:
        record["coverage"] = result.coverage
    return record


def early_verdict(status: str, detail: str) -> dict[str, Any]:
    """The verdict of a sample that fails without running (see `precheck`)."""
    return {
        "status": status,
        "passed": False,
        "exit_code": None,
        "duration_s": 0.0,
        "detail": detail,
        "stderr": "",
    }


def declared_unverified(sandbox: Sandbox, problems: Sequence[Problem]) -> list[bool]:
    """Per problem, whether it runs in the declared unverified mode: its own code (prelude,
    `before`, reference, tests; never a sample's) imports a module with raw memory access."""
    return unverified_flags(sandbox, [(p.prelude, p.before, p.after, p.tests) for p in problems])


def run_programs(
    sandbox: Sandbox,
    jobs: Sequence[tuple[Problem, str]],
    limits: SandboxLimits,
    coverage: bool = False,
    coverage_limits: SandboxLimits | None = None,
) -> list[ExecutionResult]:
    """Run each (problem, program) with the problem's tests: Python in the interpreter harness, other
    languages as their toolchain's command line (in parallel, each with its own limits).
    ``coverage``: Python runs that run split without helpers also measure their lines
    (eval/excess_code.py), and passing ones with helpers are measured by a second split run at once
    (under ``coverage_limits``, default ``limits``), so that their coverage run waits for no later
    verdict. (Runs in process are measured under coverage.py while scoring, all together: a server
    that measures them is of another kind, and alternating would restart the workers' servers.)"""
    python = [(i, p, c) for i, (p, c) in enumerate(jobs) if p.language == "python"]
    results: list[ExecutionResult | None] = [None] * len(jobs)
    problems = list({p.id: p for _, p, _ in python}.values())
    modes = run_modes(sandbox, problems, limits) if problems else {}
    # per problem, not per sample: each parses the problem's texts (an RL batch holds many samples
    # of each problem, and a host that parses them competes with the sandbox's workers for CPU)
    unverified = dict(zip([p.id for p in problems], declared_unverified(sandbox, problems), strict=True))
    modules = {p.id: benchmark_modules(p) for p in problems}
    for (i, _, _), result in zip(
        python,
        sandbox.run_many(
            [(c, p.tests) for _, p, c in python],
            limits=limits,
            unverified=[unverified[p.id] for _, p, _ in python],
            split=[modes[p.id].split for _, p, _ in python],
            # where the tests take helpers from the benchmark's text, the program's copies never run
            # in a split run: their coverage comes from a second run, without them (_measure_the_rest)
            coverage=[coverage and modes[p.id].split and not p.helpers for _, p, _ in python],
            helpers=[p.helpers for _, p, _ in python],
            modules=[modules[p.id] for _, p, _ in python],
        ),
        strict=True,
    ):
        results[i] = result
    if coverage:
        _measure_the_rest(sandbox, python, results, coverage_limits or limits, unverified)

    split = sandbox.split_commands()  # JavaScript's tests apart from the program, where Landlock allows

    def run_command(problem: Problem, code: str) -> ExecutionResult:
        job = command_job(problem.language, code, problem.tests, problem.helpers, split)
        overrides = {k: v for k, v in (("memory_mb", job.memory_mb), ("timeout_s", job.timeout_s)) if v}
        if job.trusted_argv is not None:
            return sandbox.run_split_command(
                job.argv, job.files, job.trusted_argv, job.trusted_input, limits=replace(limits, **overrides)
            )
        return sandbox.run_command(
            job.argv, job.files, limits=replace(limits, **overrides), run_token=job.run_token
        )

    commands = [(i, p, c) for i, (p, c) in enumerate(jobs) if p.language != "python"]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as threads:  # one per sandbox worker
        for (i, _, _), result in zip(
            commands, threads.map(lambda job: run_command(*job[1:]), commands), strict=True
        ):
            results[i] = result
    assert all(r is not None for r in results)  # every job is Python or a command
    return results  # type: ignore[return-value]


def _measure_the_rest(
    sandbox: Sandbox,
    python: Sequence[tuple[int, Problem, str]],
    results: list[ExecutionResult | None],
    limits: SandboxLimits,
    unverified: dict[str, bool],
) -> None:
    """Each passing split run that did not measure its lines (the benchmark's helpers served its
    tests) gets them from a second split run without the helpers, as the score stage would run it,
    kept with its verdict."""
    todo = [(i, p, c) for i, p, c in python if _unmeasured_split(results[i])]
    if not todo:
        return
    measured = measured_runs(
        sandbox, [(c, p.tests) for _, p, c in todo], limits, [unverified[p.id] for _, p, _ in todo], True
    )
    for (i, _, _), lines in zip(todo, measured, strict=True):
        results[i] = replace(results[i], coverage=lines)  # type: ignore[arg-type]


def _unmeasured_split(result: ExecutionResult | None) -> bool:
    return result is not None and result.passed and result.mode == "split" and result.coverage is None


def program_verdicts(
    jobs: Sequence[tuple[Problem, str]],
    sandbox: Sandbox,
    limits: SandboxLimits,
    max_code_bytes: int,
    coverage: bool = False,
    coverage_limits: SandboxLimits | None = None,
) -> list[dict[str, Any]]:
    """A verdict per (problem, code): cheap checks first, then the rest run together."""
    early = [precheck(code, problem.language, max_code_bytes) for problem, code in jobs]
    runs = [job for job, e in zip(jobs, early, strict=True) if e is None]
    results = iter(run_programs(sandbox, runs, limits, coverage, coverage_limits) if runs else [])
    return [early_verdict(*e) if e else verdict(next(results)) for e in early]
