"""The execute and score stages of `python -m eval.run benchmark=novelapi`, and its report.

Execution: each sample runs as the task's program (the spy around every path of the API, then
the candidate, then the tests) with the interpreter of the library's new version, one sandbox
per interpreter. Each record carries the spy's calls, the error that ended the run, and the
failure class (`classify.py`). A killed run resumes: records are appended as chunks finish.

Metrics per cell (split), means over problems of per-problem values:
- **pass@k**: the unbiased estimator (run `gen.temperature=0 gen.n=1` for greedy pass@1, or
  sample n >= 5 for pass@5);
- **API_acc**: the share of samples whose code called the target API (the spy recorded a call
  made from the candidate's code);
- **Param_corr**: the share of samples with a call whose arguments equal a reference call's,
  both bound to the API's signature with defaults applied (so `f(x)` and `f(x, sep='-')`
  agree when '-' is the default), compared as reprs.
"""

from __future__ import annotations

import inspect
import secrets
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.benchmarks.novelapi import program, read_spy
from core.problems import Problem
from core.sandbox import SandboxLimits, make_sandbox
from eval.execute import CHUNK, precheck
from eval.metrics import aggregate_pass_at_k
from eval.novelapi.classify import CLASSES, Attempt, explain, parse_signature
from eval.samples import SampleStore


def execute_novelapi(
    store: SampleStore,
    problems: dict[str, Problem],
    backend: str,
    limits: SandboxLimits,
    workers: int | None,
    max_code_bytes: int,
    progress: Callable[[int], None] | None = None,
) -> int:
    done = store.of_type("execution")
    todo = [(k, s) for k, s in sorted(store.of_type("sample").items()) if k not in done]
    by_python: dict[str, list] = defaultdict(list)
    for key, sample in todo:
        by_python[problems[key[0]].extra.get("python") or ""].append((key, sample))
    for python, items in by_python.items():
        with make_sandbox(backend, limits=limits, workers=workers, python=python or None) as sandbox:
            for start in range(0, len(items), CHUNK):
                chunk = items[start : start + CHUNK]
                runs, tokens = [], []
                for key, sample in chunk:
                    problem, code = problems[key[0]], sample["code"]
                    early = precheck(code, "python", max_code_bytes)
                    token = secrets.token_hex(8)
                    tokens.append((key, problem, code, token, early))
                    if early is None:
                        runs.append((program(code, problem.extra["paths"], problem.tests, token), ""))
                results = iter(sandbox.run_many(runs, limits=limits) if runs else [])
                for key, problem, code, token, early in tokens:
                    store.append(_record(key, problem, code, token, early, None if early else next(results)))
                if progress:
                    progress(len(chunk))
    return len(todo)


def _record(key, problem: Problem, code: str, token: str, early, result) -> dict[str, Any]:
    if early is not None:
        status, detail, stderr, spy = early[0], early[1], "", {}
        passed = False
    else:
        status, detail, stderr, passed = result.status, result.detail, result.stderr, result.passed
        spy = read_spy(result.stdout, token) or {}
    attempt = Attempt(
        code=code,
        target=problem.extra["qualname"],
        aliases=tuple(problem.extra["paths"]),
        signature=problem.extra.get("signature"),
        passed=passed,
        status=status,
        stderr=stderr,
        calls=tuple(spy.get("calls") or ()),
        reference_calls=tuple(problem.extra.get("reference_calls") or ()),
    )
    klass, reason = explain(attempt)
    return {
        "type": "execution",
        "problem": key[0],
        "split": key[1],
        "index": key[2],
        "status": status,
        "passed": passed,
        "detail": detail[:300],
        "stderr": stderr[-2000:],
        "calls": list(attempt.calls),
        "class": klass,
        "reason": reason,
        "param_correct": param_correct(attempt.calls, attempt.reference_calls, attempt.signature),
    }


def _bound(call: dict, signature: inspect.Signature | None) -> dict[str, str] | None:
    args, kwargs = list(call.get("args") or []), dict(call.get("kwargs") or {})
    if signature is None:
        return {**{f"#{i}": a for i, a in enumerate(args)}, **kwargs}
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return {k: repr(v) if not isinstance(v, str) else v for k, v in bound.arguments.items()}


def param_correct(calls: Sequence[dict], references: Sequence[dict], signature_text: str | None) -> bool:
    """Whether some recorded call the API accepted passes the same arguments as some reference call."""
    signature = parse_signature(signature_text)
    wanted = [b for b in (_bound(r, signature) for r in references) if b is not None]
    accepted = [c for c in calls if not c.get("rejected")]
    return any((b := _bound(c, signature)) is not None and b in wanted for c in accepted)


def score_novelapi(
    store: SampleStore, problems: dict[str, Problem], splits: Sequence[str], ks: Sequence[int]
) -> dict:
    per: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0, 0]))
    classes: dict[str, Counter] = defaultdict(Counter)
    for (pid, split, _), record in store.of_type("execution").items():
        if split not in splits or pid not in problems:
            continue
        row = per[split][pid]
        row[0] += 1
        row[1] += int(record["passed"])
        row[2] += int(bool(record["calls"]))
        row[3] += int(record["param_correct"])
        classes[split][record["class"]] += 1
    metrics: dict[str, dict[str, Any]] = {}
    for split in splits:
        rows = per.get(split)
        if not rows:
            continue
        usable = [k for k in ks if k <= min(n for n, *_ in rows.values())]
        m: dict[str, Any] = aggregate_pass_at_k({p: (r[0], r[1]) for p, r in rows.items()}, usable)
        m.update(
            api_acc=sum(r[2] / r[0] for r in rows.values()) / len(rows),
            param_corr=sum(r[3] / r[0] for r in rows.values()) / len(rows),
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
        cells += [f"{100 * m['api_acc']:.1f}", f"{100 * m['param_corr']:.1f}"]
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
    if plot is not None and metrics:
        plot_classes(metrics, plot)
        lines += ["", f"![failure classes per cell]({plot.name})"]
    lines += [
        "",
        "API_acc: samples that called the API; Param_corr: samples that called it with a reference call's "
        "arguments (bound to its signature, defaults applied). Classes: eval/novelapi/classify.py, in precedence order.",
    ]
    return "\n".join(lines) + "\n"


def plot_classes(metrics: dict[str, dict[str, Any]], path: Path) -> None:
    """A stacked bar per cell: its failing samples by class."""
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
    ax.set_title("Failure classes per knowledge cell")
    ax.legend(fontsize=7, ncol=2)
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
