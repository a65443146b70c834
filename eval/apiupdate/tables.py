"""The API-update editing study's tables from finished study runs (`results.json` of
`python -m eval.apiupdate_edit`, one per model x editor x regime):

- Table 4 (single edits) and Table 7 (successive edits): each model's Compiles@k and Pass@k side
  by side on generalization and specificity, with ΔP and CF averaged over models;
- Table 5: the canonically filtered generalization set, C/P/A/W@k per model, the pre-edit row
  C and P on that set (1.00 by construction: the set is what the unedited model solved);
- Table 6: the non-workaroundable set, Compiles@k and Pass@k per model; where a model's runs
  have no such rows the table says why (the benchmark's build, or `max_apis`);
- Tables 9-11 (single) and 12-14 (successive): one table per model, ΔP, φC, φQ and CF per editor.

After them, what the paper's tables leave out: C/P/A/W@k on every split the runs scored (the
reliability rows, A and W beside C and P, the successive regime's smaller sets), the Shapley split
on the splits Tables 9-14 do not show, and, given several models, mean rows over the models.

The study reports k = 5; the runs' own k (`shapley_k`, the largest k their n allows) is used and
named in each heading. A "pre-edit" row holds each model's unedited figures. The last section maps
every (model, editor, regime) to its run folder, so each cell traces to one run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.errors import UserError
from eval.apiupdate.report import STUDY_SPLITS
from eval.tables import markdown, number, read_run

MADE_BY = "python -m eval.apiupdate_edit"
SPLITS = ("generalization", "specificity")  # the splits of Tables 4, 7 and 9-14
SHORT = {"generalization": "Gen.", "specificity": "Spec."}
RATES = {"C": "compiles", "P": "pass", "A": "adoption", "W": "workaround"}
SHAPLEY = ("dP", "phi_C", "phi_Q", "CF")


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


CAPTIONS = {  # the paper's own captions
    4: "Model performance for single edits across Generalization and Specificity. "
    "Aggregate ΔP and CF are averaged across models.",
    5: "Model performance for single edits on the canonically filtered Generalization set.",
    6: "Performance for single edits on the non-workaroundable subset. "
    "Only solutions using the target API can succeed.",
    7: "Performance under successive edits on Generalization and Specificity. "
    "Aggregate ΔP and CF are averaged across models.",
}


def _heading(number_: int, k: int) -> str:
    return f"## Table {number_}: {CAPTIONS[number_]} (k={k})"


def _c_p_table(runs: Runs, regime: str, number_: int) -> list[str]:
    """Tables 4 and 7: per split, each model's C@k and P@k side by side, then ΔP and CF averaged
    over the models (means of the per-model Shapley figures of Tables 9-14)."""
    k = runs.k
    header = ["Method"]
    for split in SPLITS:
        header += [f"{m} {SHORT[split]} {c}@{k}" for m in runs.models for c in ("C", "P")]
        header += [f"{SHORT[split]} ΔP (avg)", f"{SHORT[split]} CF (avg)"]
    pre = ["pre-edit"]
    for split in SPLITS:
        pre += [_rate(runs.before(m), split, c, k) for m in runs.models for c in ("compiles", "pass")]
        pre += ["", ""]
    rows = [pre]
    for editor in runs.editors:
        results = {m: runs.get(m, editor, regime) for m in runs.models}
        if not any(results.values()):
            continue
        row = [editor]
        for split in SPLITS:
            row += [
                _rate(r and r["after"], split, c, k) for r in results.values() for c in ("compiles", "pass")
            ]
            shapley = [r["shapley"][split] for r in results.values() if r and split in r["shapley"]]
            row.append(number(_mean([s["dP"] for s in shapley])))
            row.append(number(_mean([s["CF"] for s in shapley if s["CF"] is not None])))
        rows.append(row)
    return [_heading(number_, k), "", *markdown(header, rows), ""]


def _split_table(runs: Runs, number_: int, split: str, columns: dict[str, str]) -> list[str]:
    """One split's rates after single edits, per model (`columns`: label -> metric); the pre-edit
    row has what the paper prints there, Compiles and Pass of the unedited model."""
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
    return [_heading(number_, k), "", *markdown(header, rows), ""]


def _table_5(runs: Runs) -> list[str]:
    return _split_table(runs, 5, "generalization_canonical", RATES)


def _table_6(runs: Runs) -> list[str]:
    """Filled where the runs evaluated the non-workaroundable rows; where a model's runs did not,
    a line says why instead of a column of '–'."""
    gaps = {m: _nonworkaround_gap(runs, m) for m in runs.models}
    gaps = {m: why for m, why in gaps.items() if why}
    notes = [f"- {m}: no non-workaroundable figures: {why}." for m, why in gaps.items()]
    if len(gaps) == len(runs.models):
        return [_heading(6, runs.k), "", "Not filled:", "", *notes, ""]
    lines = _split_table(runs, 6, "nonworkaround", {"Compiles": "compiles", "Pass": "pass"})
    return lines + (notes + [""] if notes else [])


def _nonworkaround_gap(runs: Runs, model: str) -> str | None:
    """Why a model's single-edit runs hold no non-workaroundable figures (None when they do): the
    benchmark was built without the set, or `max_apis` left its APIs out of the runs."""
    results = [r for (m, _, regime), (_, r) in runs.by_key.items() if m == model and regime == "single"]
    if not results:
        return "no single-edit run of this model was given"
    if any("nonworkaround" in (r.get("after") or {}) for r in results):
        return None
    config = results[0].get("config") or {}
    bench = results[0].get("benchmark") or (config.get("benchmark") or {}).get("path")
    max_apis = results[0].get("max_apis") or config.get("max_apis")
    manifest = Path(bench, "manifest.json") if bench else None
    if manifest and manifest.is_file():
        built = json.loads(manifest.read_text(encoding="utf-8"))
        if not built.get("rows_per_split", {}).get("nonworkaround"):
            return f"its benchmark {bench} has none (built with nonworkaround={built.get('nonworkaround')})"
    if max_apis:
        return f"max_apis={max_apis} left the non-workaroundable APIs out of its runs"
    return "its runs evaluated no non-workaroundable row (build the benchmark with nonworkaround=appendix_b)"


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


def _groups(runs: Runs) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(editor, regime) -> its runs over the models, for the mean rows; none with a single model."""
    if len(runs.models) < 2:
        return {}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for (_, editor, regime), (_, result) in runs.by_key.items():
        groups.setdefault((editor, regime), []).append(result)
    return groups


