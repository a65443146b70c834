"""The novel-API benchmark (NovelAPIBench-style): tasks that must call an API a model cannot know,
one split per knowledge cell.

Each sample runs as the task's program (the spy around every path of the API, then the candidate,
then the tests) under the interpreter of the library's new version (`interpreter`: the runner
starts one sandbox per interpreter). Its verdict carries the spy's calls, the error that ended the
run, and the failure class (`eval/novelapi/classify.py`).

Metrics per cell (split), means over problems of per-problem values:
- **pass@k**: the unbiased estimator (run `gen.temperature=0 gen.n=1` for greedy pass@1, or
  sample n >= 5 for pass@5);
- **API_acc** (`benchmark.api_acc`, `eval/novelapi/metrics.py`): `static` (default, the paper's
  reading) the share of samples whose code selects the target API, resolved statically, whether
  or not it ran (a WrongImport sample selected it); `spy` the share the spy saw call it from the
  candidate's code (for a class the task uses as a type, whose code names it);
- **Param_corr** (`benchmark.param_corr`): `binding` (default) among samples that call the
  target, the share whose calls bind a reference call's parameters with arguments of compatible
  kinds (values not compared), over the problems with such a sample (None for a cell with none);
  `values` the share of all samples with a call whose argument values equal a reference call's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.benchmarks.novelapi import (
    CANDIDATE_FILE,
    NovelApiOptions,
    NovelApiPayload,
    program,
    read_spy,
)
from core.problems import BenchmarkError, Problem
from core.sandbox.declared import unverified_flags
from eval.benchmarks.base import BenchmarkKind, ExecContext, Job, ScoreContext, Scored
from eval.execute import precheck
from eval.metrics import aggregate_pass_at_k
from eval.novelapi.classify import CLASSES, Attempt, explain, references_target
from eval.novelapi.library import library_facts
from eval.novelapi.metrics import binds_like_reference, param_values_match, selects


class NovelApi(BenchmarkKind):
    name = "novelapi"
    options = NovelApiOptions

    def interpreter(self, problem: Problem) -> str | None:
        return problem.payload.python

    def execute(self, jobs: list[Job], ctx: ExecContext) -> list[dict[str, Any]]:
        early = [precheck(j.code, "python", ctx.max_code_bytes) for j in jobs]
        runnable = [j for j, e in zip(jobs, early, strict=True) if e is None]
        runs = [
            (program(j.code, list(j.problem.payload.paths), use=j.problem.payload.use), j.problem.tests)
            for j in runnable
        ]
        results = iter(_run(ctx, runs, runnable))
        done = [(j, e, None if e else next(results)) for j, e in zip(jobs, early, strict=True)]
        needed = _needs_the_api(ctx, [(j, r) for j, _, r in done if r is not None and r.passed])
        return [_record(j.problem, j.code, e, r, needed.get(id(r), True)) for j, e, r in done]

    def score(self, ctx: ScoreContext) -> Scored:
        options = ctx.options if isinstance(ctx.options, NovelApiOptions) else NovelApiOptions()
        return score_novelapi(
            ctx.store.of_type("execution"),
            ctx.problems,
            ctx.splits,
            ctx.ks,
            api_acc=options.api_acc,
            param_corr=options.param_corr,
        )

    def report(self, model: str, scored: Scored, ctx: ScoreContext) -> str:
        return render_novelapi_report(model, scored, ctx.ks, ctx.out / "failure_classes.png")


KIND = NovelApi()


def _needs_the_api(ctx: ExecContext, passed: list[tuple[Job, Any]]) -> dict[int, bool]:
    """For each passing run (by id), whether the sample fails with the API taken away: the spy's
    record lives in the candidate's process, this verdict does not."""
    runs = [
        (
            program(j.code, list(j.problem.payload.paths), absent=True, use=j.problem.payload.use),
            j.problem.tests,
        )
        for j, _ in passed
    ]
    results = _run(ctx, runs, [j for j, _ in passed])
    return {id(r): not without.passed for (_, r), without in zip(passed, results, strict=True)}


