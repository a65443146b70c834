"""NovelAPIBench's tables from finished evaluation runs (`results.json` of
`python -m eval.run benchmark=novelapi`, one per model):

- the companion-metrics table (App. E.2): per cell pass@1, pass@5, API_acc, Param_corr and the
  semantic-equivalence score (not computed here: it needs an LLM judge);
- the cross-model table (App. E.8): pooled pass@1 (%) per cell and model, with each model's rank;
- the failure-class stacks (Fig. RQ1, App. E.9): per model and cell, each class's share of the
  cell's samples.

Cells follow the study's order (`core.knowledge.CELL_PRESETS`), then any other in run order. The
last section maps each model to its run folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.knowledge import CELL_PRESETS
from eval.novelapi.classify import CLASSES
from eval.tables import markdown, read_run

MADE_BY = "python -m eval.run benchmark=novelapi"


def _load(runs: Sequence[Path]) -> list[tuple[Path, str, dict[str, Any]]]:
    loaded = []
    for run in runs:
        result = read_run(run, "results.json", MADE_BY)
        if result.get("benchmark") != "novelapi":
            raise UserError(f"{run} is a {result.get('benchmark')!r} run: give folders written by {MADE_BY}")
        loaded.append((run, result["model"], result["metrics"]))
    labels = [model for _, model, _ in loaded]
    if len(set(labels)) != len(labels):  # the same model twice: tell the columns apart by folder
        loaded = [(run, f"{model} ({run.name})", m) for run, model, m in loaded]
    return loaded


def _cells(loaded) -> list[str]:
    seen = list(dict.fromkeys(cell for _, _, metrics in loaded for cell in metrics))
    return [c for c in CELL_PRESETS if c in seen] + [c for c in seen if c not in CELL_PRESETS]


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _ranks(values: dict[str, float | None]) -> dict[str, str]:
    order = sorted((v, c) for c, v in values.items() if v is not None)[::-1]
    ranks: dict[str, str] = {}
    for value, cell in order:
        ranks[cell] = str(1 + sum(1 for v, _ in order if v > value))
    return ranks


def tables(runs: Sequence[Path]) -> str:
    loaded = _load(runs)
    cells = _cells(loaded)
    lines = ["# NovelAPIBench: the paper's tables", ""]
    for _run, model, metrics in loaded:
        rows = [
            [
                cell,
                _pct(m.get("pass@1")),
                _pct(m.get("pass@5")),
                _pct(m.get("api_acc")),
                _pct(m.get("param_corr")),
                "not computed",
            ]
            for cell in cells
            if (m := metrics.get(cell))
        ]
        lines += [
            f"## Companion metrics per cell: {model} (App. E.2 layout, %)",
            "",
            *markdown(["Cell", "pass@1", "pass@5", "API_acc", "Param_corr", "Sem."], rows),
            "",
        ]
    per_model = {
        model: {c: (metrics.get(c) or {}).get("pass@1") for c in cells} for _, model, metrics in loaded
    }
    ranks = {model: _ranks(values) for model, values in per_model.items()}
    header = ["Cell"] + [f"{model} pass@1 (rank)" for model in per_model]
    rows = [
        [cell] + [f"{_pct(per_model[m][cell])} ({ranks[m].get(cell, '–')})" for m in per_model]
        for cell in cells
    ]
    lines += ["## Pooled pass@1 per cell and model (App. E.8 layout, %)", "", *markdown(header, rows), ""]
    for _run, model, metrics in loaded:
        rows = []
        for cell in cells:
            m = metrics.get(cell)
            if not m:
                continue
            total = sum(m["classes"].values())
            rows.append(
                [cell, str(total)]
                + [_pct(m["classes"].get(c, 0) / total if total else None) for c in CLASSES]
            )
        lines += [
            f"## Failure-class stack: {model} (share of the cell's samples, %)",
            "",
            *markdown(["Cell", "Samples", *CLASSES], rows),
            "",
        ]
    lines += [
        "pass@k: the unbiased estimator over each cell's samples; API_acc and Param_corr as in "
        "eval/novelapi/metrics.py (each run's results name the definitions used); classes by the "
        "paper's definitions (eval/novelapi/classify.py). "
        "'–': the run has no such figure. Ranks: 1 = the model's best cell.",
        "",
        "## Runs",
        "",
        *markdown(["Model", "Run"], [[model, str(run)] for run, model, _ in loaded]),
    ]
    return "\n".join(lines) + "\n"
