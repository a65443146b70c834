"""CanItEdit's Table 1 for any benchmark: what it covers (languages, change kinds, topics) and how big
its edits are (lines, Levenshtein distance, instruction length), so benchmarks compare on one table.

Rules: lines are `str.splitlines()` (a trailing newline adds none); the Levenshtein distance is
rapidfuzz's character edit distance from `before` to `after`; instruction tokens are whitespace-separated
words (`str.split()`, not a model tokenizer), per split: `descriptive`, `lazy`, and `other` pooling every
other split (HumanEvalFix's per-language instructions). A problem without a change kind or topic counts
under "unlabelled".
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rapidfuzz.distance import Levenshtein

from core.problems import Problem

UNLABELLED = "unlabelled"
SPLITS = ("descriptive", "lazy", "other")


def _counts(values: list[str]) -> dict[str, int]:
    """Counts, most frequent first, ties alphabetical."""
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])))


def _summary(values: Sequence[float], extremes: bool = False) -> dict[str, float]:
    if not values:
        return {"n": 0}
    out: dict[str, float] = {"n": len(values), "mean": statistics.fmean(values)}
    out["median"] = statistics.median(values)
    if extremes:
        out["min"], out["max"] = min(values), max(values)
    return out


def _split_kind(split: str) -> str:
    return split if split in ("descriptive", "lazy") else "other"


def table1(problems: Sequence[Problem]) -> dict[str, Any]:
    """CanItEdit Table 1 statistics of `problems` (see the module docstring for the rules)."""
    tokens: dict[str, list[int]] = {split: [] for split in SPLITS}
    for p in problems:
        for split, text in p.instructions.items():
            tokens[_split_kind(split)].append(len(text.split()))
    return {
        "problems": len(problems),
        "by_language": _counts([p.language for p in problems]),
        "by_change_kind": _counts([p.taxonomy.get("change_kind") or UNLABELLED for p in problems]),
        "by_topic": _counts([p.taxonomy.get("topic") or UNLABELLED for p in problems]),
        "lines_before": _summary([len(p.before.splitlines()) for p in problems], extremes=True),
        "lines_after": _summary([len(p.after.splitlines()) for p in problems], extremes=True),
        "levenshtein": _summary([Levenshtein.distance(p.before, p.after) for p in problems]),
        "instruction_tokens": {split: _summary(v) for split, v in tokens.items() if v},
    }


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _counts_table(title: str, counts: dict[str, int], total: int) -> list[str]:
    rows = [f"| {title} | Problems | % |", "|---|---:|---:|"]
    rows += [f"| {k} | {v} | {100 * v / total:.1f} |" for k, v in counts.items()]
    return [*rows, ""]


def render_table1(stats: dict[str, Any]) -> str:
    """Markdown for `table1`'s output: the size table, then one count table per category."""
    total = max(stats["problems"], 1)
    rows = [
        f"**{stats['problems']} problems**",
        "",
        "| Statistic | Mean | Median | Min | Max |",
        "|---|---:|---:|---:|---:|",
    ]
    sized = [
        ("Lines (before)", stats["lines_before"]),
        ("Lines (after)", stats["lines_after"]),
        ("Levenshtein distance (chars)", stats["levenshtein"]),
    ]
    sized += [(f"Instruction words ({k})", v) for k, v in stats["instruction_tokens"].items()]
    for label, s in sized:
        if not s.get("n"):
            continue
        cells = [_fmt(s[k]) if k in s else "" for k in ("mean", "median", "min", "max")]
        rows.append(f"| {label} | {' | '.join(cells)} |")
    rows.append("")
    rows += _counts_table("Language", stats["by_language"], total)
    rows += _counts_table("Change kind", stats["by_change_kind"], total)
    rows += _counts_table("Topic", stats["by_topic"], total)
    return "\n".join(rows).rstrip() + "\n"