def _run(ctx: ExecContext, runs: list[tuple[str, str]], jobs: list[Job]) -> list:
    """The spy programs' results: the spy reports through the sandbox's channel, and a job whose
    library or tests load a module with raw memory access runs in the declared unverified mode
    (decided from the problem, never the sample)."""
    if not runs:
        return []
    texts = [(f"import {j.problem.payload.library}\n", j.problem.tests) for j in jobs]
    unverified = unverified_flags(ctx.sandbox, texts)
    return ctx.sandbox.run_many(
        runs, limits=ctx.limits, candidate_file=CANDIDATE_FILE, unverified=unverified, channel=True
    )


def _record(problem: Problem, code: str, early, result, needed: bool = True) -> dict[str, Any]:
    if early is not None:
        status, detail, stderr, spy = early[0], early[1], "", {}
        passed = False
    else:
        status, detail, stderr, passed = result.status, result.detail, result.stderr, result.passed
        spy = read_spy(result.channel) or {}
    if passed and not needed:  # passes without the API too: whatever the spy recorded, no call
        status, passed, spy = "failed", False, {"calls": []}
        detail = "passes with the API taken away: the target API was never needed"
    payload: NovelApiPayload = problem.payload
    facts = library_facts(payload.library, payload.python)
    attempt = Attempt(
        code=code,
        target=payload.qualname,
        aliases=payload.paths,
        signature=payload.signature,
        passed=passed,
        status=status,
        stderr=stderr,
        calls=tuple(spy.get("calls") or ()),
        reference_calls=payload.reference_calls,
        library_folders=facts.folders,
        library_names=facts.names,
        library_modules=facts.modules,
    )
    klass, reason = explain(attempt)
    # a type the task uses, never calls: used when the code names it (a pass also needed it)
    used = bool(attempt.calls) or (payload.use == "type" and (passed or references_target(attempt)))
    return {
        "status": status,
        "passed": passed,
        "detail": detail[:300],
        "stderr": stderr[-2000:],
        "calls": list(attempt.calls),
        "used": used,
        "selects": selects(attempt),
        "class": klass,
        "reason": reason,
        "param_correct": param_values_match(attempt.calls, attempt.reference_calls, attempt.signature),
        "param_binds": binds_like_reference(attempt),
    }


# Each definition's per-sample record key (`_record`); a record stored before a key existed has none.
_API_ACC_KEYS = {"static": "selects", "spy": "used"}
_PARAM_CORR_KEYS = {"binding": "param_binds", "values": "param_correct"}


def score_novelapi(
    executions: dict,
    problems: dict[str, Problem],
    splits: Sequence[str],
    ks: Sequence[int],
    api_acc: str = "static",
    param_corr: str = "binding",
) -> Scored:
    """Metrics per split (module docstring); ``api_acc`` and ``param_corr`` name the definitions."""
    selected, params = _API_ACC_KEYS[api_acc], _PARAM_CORR_KEYS[param_corr]
    # per problem: [samples, passed, selected, param-correct, samples in Param_corr's denominator]
    per: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0, 0, 0]))
    classes: dict[str, Counter] = defaultdict(Counter)
    for (pid, split, _), record in sorted(executions.items()):
        if split not in splits or pid not in problems:
            continue
        if selected not in record or params not in record:
            raise BenchmarkError(
                f"execution record of {pid} ({split}) predates API_acc={api_acc}/Param_corr={param_corr}: "
                "delete the run's execution records to execute again, or choose benchmark.api_acc=spy "
                "benchmark.param_corr=values"
            )
        row = per[split][pid]
        row[0] += 1
        row[1] += int(record["passed"])
        row[2] += int(record[selected])
        counted = record[params] is not None or param_corr == "values"
        row[3] += int(bool(record[params]))
        row[4] += int(counted)
        classes[split][record["class"]] += 1
    metrics: dict[str, dict[str, Any]] = {}
    for split in splits:
        rows = per.get(split)
        if not rows:
            continue
        usable = [k for k in ks if k <= min(n for n, *_ in rows.values())]
        m: dict[str, Any] = aggregate_pass_at_k({p: (r[0], r[1]) for p, r in rows.items()}, usable)
        calling = [r for r in rows.values() if r[4]]
        m.update(
            api_acc=sum(r[2] / r[0] for r in rows.values()) / len(rows),
            param_corr=sum(r[3] / r[4] for r in calling) / len(calling) if calling else None,
            definitions={"api_acc": api_acc, "param_corr": param_corr},
            problems=len(rows),
            samples=sum(r[0] for r in rows.values()),
            classes={c: classes[split].get(c, 0) for c in CLASSES},
        )
        metrics[split] = m
    per_problem = [
        {
            "problem": pid,
            "name": problems[pid].name,
            "split": split,
            "n": r[0],
            "passed": r[1],
            "pass@1": r[1] / r[0],
        }
        for split, rows in per.items()
        for pid, r in sorted(rows.items())
    ]
    return {"metrics": metrics, "per_problem": per_problem}


