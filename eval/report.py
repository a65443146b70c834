"""report.md: pass@1 and both published ExcessCode metrics per split, where each was published,
the metrics by split, execution statuses and (when given) a per-problem table.

pass@k is a percentage everywhere in the report (results.json keeps fractions). Metric
names follow nuprl/CanItEdit `benchmark/pass_k.py`: ExcessCode (with ExcessCodeSE) and
MeanMedianCoverage; "ExcessCode v1" is the metric of that script's first version.
"""

from __future__ import annotations

from typing import Any

# (results key, name in the report, where it was published)
PUBLISHED = [
    (
        "excess_code",
        "ExcessCode",
        "the CanItEdit paper's revised versions (after arXiv 2312.12450v1) and nuprl/CanItEdit "
        "`benchmark/pass_k.py` since its v2 evaluation code (columns ExcessCode ± ExcessCodeSE): per "
        "problem, the mean over passing completions of uncovered lines / `difflib.Differ` lines of "
        "before vs. completion; the mean over problems, × 100.",
    ),
    (
        "excess_code_v1",
        "ExcessCode v1",
        "the CanItEdit paper's first version (arXiv 2312.12450v1), Table 3, and the first "
        "`benchmark/pass_k.py` (its column ExcessCode): 100 - the mean over problems of the median "
        "line coverage of passing completions.",
    ),
    (
        "mean_median_coverage",
        "MeanMedianCoverage",
        "today's `benchmark/pass_k.py` column of that name: the mean over problems of the median of "
        "(100 - coverage); the v1 figure under its current name.",
    ),
]


def _num(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "NA" if value is None else f"{value * scale:.{digits}f}"


def _pct(m: dict[str, Any], key: str) -> str:
    """pass@k as a percentage with its standard error, as pass_k.py prints pass@1 ("100.0 ± 0.0")."""
    if m.get(key) is None:
        return "NA"
    stderr = m.get(f"{key}_stderr")
    return _num(m[key], 100, 1) + ("" if stderr is None else f" ± {_num(stderr, 100, 1)}")


def results_table(model: str, metrics: dict[str, dict[str, Any]]) -> str:
    """| Model | Split | pass@1 (%) | ExcessCode | ExcessCode v1 | MeanMedianCoverage |, a row per split."""
    header = ["Model", "Split", "pass@1 (%)"] + [name for _, name, _ in PUBLISHED]
    rows = []
    for split, m in metrics.items():
        ec = m.get("excess_code")
        ec_cell = "NA" if ec is None else f"{ec:.2f} ± {_num(m.get('excess_code_stderr'))}"
        rows.append(
            [model, split, _pct(m, "pass@1"), ec_cell]
            + [_num(m.get(key)) for key, _, _ in PUBLISHED if key != "excess_code"]
        )
    return "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        + ["| " + " | ".join(r) + " |" for r in rows]
    )


def render_report(model: str, benchmark: str, results: dict[str, Any]) -> str:
    metrics, per_problem = results["metrics"], results.get("per_problem") or []
    lines = [
        f"# {benchmark}: {model}",
        "",
        results_table(model, metrics),
        "",
        "Where each metric was published:",
        "",
    ]
    lines += [f"- **{name}**: {where}" for _, name, where in PUBLISHED]
    lines += [
        "- **ExcessCode (changed lines)**, in the table below: this project's variant, not published.",
        "",
        "## Metrics by split",
        "",
    ]
    names = _metric_names(metrics)
    heads = [f"{name} (%)" if name.startswith("pass@") else name for name in names]
    lines += ["| Split | Problems | Samples | " + " | ".join(heads) + " |", "|" + "---|" * (3 + len(names))]
    for split, m in metrics.items():
        values = [_pct(m, name) if name.startswith("pass@") else _num(m.get(name)) for name in names]
        lines.append(f"| {split} | {m['problems']} | {m['samples']} | " + " | ".join(values) + " |")
    lines += ["", "## Execution statuses", "", "| Split | Status | Samples |", "|---|---|---|"]
    for split, m in metrics.items():
        lines += [f"| {split} | {status} | {count} |" for status, count in m["statuses"].items()]
    if any(m.get("passes_by_mode") for m in metrics.values()):
        lines += [
            "",
            "## How passes were judged",
            "",
            "split: the tests ran in a process that runs no program code; delegated: at least one check "
            "was decided by the program's own code (== between two of its objects, its __len__...); "
            "in_process: program and tests in one interpreter; command: other languages, by run token "
            "(docs/sandbox.md).",
            "",
            "| Split | Judged | Passes |",
            "|---|---|---|",
        ]
        for split, m in metrics.items():
            lines += [
                f"| {split} | {mode} | {count} |" for mode, count in m.get("passes_by_mode", {}).items()
            ]
    if per_problem:
        lines += [
            "",
            "## Per problem",
            "",
            "| Problem | Split | Passed / n | pass@1 (%) | ExcessCode |",
            "|---|---|---|---|---|",
        ]
        for row in per_problem:
            lines.append(
                f"| {row['name']} | {row['split']} | {row['passed']}/{row['n']} | {_num(row['pass@1'], 100, 1)} | "
                f"{_num(row.get('excess_code'))} |"
            )
    return "\n".join(lines) + "\n"


def _metric_names(metrics: dict[str, dict[str, Any]]) -> list[str]:
    """pass@k (k ascending; their standard errors go with them), then the ExcessCode family."""
    names: dict[str, None] = {}
    for m in metrics.values():
        names.update(dict.fromkeys(k for k in m if k.startswith("pass@") and not k.endswith("_stderr")))
    passes = sorted(names, key=lambda k: int(k.split("@")[1]))
    others: dict[str, None] = {}
    for m in metrics.values():
        others.update(
            dict.fromkeys(
                k for k in m if (k.startswith("excess") or k.startswith("mean")) and k != "excess_code_stderr"
            )
        )
    return passes + list(others)
