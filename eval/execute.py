"""The execute stage: run every generated sample against its problem's tests in the sandbox.

Cheap checks come first and fail a sample without running it (empty, too large, Python
that does not compile); everything else runs in the sandbox, a chunk at a time, and each
result is appended to samples.jsonl as soon as its chunk finishes.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from core.problems import Problem
from core.sandbox import ExecutionResult, Sandbox, SandboxLimits
from eval.languages import command_job
from eval.samples import Key, SampleStore

log = logging.getLogger(__name__)
CHUNK = 64


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


def _record(key: Key, result: ExecutionResult) -> dict[str, Any]:
    problem, split, index = key
    return {
        "type": "execution",
        "problem": problem,
        "split": split,
        "index": index,
        "status": result.status,
        "passed": result.passed,
        "exit_code": result.exit_code,
        "duration_s": round(result.duration_s, 4),
        "detail": result.detail,
        "stderr": result.stderr[-2000:],
    }


def run_programs(
    sandbox: Sandbox, jobs: Sequence[tuple[Problem, str]], limits: SandboxLimits
) -> list[ExecutionResult]:
    """Run each (problem, program) with the problem's tests: Python in the interpreter harness, other
    languages as their toolchain's command line (in parallel, each with its own limits)."""
    python = [(i, p, c) for i, (p, c) in enumerate(jobs) if p.language == "python"]
    results: list[ExecutionResult | None] = [None] * len(jobs)
    for (i, _, _), result in zip(
        python, sandbox.run_many([(c, p.tests) for _, p, c in python], limits=limits), strict=True
    ):
        results[i] = result

    def run_command(problem: Problem, code: str) -> ExecutionResult:
        job = command_job(problem.language, code, problem.tests)
        overrides = {k: v for k, v in (("memory_mb", job.memory_mb), ("timeout_s", job.timeout_s)) if v}
        return sandbox.run_command(job.argv, job.files, limits=replace(limits, **overrides))

    commands = [(i, p, c) for i, (p, c) in enumerate(jobs) if p.language != "python"]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as threads:  # one per sandbox worker
        for (i, _, _), result in zip(
            commands, threads.map(lambda job: run_command(*job[1:]), commands), strict=True
        ):
            results[i] = result
    assert all(r is not None for r in results)  # every job is Python or a command
    return results  # type: ignore[return-value]


def execute_samples(
    store: SampleStore,
    problems: dict[str, Problem],
    sandbox: Sandbox,
    limits: SandboxLimits,
    max_code_bytes: int,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Execute every sample that has no execution record yet; returns how many ran or failed."""
    done = store.of_type("execution")
    todo = [(k, s) for k, s in sorted(store.of_type("sample").items()) if k not in done]
    pending: list[tuple[Key, Problem, str]] = []
    for key, sample in todo:
        problem = problems[key[0]]
        early = precheck(sample["code"], problem.language, max_code_bytes)
        if early is None:
            pending.append((key, problem, sample["code"]))
            continue
        status, detail = early
        store.append(
            {
                "type": "execution",
                "problem": key[0],
                "split": key[1],
                "index": key[2],
                "status": status,
                "passed": False,
                "exit_code": None,
                "duration_s": 0.0,
                "detail": detail,
                "stderr": "",
            }
        )
        if progress:
            progress(1)
    for start in range(0, len(pending), CHUNK):
        chunk = pending[start : start + CHUNK]
        for (key, _, _), result in zip(
            chunk, run_programs(sandbox, [(p, c) for _, p, c in chunk], limits), strict=True
        ):
            store.append(_record(key, result))
        if progress:
            progress(len(chunk))
    return len(todo)
