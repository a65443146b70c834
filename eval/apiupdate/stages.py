"""The execute and score stages of `python -m eval.run benchmark=apiupdate`.

Samples run in the enforcing sandbox (`enforce.run_enforced`: the compile stage, then the
modified API installed around the candidate); each execution record carries the outcome
class, whether the sample compiled, passed and adopted the new API, and the call counts, and
is appended to samples.jsonl as its chunk finishes (a killed run resumes). Scoring gives
Compiles/Pass/Adoption/Workaround@k per split and per modification type, and the taxonomy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.apiupdate.catalogue import Modification
from eval.apiupdate.enforce import EnforcedJob, run_enforced
from eval.apiupdate.metrics import score_outcomes
from eval.execute import CHUNK
from eval.samples import SampleStore


def job_for(problem: Problem, code: str) -> EnforcedJob:
    extra = problem.extra
    return EnforcedJob(
        code,
        Modification.from_spec(extra["modification"]),
        problem.tests,
        extra["entry_point"],
        extra.get("n_params"),
    )


def execute_apiupdate(
    store: SampleStore,
    problems: dict[str, Problem],
    sandbox: Sandbox,
    limits: SandboxLimits,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Execute every sample without an execution record; returns how many ran."""
    done = store.of_type("execution")
    todo = [(k, s) for k, s in sorted(store.of_type("sample").items()) if k not in done]
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start : start + CHUNK]
        jobs = [job_for(problems[key[0]], sample["code"]) for key, sample in chunk]
        for (key, _), outcome in zip(chunk, run_enforced(sandbox, jobs, limits), strict=True):
            record: dict[str, Any] = {
                "type": "execution",
                "problem": key[0],
                "split": key[1],
                "index": key[2],
            }
            record.update(outcome.as_dict())
            record.update(exit_code=None, duration_s=0.0, stderr="")
            store.append(record)
        if progress:
            progress(len(chunk))
    return len(todo)


def score_apiupdate(
    store: SampleStore, problems: dict[str, Problem], splits: Sequence[str], ks: Sequence[int]
) -> dict[str, Any]:
    """{"metrics": {split: ...}, "per_problem": [...]} from the execution records."""
    by_split: dict[str, list[dict[str, Any]]] = {s: [] for s in splits}
    per_problem: dict[tuple[str, str], list[int]] = {}
    for (pid, split, _), record in sorted(store.of_type("execution").items()):
        if split not in by_split or pid not in problems:
            continue
        by_split[split].append({**record, "type": problems[pid].extra["type"]})
        row = per_problem.setdefault((pid, split), [0, 0, 0, 0])
        row[0] += 1
        row[1] += int(record["compiles"])
        row[2] += int(record["passed"])
        row[3] += int(record["adopted"])
    metrics = {split: score_outcomes(records, ks) for split, records in by_split.items() if records}
    table = [
        {
            "problem": pid,
            "name": problems[pid].name,
            "split": split,
            "n": n,
            "compiled": c,
            "passed": p,
            "adopted": a,
            "pass@1": p / n,
        }
        for (pid, split), (n, c, p, a) in sorted(per_problem.items())
    ]
    return {"metrics": metrics, "per_problem": table}
