"""The published audit's tables from finished audits: `tables([DIR, ...])` reads each folder's `audit.json`
(written by `python -m eval.audit out=DIR`) and returns Markdown with one column per run, headed by its
benchmark and folder so every cell traces to its run, beside the paper's own figures:

- Table 1 (RQ1): languages, edit intents (the paper's Figure 1), domains (Figure 2), AI/ML subcategories;
- RQ2/RQ3 as a table: test counts, whole-file and diff-region coverage, the suites under the 75%
  diff-region cut, test scope, mutation kill rates, distinct contexts and shared codebases, and the
  problems no model solves where the audit was given model results.

`python -m eval.tables audit RUN...` calls it; nothing here runs a benchmark.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.errors import UserError
from eval.audit import rq1
from eval.audit.classify import describe
from eval.audit.report import PUBLISHED

Row = tuple[str, Callable[[dict[str, Any]], str], str, str]  # figure, ours, CanItEdit, EDIT-Bench


def load(folder: Path) -> dict[str, Any]:
    """The audit in `folder`; a UserError naming the folder when there is none or it is not an audit."""
    path = Path(folder) / "audit.json"
    if not path.is_file():
        raise UserError(f"{folder}: no audit.json; give folders written by python -m eval.audit out=DIR")
    try:
        audit = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: not JSON ({err}); was the audit interrupted? run it again") from err
    if not isinstance(audit, dict) or not {"benchmark", "totals", "problems"} <= set(audit):
        raise UserError(
            f"{path}: not an audit (no benchmark, totals and problems); give python -m eval.audit's out"
        )
    return audit


def _f(value: Any, suffix: str = "") -> str:
    if value is None:
        return "NA"
    return f"{value:.1f}{suffix}" if isinstance(value, float) else f"{value}{suffix}"


def _of(k: int, n: int) -> str:
    return f"{k} of {n} ({100 * k / n:.1f}%)" if n else f"{k} of 0"


def _unsolved(a: dict[str, Any]) -> str:
    u = a.get("unsolved")
    if not u:
        return "no model results given"
    causes = ", ".join(f"{k} {v}" for k, v in sorted(u["causes"].items())) or "none"
    return (
        f"{len(u['unsolved'])} of {u['problems_seen']} over {len(u['models'])} model run(s); causes: {causes}"
    )


def _sharing(a: dict[str, Any]) -> str:
    ind = a.get("independence") or {}
    if "problems_sharing" not in ind:
        return "NA"
    return f"{_of(ind['problems_sharing'], a['totals']['problems'])} in {len(ind.get('clusters', []))} cluster(s)"


def _ran(a: dict[str, Any]) -> int:
    t = a["totals"]
    return t["problems"] - t.get("not_runnable", 0)


def _pub(figure: str) -> tuple[str, str]:
    ci, eb = PUBLISHED[figure]
    return ci or "—", eb or "—"


ROWS: list[Row] = [
    ("problems", lambda a: f"{a['totals']['problems']} ({_ran(a)} run here)", "105", "108 (91 executable)"),
    (
        "reference passes / code before the edit fails",
        lambda a: f"{a['totals']['pass_after']} / {_ran(a)}, {a['totals']['fail_before']} / {_ran(a)}",
        "enforced by its pipeline",
        "not validated (no references released)",
    ),
    ("tests (median)", lambda a: _f(a["totals"]["assertions_median"]), *_pub("tests (median)")),
    ("tests (mean)", lambda a: _f(a["totals"]["assertions_mean"]), *_pub("tests (mean)")),
    ("single-test problems", lambda a: _f(a["totals"].get("single_test")), "—", "14"),
    (
        "whole-file coverage (median)",
        lambda a: _f(a["totals"]["coverage_median"], "%"),
        *_pub("whole-file coverage (median)"),
    ),
    (
        "whole-file coverage (mean)",
        lambda a: _f(a["totals"]["coverage_mean"], "%"),
        *_pub("whole-file coverage (mean)"),
    ),
    (
        "diff-region coverage (median)",
        lambda a: _f(a["totals"]["diff_coverage_median"], "%"),
        *_pub("diff-region coverage (median)"),
    ),
    (
        "diff-region coverage (mean)",
        lambda a: _f(a["totals"]["diff_coverage_mean"], "%"),
        *_pub("diff-region coverage (mean)"),
    ),
    (
        "0% diff-region coverage",
        lambda a: str(sum(r.get("diff_coverage") == 0 for r in a["problems"])),
        "—",
        "11",
    ),
    (
        "suites below 75% diff-region coverage",
        lambda a: _of(a["totals"]["below_75"], a["totals"].get("diff_coverage_measured", 0)),
        *_pub("suites below 75% diff-region coverage"),
    ),
    (
        "low-coverage suites that miss out-of-region changes",
        lambda a: _of(a["totals"]["low_coverage_blind_outside"], a["totals"]["low_coverage_scoped"]),
        *_pub("low-coverage suites that miss out-of-region changes"),
    ),
    (
        "suites blind outside the edit (per-test coverage)",
        lambda a: _of(a["totals"]["blind_outside"], a["totals"]["scope_measured"]),
        "—",
        "56% scope to the edit only (LLM-labelled)",
    ),
    (
        "mutants killed outside the diff",
        lambda a: (
            f"{_f(a['totals']['kill_rate_outside'], '%')} ({a['totals']['killed_outside']} of "
            f"{a['totals']['scored_outside']})"
        ),
        "— (not measured)",
        "— (not measured)",
    ),
    (
        "mutants killed inside the diff",
        lambda a: (
            f"{_f(a['totals']['kill_rate_inside'], '%')} ({a['totals']['killed_inside']} of "
            f"{a['totals']['scored_inside']})"
        ),
        "— (not measured)",
        "— (not measured)",
    ),
    (
        "distinct contexts",
        lambda a: f"{a['totals']['distinct_contexts']} / {a['totals']['problems']}",
        *_pub("distinct contexts"),
    ),
    ("problems sharing a codebase", _sharing, "6 of 105 (6%) in 3 pairs", "31 of 108 (29%) in 9 clusters"),
    ("unsolved by every model", _unsolved, "—", "15 of 108 over 40 models (11 trace to benchmark artifacts)"),
]


def _cell(fn: Callable[[dict[str, Any]], str], audit: dict[str, Any]) -> str:
    try:
        return fn(audit)
    except (KeyError, TypeError):  # an audit.json from before the figure existed
        return "NA"


def rq23(columns: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The RQ2/RQ3 figures of each audit beside the paper's (CanItEdit, EDIT-Bench)."""
    heads = [h for h, _ in columns]
    lines = [
        f"| Figure | {' | '.join(heads)} | CanItEdit (published) | EDIT-Bench (published) |",
        "|---|" + "---:|" * (len(heads) + 2),
    ]
    for figure, fn, ci, eb in ROWS:
        lines.append(f"| {figure} | {' | '.join(_cell(fn, a) for _, a in columns)} | {ci} | {eb} |")
    lines += [
        "",
        '"Tests" are assertions (see `eval/audit/density.py`). The published coverage figures are over '
        "EDIT-Bench's 91 executable problems; the paper reports no diff-region view for CanItEdit (its whole-file "
        "coverage is near complete) and ran no mutation testing. The published scope figure is an LLM's "
        "label of each suite; this audit measures scope with per-test coverage.",
    ]
    return "\n".join(lines) + "\n"


def tables(runs: Sequence[Path]) -> str:
    """Markdown of Table 1 and the RQ2/RQ3 figures for the audits in `runs` (folders holding audit.json)."""
    if not runs:
        raise UserError("give at least one audit folder (python -m eval.audit out=DIR)")
    loaded = [(Path(folder), load(Path(folder))) for folder in runs]
    columns = [(f"{a['benchmark']} (`{folder}`)", a) for folder, a in loaded]
    sources = [
        f"- `{folder}/audit.json`: benchmark {a['benchmark']}, {a['totals']['problems']} problems; "
        f"{describe(a['classifier']) if 'classifier' in a else 'no RQ1 labels (audited before the classifier)'}."
        for folder, a in loaded
    ]
    return "\n".join(
        [
            "# Audit tables",
            "",
            "One column per run, headed by its benchmark and folder; the paper's columns are its published figures.",
            "",
            *sources,
            "",
            "## Table 1: representativeness (RQ1)",
            "",
            rq1.render(columns),
            "## RQ2 and RQ3: test adequacy, independence, unsolved problems",
            "",
            rq23(columns),
        ]
    )
