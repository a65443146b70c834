"""report.md: the CanItEdit paper's Table 3 row for this model, the status counts, per problem."""

from __future__ import annotations

from typing import Any


def _num(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "NA" if value is None else f"{value * scale:.{digits}f}"


def table3_row(model: str, metrics: dict[str, dict[str, Any]]) -> str:
    """| Model | <split> pass@1 | <split> ExcessCode | ... | (pass@1 in percent, as the paper)."""
    splits = list(metrics)
    header = ["Model"] + [f"{s.capitalize()} {name}" for s in splits for name in ("pass@1", "ExcessCode")]
    cells = [model]
    for split in splits:
        m = metrics[split]
        p1 = f"{_num(m.get('pass@1'), 100, 1)} ± {_num(m.get('pass@1_stderr'), 100, 1)}"
        ec = m.get("excess_code")
        cells += [p1, "NA" if ec is None else f"{ec:.2f} ± {_num(m.get('excess_code_stderr'))}"]
    return "\n".join(
        [
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
            "| " + " | ".join(cells) + " |",
        ]
    )


def render_report(model: str, benchmark: str, results: dict[str, Any]) -> str:
    metrics, per_problem = results["metrics"], results["per_problem"]
    lines = [f"# {benchmark}: {model}", "", table3_row(model, metrics), ""]
    lines += [
        "## Metrics by split",
        "",
        "| Split | Problems | Samples | " + " | ".join(_metric_names(metrics)) + " |",
    ]
    lines.append("|" + "---|" * (3 + len(_metric_names(metrics))))
    for split, m in metrics.items():
        values = [_num(m.get(name), 1, 4) for name in _metric_names(metrics)]
        lines.append(f"| {split} | {m['problems']} | {m['samples']} | " + " | ".join(values) + " |")
    lines += ["", "## Execution statuses", "", "| Split | Status | Samples |", "|---|---|---|"]
    for split, m in metrics.items():
        lines += [f"| {split} | {status} | {count} |" for status, count in m["statuses"].items()]
    lines += [
        "",
        "## Per problem",
        "",
        "| Problem | Split | Passed / n | pass@1 | ExcessCode |",
        "|---|---|---|---|---|",
    ]
    for row in per_problem:
        lines.append(
            f"| {row['name']} | {row['split']} | {row['passed']}/{row['n']} | {row['pass@1']:.2f} | "
            f"{_num(row['excess_code'])} |"
        )
    return "\n".join(lines) + "\n"


def _metric_names(metrics: dict[str, dict[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for m in metrics.values():
        names.update(
            dict.fromkeys(
                k for k in m if k.startswith("pass@") or k.startswith("excess") or k.startswith("mean")
            )
        )
    return list(names)