def render_novelapi_report(model: str, scored: dict, ks: Sequence[int], plot: Path | None) -> str:
    """report.md: the per-cell table, the failure classes per cell, and the stacked bar plot."""
    metrics = scored["metrics"]
    usable = [k for k in ks if any(f"pass@{k}" in m for m in metrics.values())]
    head = [
        "Cell",
        "Problems",
        "Samples",
        *(f"pass@{k} (%)" for k in usable),
        "API_acc (%)",
        "Param_corr (%)",
    ]
    lines = [f"# novelapi: {model}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cell, m in metrics.items():
        cells = [cell, str(m["problems"]), str(m["samples"])]
        cells += [f"{100 * m[f'pass@{k}']:.1f}" if f"pass@{k}" in m else "NA" for k in usable]
        cells += [_pct(m["api_acc"]), _pct(m["param_corr"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Failure classes (samples)",
        "",
        "| Cell | " + " | ".join(CLASSES) + " |",
        "|" + "---|" * (len(CLASSES) + 1),
    ]
    for cell, m in metrics.items():
        lines.append(f"| {cell} | " + " | ".join(str(m["classes"][c]) for c in CLASSES) + " |")
    failing = sum(m["classes"][c] for m in metrics.values() for c in CLASSES if c != "OK")
    if plot is not None and failing:
        plot_classes(metrics, plot, model)
        lines += ["", f"![failure classes per cell]({plot.name})"]
    elif metrics:
        lines += ["", "No sample failed: there is no failure class to plot."]
    lines += ["", _definitions(metrics), "Classes: eval/novelapi/classify.py, in precedence order."]
    return "\n".join(lines) + "\n"


_DEFINED = {
    "static": "API_acc: samples whose code selects the API (named in a call or use, any path, run or not)",
    "spy": "API_acc (spy): samples the spy saw call the API",
    "binding": "Param_corr: among samples that call the API, those whose calls bind a reference call's "
    "parameters with arguments of compatible kinds",
    "values": "Param_corr (values): samples with a call whose argument values equal a reference call's",
}


def _definitions(metrics: dict[str, dict[str, Any]]) -> str:
    """The line under the table naming the definitions the metrics used (eval/novelapi/metrics.py)."""
    chosen = next(iter(metrics.values()), {}).get(
        "definitions", {"api_acc": "static", "param_corr": "binding"}
    )
    return f"{_DEFINED[chosen['api_acc']]}; {_DEFINED[chosen['param_corr']]}."


def _pct(value: float | None) -> str:
    return "NA" if value is None else f"{100 * value:.1f}"


def plot_classes(metrics: dict[str, dict[str, Any]], path: Path, model: str = "") -> None:
    """A stacked bar per cell: its failing samples by class (the share of the cell's n)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(metrics)
    failures = [c for c in CLASSES if c != "OK"]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(cells) + 2), 4))
    bottom = [0] * len(cells)
    for klass in failures:
        values = [metrics[c]["classes"][klass] for c in cells]
        ax.bar(cells, values, bottom=bottom, label=klass)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("failing samples")
    ax.set_ylim(0, max(1, max(bottom)) * 1.15)
    ax.set_xticks(range(len(cells)), [f"{c}\n(n={metrics[c]['samples']})" for c in cells])
    ax.set_title(f"Failure classes per knowledge cell{f' — {model}' if model else ''}")
    ax.legend(fontsize=7, ncol=2)
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
