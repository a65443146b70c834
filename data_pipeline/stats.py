"""Dataset statistics in the form of the EditCoder paper's Table 2, and plots.

Figures: items, unique initial verbs of the instructions, lines of code before and after,
the character Levenshtein distance between before and after, and instruction tokens
(whitespace-separated words of the commit subject); mean and standard deviation each.
Written to `stats.json` and `stats.md`, with PNG histograms under `plots/`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset
from rapidfuzz.distance import Levenshtein

from data_pipeline.verbs import first_word


def _mean_std(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return {"mean": 0.0, "std": 0.0}
    return {"mean": round(float(arr.mean()), 2), "std": round(float(arr.std()), 2)}


def compute_statistics(ds: Dataset) -> dict[str, Any]:
    before_lines, after_lines, distances, tokens = [], [], [], []
    verbs: Counter[str] = Counter()
    for row in ds.select_columns(["before", "after", "instruction"]):
        before_lines.append(len(row["before"].splitlines()))
        after_lines.append(len(row["after"].splitlines()))
        distances.append(Levenshtein.distance(row["before"], row["after"]))
        tokens.append(len(row["instruction"].split()))
        verbs[first_word(row["instruction"])] += 1
    return {
        "items": len(ds),
        "unique_initial_verbs": len([v for v in verbs if v]),
        "lines_before": _mean_std(before_lines),
        "lines_after": _mean_std(after_lines),
        "levenshtein": _mean_std(distances),
        "instruction_tokens": _mean_std(tokens),
        "top_verbs": verbs.most_common(20),
        "_line_counts": {"before": before_lines, "after": after_lines},
    }


def markdown_table(stats: dict[str, Any]) -> str:
    def cell(key: str) -> str:
        return f"{stats[key]['mean']:.1f} ± {stats[key]['std']:.1f}"

    return "\n".join(
        [
            "| Items | Unique initial verbs | Lines before | Lines after | Levenshtein distance | Instruction tokens |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {stats['items']} | {stats['unique_initial_verbs']} | {cell('lines_before')} | {cell('lines_after')} "
            f"| {cell('levenshtein')} | {cell('instruction_tokens')} |",
            "",
        ]
    )


def plot_statistics(stats: dict[str, Any], folder: Path, name: str) -> list[str]:
    """The line-count and initial-verb plots of the dataset ``name``, titled with its name and size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    counts = stats["_line_counts"]
    top = max([1, *counts["before"], *counts["after"]])
    bins = np.linspace(0, min(top, 400), 41)
    ax.hist(counts["before"], bins=bins, alpha=0.6, label="before")
    ax.hist(counts["after"], bins=bins, alpha=0.6, label="after")
    ax.set(
        xlabel="lines of code",
        ylabel="items",
        title=f"Lines of code per item: {name} ({stats['items']} items)",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "line_counts.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    verbs = stats["top_verbs"][:15]
    ax.barh([v or "(empty)" for v, _ in reversed(verbs)], [n for _, n in reversed(verbs)])
    ax.set(xlabel="items", title=f"Most common initial verbs: {name} ({stats['items']} items)")
    fig.tight_layout()
    fig.savefig(folder / "top_verbs.png", dpi=100)
    plt.close(fig)
    return ["plots/line_counts.png", "plots/top_verbs.png"]


def write_statistics(ds: Dataset, folder: Path, plots: bool = True) -> dict[str, Any]:
    """Write stats.json, stats.md and plots into `folder`; return the figures."""
    stats = compute_statistics(ds)
    if plots:
        stats["plots"] = plot_statistics(stats, folder / "plots", folder.resolve().name)
    stats.pop("_line_counts")
    (folder / "stats.json").write_text(json.dumps(stats, indent=2))
    (folder / "stats.md").write_text(markdown_table(stats))
    return stats
