"""The kinds whose problems are one program plus its tests (CanItEdit, the fixtures, HumanEvalFix,
EDIT-Bench): a sample passes when its program runs the tests to the end; scored as pass@k per
split with CanItEdit's ExcessCode over passing Python samples (coverage measured in the verdict
run where a sample runs split, by a second split run right after it where its tests take helpers,
else while scoring: eval/excess_code.py)."""

from __future__ import annotations

from typing import Any

from core.progress import tqdm
from eval.benchmarks.base import BenchmarkKind, ExecContext, Job, ScoreContext, Scored
from eval.execute import program_verdicts
from eval.report import render_report
from eval.scoring import measure_coverage, pending_coverage, score


class ProgramKind(BenchmarkKind):
    runs_as_is = True
    split_verdicts = True

    def execute(self, jobs: list[Job], ctx: ExecContext) -> list[dict[str, Any]]:
        return program_verdicts(
            [(j.problem, j.code) for j in jobs],
            ctx.sandbox,
            ctx.limits,
            ctx.max_code_bytes,
            ctx.coverage,
            ctx.coverage_limits,
        )

    def score(self, ctx: ScoreContext) -> Scored:
        todo = pending_coverage(ctx.store) if ctx.excess_code else 0
        if todo:
            with tqdm(total=todo, desc="Coverage (ExcessCode)", unit="sample") as bar:
                measure_coverage(ctx.store, ctx.problems, ctx.sandbox(), ctx.limits, bar.update, ctx.probes)
        return score(ctx.store, ctx.problems, ctx.splits, ctx.ks)

    def report(self, model: str, scored: Scored, ctx: ScoreContext) -> str:
        return render_report(model, self.name, scored)

    def summary(self, model: str, scored: Scored, report: str) -> str:
        return render_report(model, self.name, {"metrics": scored["metrics"]})  # per problem: report.md
