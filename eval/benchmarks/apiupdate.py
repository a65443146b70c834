"""The API-update editing benchmark (the model-editing robustness study's, built by
`python -m eval.build_apiupdate`): each problem is solved against a modified API.

A sample runs in the enforcing sandbox (`eval/apiupdate/enforce.py`: the compile stage, then the
modified API installed around the candidate and the old one removed); its verdict carries the
outcome class, whether it compiled, passed and adopted the new API, and the call counts. Scored
as Compiles/Pass/Adoption/Workaround@k per split and per modification type, with the taxonomy.
"""

from __future__ import annotations

from typing import Any

from core.benchmarks.apiupdate import ApiUpdateOptions, ApiUpdatePayload
from core.problems import Problem
from eval.apiupdate.catalogue import unmodified
from eval.apiupdate.enforce import EnforcedJob, run_enforced
from eval.apiupdate.metrics import score_outcomes
from eval.apiupdate.report import render_eval_report
from eval.benchmarks.base import BenchmarkKind, ExecContext, Job, ScoreContext, Scored


def enforced_job(problem: Problem, code: str, env: str = "modified") -> EnforcedJob:
    """The job of `code` for `problem` in the modified API's environment, or in the unmodified one
    (the API as it is, its calls counted)."""
    payload: ApiUpdatePayload = problem.payload
    mod = payload.modification
    if env == "unmodified":
        mod = unmodified(mod.api)
    return EnforcedJob(code, mod, problem.tests, payload.entry_point, payload.n_params)


class ApiUpdate(BenchmarkKind):
    name = "apiupdate"
    options = ApiUpdateOptions

    def execute(self, jobs: list[Job], ctx: ExecContext) -> list[dict[str, Any]]:
        enforced = [enforced_job(j.problem, j.code) for j in jobs]
        return [
            {**o.as_dict(), "exit_code": None, "duration_s": 0.0, "stderr": ""}
            for o in run_enforced(ctx.sandbox, enforced, ctx.limits)
        ]

    def score(self, ctx: ScoreContext) -> Scored:
        problems, by_split = ctx.problems, {s: [] for s in ctx.splits}
        per_problem: dict[tuple[str, str], list[int]] = {}
        for (pid, split, _), record in sorted(ctx.store.of_type("execution").items()):
            if split not in by_split or pid not in problems:
                continue
            by_split[split].append({**record, "type": problems[pid].payload.type})
            row = per_problem.setdefault((pid, split), [0, 0, 0, 0])
            row[0] += 1
            row[1] += int(record["compiles"])
            row[2] += int(record["passed"])
            row[3] += int(record["adopted"])
        metrics = {split: score_outcomes(records, ctx.ks) for split, records in by_split.items() if records}
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

    def report(self, model: str, scored: Scored, ctx: ScoreContext) -> str:
        return render_eval_report(model, scored, ctx.ks)


KIND = ApiUpdate()
