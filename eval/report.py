"""report.md: pass@1 and both published ExcessCode metrics per split, each named and with where it
was published, the metrics by split, execution statuses and (when given) a per-problem table.

pass@k is a percentage everywhere in the report (results.json keeps fractions). "ExcessCode
(paper)" is the CanItEdit paper's Table 3 metric, the default `excess_code`; "ExcessCode (repo)"
is the later one of nuprl/CanItEdit's `benchmark/pass_k.py` (`core.excess_metrics`).
"""

from __future__ import annotations

from typing import Any

from core.excess_metrics import PUBLISHED, current_layout

# the by-split table's other ExcessCode columns: ours, never published
OURS = {"excess_code_changed_lines": "ExcessCode (changed lines, ours)"}


def _num(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "NA" if value is None else f"{value * scale:.{digits}f}"


def _pct(m: dict[str, Any], key: str) -> str:
    """pass@k as a percentage with its standard error, as pass_k.py prints pass@1 ("100.0 ± 0.0")."""
    if m.get(key) is None:
        return "NA"
    stderr = m.get(f"{key}_stderr")
    return _num(m[key], 100, 1) + ("" if stderr is None else f" ± {_num(stderr, 100, 1)}")


def _published_cell(m: dict[str, Any], key: str, stderr_key: str | None) -> str:
    """A published metric, "± its standard error" where the source reports one ("NA" when absent)."""
    if m.get(key) is None:
        return "NA"
    return _num(m[key]) + ("" if stderr_key is None else f" ± {_num(m.get(stderr_key))}")


def results_table(model: str, metrics: dict[str, dict[str, Any]]) -> str:
    """| Model | Split | pass@1 (%) | ExcessCode (paper) | ExcessCode (repo) |, a row per split."""
    header = ["Model", "Split", "pass@1 (%)"] + [p.name for p in PUBLISHED]
    rows = []
    for split, m in metrics.items():
        m = current_layout(m)
        rows.append(
            [model, split, _pct(m, "pass@1")] + [_published_cell(m, p.key, p.stderr_key) for p in PUBLISHED]
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
    lines += [f"- **{p.name}** (`{p.key}`): {p.source}" for p in PUBLISHED]
    lines += [
        f"- **{OURS['excess_code_changed_lines']}**, in the table below: this project's variant, not published.",
        "",
        "## Metrics by split",
        "",
    ]
    metrics = {split: current_layout(m) for split, m in metrics.items()}
    names = _metric_names(metrics)
    heads = [_head(name) for name in names]
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
            "| Problem | Split | Passed / n | pass@1 (%) | " + " | ".join(p.name for p in PUBLISHED) + " |",
            "|---|---|---|---|" + "---|" * len(PUBLISHED),
        ]
        for row in per_problem:
            lines.append(
                f"| {row['name']} | {row['split']} | {row['passed']}/{row['n']} | {_num(row['pass@1'], 100, 1)} | "
                + " | ".join(_num(row.get(p.key)) for p in PUBLISHED)
                + " |"
            )
    return "\n".join(lines) + "\n"


def _metric_names(metrics: dict[str, dict[str, Any]]) -> list[str]:
    """pass@k (k ascending; their standard errors go with them), then the ExcessCode family."""
    names: dict[str, None] = {}
    for m in metrics.values():
        names.update(dict.fromkeys(k for k in m if k.startswith("pass@") and not k.endswith("_stderr")))
    passes = sorted(names, key=lambda k: int(k.split("@")[1]))
    stderrs = {p.stderr_key for p in PUBLISHED}
    others: dict[str, None] = {}
    for m in metrics.values():
        others.update(dict.fromkeys(k for k in m if k.startswith("excess") and k not in stderrs))
    return passes + list(others)


def _head(name: str) -> str:
    """A by-split column's heading: pass@k in percent, each ExcessCode metric under its report name."""
    if name.startswith("pass@"):
        return f"{name} (%)"
    return {p.key: p.name for p in PUBLISHED}.get(name) or OURS.get(name, name)
