"""Runs of `python -m eval.run` (fixtures, HumanEvalFix, CanItEdit, EDIT-Bench...) side by side: one
table per benchmark, a row per split and a column per run, pass@k with its standard error, and
both published ExcessCode metrics where the run measured them (the paper's and the repository's,
each named, with where it was published under the tables: `core.excess_metrics`); `plot` draws
pass@1 per split and run as grouped bars.

    python -m eval.tables compare runs/eval-tiny runs/eval-ec67 --out tables/compare.md   # + compare.png
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.excess_metrics import PUBLISHED, PublishedMetric, current_layout
from eval.tables import markdown, read_run

MADE_BY = "python -m eval.run"


def load(runs: Sequence[Path]) -> list[tuple[str, dict[str, Any]]]:
    """(label, results.json) per run; the label is the model's name and the run's folder."""
    if not runs:
        raise UserError(f"give at least one run folder written by {MADE_BY}")
    loaded = []
    for run in runs:
        results = read_run(Path(run), "results.json", MADE_BY)
        if not isinstance(results.get("metrics"), dict) or "benchmark" not in results:
            raise UserError(f"{run}/results.json holds no metrics of {MADE_BY}: give its run folders")
        # results written when `excess_code` held the repository's metric are read under today's names
        results["metrics"] = {split: current_layout(m or {}) for split, m in results["metrics"].items()}
        loaded.append((f"{results.get('model', '?')} (`{run}`)", results))
    return loaded


def _pass_keys(metrics: list[dict[str, Any]]) -> list[str]:
    """The pass@k every run of a benchmark reports, smallest k first."""
    shared = set.intersection(
        *({k for k in m if k.startswith("pass@") and not k.endswith("_stderr")} for m in metrics)
    )
    return sorted(shared, key=lambda k: int(k.split("@")[1]))


def _cell(split: dict[str, Any] | None, key: str) -> str:
    if split is None or split.get(key) is None:
        return "–"
    value, error = 100 * split[key], split.get(f"{key}_stderr")
    return f"{value:.1f} ± {100 * error:.1f}" if error is not None else f"{value:.1f}"


def tables(runs: Sequence[Path]) -> str:
    loaded = load(runs)
    by_benchmark: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for label, results in loaded:
        by_benchmark[results["benchmark"]].append((label, results))
    lines = ["# Runs side by side", ""]
    for label, results in loaded:
        gen = (results.get("config") or {}).get("gen") or {}
        lines.append(
            f"- {label}: {results['benchmark']}, n={gen.get('n', '?')}, temperature={gen.get('temperature', '?')}"
        )
    for benchmark, group in by_benchmark.items():
        splits = list(dict.fromkeys(s for _, r in group for s in r["metrics"]))
        keys = _pass_keys([m for _, r in group for m in r["metrics"].values()])
        header = ["split", "metric", *(label for label, _ in group)]
        rows = []
        for split in splits:
            for key in keys:
                rows.append([split, key, *(_cell(r["metrics"].get(split), key) for _, r in group)])
            for metric in PUBLISHED:
                if any((r["metrics"].get(split) or {}).get(metric.key) is not None for _, r in group):
                    rows.append(
                        [split, metric.name, *(_excess(r["metrics"].get(split), metric) for _, r in group)]
                    )
        lines += [
            "",
            f"## {benchmark}",
            "",
            "pass@k in %, ± its standard error.",
            "",
            *markdown(header, rows),
        ]
        if any(row[1] in {m.name for m in PUBLISHED} for row in rows):
            lines += ["", *(f"- **{m.name}** (`{m.key}`): {m.source}" for m in PUBLISHED)]
    return "\n".join(lines) + "\n"


def _excess(split: dict[str, Any] | None, metric: PublishedMetric) -> str:
    """One ExcessCode metric of a split, ± its standard error where its source reports one."""
    if split is None or split.get(metric.key) is None:
        return "–"
    error = split.get(metric.stderr_key) if metric.stderr_key else None
    return f"{split[metric.key]:.2f}" + (f" ± {error:.2f}" if error is not None else "")


def plot(runs: Sequence[Path], path: Path) -> Path:
    """pass@1 per split (grouped bars, one colour per run), one panel per benchmark, at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    loaded = load(runs)
    benchmarks = list(dict.fromkeys(r["benchmark"] for _, r in loaded))
    fig, axes = plt.subplots(1, len(benchmarks), figsize=(6 * len(benchmarks), 4), squeeze=False)
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        group = [(label, r) for label, r in loaded if r["benchmark"] == benchmark]
        splits = list(dict.fromkeys(s for _, r in group for s in r["metrics"]))
        width = 0.8 / len(group)
        for i, (label, results) in enumerate(group):
            values = [100 * ((results["metrics"].get(s) or {}).get("pass@1") or 0.0) for s in splits]
            errors = [100 * ((results["metrics"].get(s) or {}).get("pass@1_stderr") or 0.0) for s in splits]
            ax.bar(
                np.arange(len(splits)) + i * width, values, width, yerr=errors, label=label.replace("`", "")
            )
        ax.set_xticks(np.arange(len(splits)) + width * (len(group) - 1) / 2, splits)
        ax.set(ylabel="pass@1 (%)", ylim=(0, 100), title=f"pass@1 on {benchmark}, per split")
        ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