def _figures(result: dict[str, Any], split: str, k: int) -> list[float | None]:
    """C and P before the edit, then C/P/A/W after it, on `split`."""
    before, after = result["before"].get(split) or {}, result["after"].get(split) or {}
    return [before.get(f"compiles@{k}"), before.get(f"pass@{k}")] + [
        after.get(f"{metric}@{k}") for metric in RATES.values()
    ]


def _column_means(rows: list[list[float | None]]) -> list[float | None]:
    return [_mean([v for v in column if v is not None]) for column in zip(*rows, strict=True)]


def _every_split(runs: Runs) -> list[str]:
    """C/P/A/W@k on each split every run scored, then the means over models of each (editor, regime,
    split). Tables 4, 6 and 7 show C and P of some of these rows; Table 5 shows the single edits'
    canonical rows whole, so they are left out here."""
    k = runs.k
    rows = [
        [*key, split, *map(number, _figures(result, split, k))]
        for key, (_, result) in runs.by_key.items()
        for split in STUDY_SPLITS
        if split in result["after"] and (key[2], split) != ("single", "generalization_canonical")
    ]
    for (editor, regime), results in _groups(runs).items():
        for split in STUDY_SPLITS:
            figures = [_figures(r, split, k) for r in results if split in r["after"]]
            if figures:
                rows.append(["mean", editor, regime, split, *map(number, _column_means(figures))])
    header = ["Model", "Editor", "Regime", "Split", f"C@{k} pre", f"P@{k} pre"]
    header += [f"{label}@{k}" for label in RATES]
    return [
        f"## Every split, before and after the edits (k={k})",
        "",
        *markdown(header, rows),
        "",
        "pre: the unedited model in the unmodified environment (after per-model filtering). "
        "generalization_canonical: the generalization rows whose passing pre-edit output calls the "
        "target API (the canonically filtered set, Table 5). mean: over the models.",
        "",
    ]


