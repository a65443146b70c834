"""The API-update editing study's tables from finished study runs (`results.json` of
`python -m eval.apiupdate_edit`, one per model x editor x regime):

- Table 4 (single edits) and Table 7 (successive edits): Compiles@k and Pass@k per model on
  generalization and specificity, with ΔP and CF averaged over models;
- Table 5: the canonically filtered generalization set, C/P/A/W@k per model;
- Table 6: the non-workaroundable set, Compiles@k and Pass@k per model;
- Tables 9-11 (single) and 12-14 (successive): one table per model, ΔP, φC, φQ and CF per editor.

The study reports k = 5; the runs' own k (`shapley_k`, the largest k their n allows) is used and
named in each heading. A "pre-edit" row holds each model's unedited figures. The last section maps
every (model, editor, regime) to its run folder, so each cell traces to one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.errors import UserError
from eval.tables import markdown, number, read_run

MADE_BY = "python -m eval.apiupdate_edit"
SPLITS = ("generalization", "specificity")
SHORT = {"generalization": "Gen.", "specificity": "Spec."}


class Runs:
    """The runs indexed by (model, editor, regime), in the order given."""

    def __init__(self, runs: Sequence[Path]):
        self.by_key: dict[tuple[str, str, str], tuple[Path, dict[str, Any]]] = {}
        for run in runs:
            result = read_run(run, "results.json", MADE_BY)
            if not {"model", "editor", "regime", "after", "shapley_k"} <= set(result):
                raise UserError(f"{run} holds no editing-study results: give folders written by {MADE_BY}")
            key = (result["model"], result["editor"], result["regime"])
            if key in self.by_key:
                raise UserError(f"{run} and {self.by_key[key][0]} are both {'/'.join(key)}; give one of them")
            self.by_key[key] = (run, result)
        ks = {r["shapley_k"] for _, r in self.by_key.values()}
        if len(ks) != 1:
            raise UserError(f"the runs were scored at different k {sorted(ks)}; use the same gen.n and ks")
        self.k = ks.pop()
        self.models = _unique(key[0] for key in self.by_key)
        self.editors = _unique(key[1] for key in self.by_key)

    def get(self, model: str, editor: str, regime: str) -> dict[str, Any] | None:
        found = self.by_key.get((model, editor, regime))
        return found[1] if found else None

    def before(self, model: str) -> dict[str, Any]:
        """The model's unedited figures (every run of a model starts from the same ones)."""
        return next((r["before"] for (m, _, _), (_, r) in self.by_key.items() if m == model), {})

    def has(self, regime: str) -> bool:
        return any(key[2] == regime for key in self.by_key)


def _unique(values) -> list[str]:
    return list(dict.fromkeys(values))


def _rate(metrics: dict[str, Any] | None, split: str, name: str, k: int) -> str:
    return number(((metrics or {}).get(split) or {}).get(f"{name}@{k}"))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _c_p_table(runs: Runs, regime: str, number_: int) -> list[str]:
    k = runs.k
    header = ["Method"]
    for split in SPLITS:
        header += [f"{m} {SHORT[split]} C@{k}" for m in runs.models] + [
            f"{m} {SHORT[split]} P@{k}" for m in runs.models
        ]
        header += [f"{SHORT[split]} ΔP (avg)", f"{SHORT[split]} CF (avg)"]
    pre = ["pre-edit"]
    for split in SPLITS:
        pre += [_rate(runs.before(m), split, "compiles", k) for m in runs.models]
        pre += [_rate(runs.before(m), split, "pass", k) for m in runs.models]
        pre += ["", ""]
    rows = [pre]
    for editor in runs.editors:
        results = {m: runs.get(m, editor, regime) for m in runs.models}
        if not any(results.values()):
            continue
        row = [editor]
        for split in SPLITS:
            row += [_rate(r and r["after"], split, "compiles", k) for r in results.values()]
            row += [_rate(r and r["after"], split, "pass", k) for r in results.values()]
            shapley = [r["shapley"][split] for r in results.values() if r and split in r["shapley"]]
            row.append(number(_mean([s["dP"] for s in shapley])))
            row.append(number(_mean([s["CF"] for s in shapley if s["CF"] is not None])))
        rows.append(row)
    title = "single edits" if regime == "single" else "successive edits"
    return [
        f"## Table {number_}: model performance for {title} across Generalization and Specificity (k={k})",
        "",
        *markdown(header, rows),
        "",
    ]


