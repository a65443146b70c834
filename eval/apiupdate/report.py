"""Markdown for the API-update benchmark: the build's count table, an evaluation's report, and an
editing run's report.md (per model x editor x regime: C/P/A/W@k per split, then the Shapley table;
several runs' figures come out of `python -m eval.tables apiupdate`, eval/apiupdate/tables.py).

Rates are percentages in the report (results.json keeps fractions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eval.apiupdate.catalogue import TYPE_NAMES, TYPES
from eval.apiupdate.enforce import OUTCOMES

SPLITS = ("reliability", "generalization", "specificity", "nonworkaround")
# The study report also shows the canonically filtered generalization set (the paper's Table 5):
# the generalization rows whose passing pre-edit output calls the target API.
STUDY_SPLITS = ("reliability", "generalization", "generalization_canonical", "specificity", "nonworkaround")


def _pct(value: float | None) -> str:
    return "NA" if value is None else f"{100 * value:.1f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(str(c) for c in row) + " |" for row in rows),
    ]


def count_table(manifest: dict[str, Any]) -> str:
    """Rows per modification type and split, distinct APIs, and what was dropped."""
    per_type = manifest["rows_per_type"]
    rows = []
    for t in TYPES:
        cells = [per_type.get(s, {}).get(t, 0) for s in SPLITS]
        rows.append([f"{t} ({TYPE_NAMES[t]})", *cells, sum(cells)])
    totals = [manifest["rows_per_split"].get(s, 0) for s in SPLITS]
    rows.append(["all", *totals, sum(totals)])
    lines = _table(["type", *SPLITS, "total"], rows)
    lines += [
        "",
        f"APIs called: {manifest['apis_called']} ({manifest['apis_modifiable']} modifiable); "
        f"modified APIs kept: {manifest['distinct_modified_apis']}; "
        f"synthetic APIs (API x type): {manifest['distinct_synthetic_apis']}",
        f"source problems: {manifest['input_problems']} in, {manifest['verified_problems']} verified",
        *_split_lines(manifest),
        f"dropped: {manifest['dropped']}",
    ]
    return "\n".join(lines)


def _split_lines(manifest: dict[str, Any]) -> list[str]:
    """The realized split sizes beside App. A.2's, and the problems shared across APIs' roles
    (absent from manifests written before they were counted)."""
    if "split_sizes" not in manifest:
        return []
    sizes = ", ".join(f"{s} {v['built']} (paper {v['paper']})" for s, v in manifest["split_sizes"].items())
    return [
        f"split sizes (problem-API rows, the non-workaroundable set apart): {sizes}",
        f"splits disjoint {manifest['disjoint']}: {manifest['overlap_across_apis']} problems are one API's "
        f"reliability and another's generalization rows (overlap_across_apis), "
        f"{manifest['overlap_reliability_specificity']} one API's reliability and another's specificity rows",
    ]


def _rate_cells(m: dict[str, Any], k: int) -> list[str]:
    return [_pct(m.get(f"{name}@{k}")) for name in ("compiles", "pass", "adoption", "workaround")]


def render_eval_report(model: str, results: dict[str, Any], ks: Sequence[int]) -> str:
    """report.md of `eval.run benchmark=apiupdate`: rates per split and type, and the taxonomy."""
    metrics = results["metrics"]
    lines = [f"# apiupdate: {model}", ""]
    header = ["Split", "Problems", "Samples"]
    usable = [k for k in ks if any(f"pass@{k}" in m for m in metrics.values())]
    for k in usable:
        header += [f"C@{k}", f"P@{k}", f"A@{k}", f"W@{k}"]
    rows = []
    for split, m in metrics.items():
        cells = [split, m["problems"], m["samples"]]
        for k in usable:
            cells += _rate_cells(m, k)
        rows.append(cells)
    lines += _table(header, rows)
    lines += [
        "",
        "C = Compiles, P = Pass, A = Adoption (passes and calls the new API), W = Workaround = P - A; %.",
        "",
    ]
    lines += ["## By modification type", ""]
    rows = []
    for split, m in metrics.items():
        for t, tm in m["by_type"].items():
            cells = [split, f"{t} ({TYPE_NAMES.get(t, t)})", tm["problems"]]
            for k in usable:
                cells += _rate_cells(tm, k)
            rows.append(cells)
    lines += _table(["Split", "Type", "Problems", *header[3:]], rows)
    lines += ["", "## Outcomes (samples)", ""]
    rows = [[o, *(metrics[s]["outcomes"].get(o, 0) for s in metrics)] for o in OUTCOMES]
    lines += _table(["Outcome", *metrics], rows)
    lines += ["", "Outcome rules (first that applies):", ""]
    lines += [f"- **{o}**: {why}" for o, why in OUTCOMES.items()]
    return "\n".join(lines) + "\n"


def render_study_report(results: list[dict[str, Any]], k: int) -> str:
    """The editing study's layout. `results`: one dict per (model, editor, regime) with `before`
    and `after` metrics per split (score_outcomes dicts) and `shapley` per split."""
    lines = ["# API-update editing", ""]
    header = [
        "Model",
        "Editor",
        "Regime",
        "Split",
        f"C@{k} pre",
        f"P@{k} pre",
        f"C@{k}",
        f"P@{k}",
        f"A@{k}",
        f"W@{k}",
    ]
    rows = []
    for r in results:
        for split in STUDY_SPLITS:
            after = r["after"].get(split)
            if not after:
                continue
            before = r["before"].get(split, {})
            rows.append(
                [
                    r["model"],
                    r["editor"],
                    r["regime"],
                    split,
                    _pct(before.get(f"compiles@{k}")),
                    _pct(before.get(f"pass@{k}")),
                    *_rate_cells(after, k),
                ]
            )
    lines += _table(header, rows)
    lines += [
        "",
        "pre: the unedited model in the unmodified environment (after per-model filtering). C = Compiles, "
        "P = Pass, A = Adoption, W = Workaround; %. generalization_canonical: the generalization rows "
        "whose passing pre-edit output calls the target API (the canonically filtered set, Table 5).",
        "",
        f"## Shapley attribution of ΔPass@{k}",
        "",
        "ΔPass = φC + φQ with Pass = Compiles × Q; CF = |φC| / (|φC| + |φQ|) × 100 (the share of the change "
        "that compilation explains); C1 = 0 takes Q1 := Q0; CF is NA when ΔPass = 0. Means are over models.",
        "",
    ]
    rows = []
    for r in results:
        for split, s in r["shapley"].items():
            rows.append(
                [
                    r["model"],
                    r["editor"],
                    r["regime"],
                    split,
                    *(f"{s[key]:.3f}" for key in ("C0", "P0", "C1", "P1", "dP", "phi_C", "phi_Q")),
                    "NA" if s["CF"] is None else f"{s['CF']:.1f}",
                ]
            )
    for (editor, regime, split), values in _means(results).items():
        cf = [v["CF"] for v in values if v["CF"] is not None]
        rows.append(
            [
                "mean",
                editor,
                regime,
                split,
                *(
                    f"{sum(v[key] for v in values) / len(values):.3f}"
                    for key in ("C0", "P0", "C1", "P1", "dP", "phi_C", "phi_Q")
                ),
                f"{sum(cf) / len(cf):.1f}" if cf else "NA",
            ]
        )
    lines += _table(
        ["Model", "Editor", "Regime", "Split", "C0", "P0", "C1", "P1", "ΔP", "φC", "φQ", "CF"], rows
    )
    return "\n".join(lines) + "\n"


def _means(results: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """Aggregate rows: per (editor, regime, split), the per-model values, when there are several models."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in results:
        for split, s in r["shapley"].items():
            groups.setdefault((r["editor"], r["regime"], split), []).append(s)
    models = {r["model"] for r in results}
    return groups if len(models) > 1 else {}