def _shapley_rest(runs: Runs) -> list[str]:
    """The Shapley split of ΔP@k on the splits Tables 9-14 leave out, then its means over models
    on every split (Tables 4 and 7 show only the mean ΔP and CF)."""
    rows = [
        [*key, split, *(number(result["shapley"][split][name]) for name in SHAPLEY)]
        for key, (_, result) in runs.by_key.items()
        for split in STUDY_SPLITS
        if split not in SPLITS and split in result["shapley"]
    ]
    for (editor, regime), results in _groups(runs).items():
        for split in STUDY_SPLITS:
            values = [r["shapley"][split] for r in results if split in r["shapley"]]
            if values:
                means = [_mean([v[name] for v in values if v[name] is not None]) for name in SHAPLEY]
                rows.append(["mean", editor, regime, split, *map(number, means)])
    if not rows:
        return []
    return [
        f"## Shapley split of ΔP@{runs.k}: the other splits, and the means over models",
        "",
        *markdown(["Model", "Editor", "Regime", "Split", "ΔP", "φC", "φQ", "CF"], rows),
        "",
        "ΔP = φC + φQ with Pass = Compiles × Q; C1 = 0 takes Q1 := Q0; CF is '–' when ΔP = 0 "
        "(a mean CF is over the models where it is defined).",
        "",
    ]


def tables(runs: Sequence[Path]) -> str:
    """Markdown: the study's Tables 4-7 and 9-14 (those the runs have), what they leave out, then
    the runs behind them."""
    found = Runs(runs)
    lines = ["# API-update editing study", ""]
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
        *_every_split(found),
        *_shapley_rest(found),
        "## Runs",
        "",
        *markdown(
            ["Model", "Editor", "Regime", "Run"],
            [[*key, str(path)] for key, (path, _) in found.by_key.items()],
        ),
    ]
    return "\n".join(lines) + "\n"


def plot_results(
    results: Sequence[dict[str, Any]], k: int, path: Path, split: str = "generalization"
) -> Path:
    """C/P/A/W@k bars on `split`, one group per editor, one panel per (regime, model), at `path`.
    A metric a run does not hold (the paper's successive tables have no A/W) draws no bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    regimes = [r for r in ("single", "successive") if any(x["regime"] == r for x in results)]
    models = _unique(x["model"] for x in results)
    editors = _unique(x["editor"] for x in results)
    fig, axes = plt.subplots(
        len(regimes),
        len(models),
        figsize=(1.2 * len(editors) * len(models) + 2, 3.5 * len(regimes)),
        squeeze=False,
    )
    width = 0.8 / len(RATES)
    for axes_row, regime in zip(axes, regimes, strict=True):
        for ax, model in zip(axes_row, models, strict=True):
            found = {x["editor"]: x for x in results if x["regime"] == regime and x["model"] == model}
            for i, (label, metric) in enumerate(RATES.items()):
                values = [_value(found.get(e), split, metric, k) for e in editors]
                ax.bar(np.arange(len(editors)) + i * width, values, width, label=f"{label}@{k}")
            ax.set_xticks(np.arange(len(editors)) + width * (len(RATES) - 1) / 2, editors, rotation=30)
            ax.set(ylim=(0, 1), title=f"{model}, {regime} edits ({split})")
            ax.legend(fontsize="small", ncols=len(RATES))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _value(result: dict[str, Any] | None, split: str, metric: str, k: int) -> float:
    value = (((result or {}).get("after") or {}).get(split) or {}).get(f"{metric}@{k}")
    return float("nan") if value is None else value


def plot(runs: Sequence[Path], path: Path) -> Path:
    """The study's figure beside its tables (`python -m eval.tables apiupdate ... --out T.md`
    writes T.png): per editor and regime, the C/P/A/W bars."""
    found = Runs(runs)
    return plot_results([r for _, r in found.by_key.values()], found.k, path)