def _split_table(runs: Runs, heading: str, split: str, columns: dict[str, str]) -> list[str]:
    """One split's rates after single edits, per model (`columns`: label -> metric); the pre-edit
    row has what the unedited model is scored on, Compiles and Pass."""
    k = runs.k
    header = ["Method"] + [f"{m} {label}@{k}" for m in runs.models for label in columns]
    pre = ["pre-edit"] + [
        _rate(runs.before(m), split, metric, k) if metric in ("compiles", "pass") else ""
        for m in runs.models
        for metric in columns.values()
    ]
    rows = [pre]
    for editor in runs.editors:
        row = [editor]
        for m in runs.models:
            after = (runs.get(m, editor, "single") or {}).get("after")
            row += [_rate(after, split, metric, k) for metric in columns.values()]
        rows.append(row)
    return [f"## {heading} (k={k})", "", *markdown(header, rows), ""]


def _table_5(runs: Runs) -> list[str]:
    columns = {"C": "compiles", "P": "pass", "A": "adoption", "W": "workaround"}
    heading = "Table 5: single edits on the canonically filtered Generalization set"
    return _split_table(runs, heading, "generalization_canonical", columns)


def _table_6(runs: Runs) -> list[str]:
    heading = "Table 6: single edits on the non-workaroundable subset"
    return _split_table(runs, heading, "nonworkaround", {"Compiles": "compiles", "Pass": "pass"})


def _per_model(runs: Runs, regime: str, first: int) -> list[str]:
    lines: list[str] = []
    title = "Single Edit" if regime == "single" else "Successive Edits"
    for offset, model in enumerate(runs.models):
        header = ["Method"] + [f"{SHORT[s]} {n}" for s in SPLITS for n in ("ΔP", "φC", "φQ", "CF")]
        rows = []
        for editor in runs.editors:
            result = runs.get(model, editor, regime)
            if result is None:
                continue
            row = [editor]
            for split in SPLITS:
                s = result["shapley"].get(split)
                row += [number(s and s[key]) for key in ("dP", "phi_C", "phi_Q")]
                row.append(number(s and s["CF"]))
            rows.append(row)
        lines += [
            f"## Table {first + offset}: {title} Results for {model} across Generalization and Specificity "
            f"(k={runs.k})",
            "",
            *markdown(header, rows),
            "",
        ]
    return lines


def tables(runs: Sequence[Path]) -> str:
    """Markdown: the study's Tables 4-7 and 9-14 (those the runs have), then the runs behind them."""
    found = Runs(runs)
    lines = ["# API-update editing study: the paper's tables", ""]
    if found.has("single"):
        lines += _c_p_table(found, "single", 4) + _table_5(found) + _table_6(found)
    if found.has("successive"):
        lines += _c_p_table(found, "successive", 7)
    if found.has("single"):
        lines += _per_model(found, "single", 9)
    if found.has("successive"):
        lines += _per_model(found, "successive", 12)
    lines += [
        "C = Compiles, P = Pass, A = Adoption, W = Workaround (fractions); ΔP = P1 - P0, φC + φQ = ΔP, "
        "CF = |φC| / (|φC| + |φQ|) × 100 (eval/apiupdate/metrics.py). '–': the run has no such figure. "
        "The study's Tables 9-11 and 12-14 are CodeLlama, CodeQwen and DeepSeek; here one per model, in "
        "the order given.",
        "",
        "## Runs",
        "",
        *markdown(
            ["Model", "Editor", "Regime", "Run"],
            [[*key, str(path)] for key, (path, _) in found.by_key.items()],
        ),
    ]
    return "\n".join(lines) + "\n"
