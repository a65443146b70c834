"""The ExcessCode metrics' names in results.json, where each was published, and older layouts.

Two different metrics have been published under the name ExcessCode, and readers of
`results.json` (eval's report and tables, train's model card) must show both with their
source, so the names live here, in the one place evaluation and training both import:

- ``excess_code``: the CanItEdit paper's (§5.1, Table 3): per problem the median of
  (100 - line coverage %) over its passing completions, averaged over problems that have one.
  nuprl/CanItEdit's first `benchmark/pass_k.py` printed it as ExcessCode; today's prints the
  same number as MeanMedianCoverage.
- ``excess_code_repo`` (± ``excess_code_repo_stderr``): the repository's later ExcessCode
  (`pass_k.py` since its "v2 evaluation code"): per problem the mean over passing completions
  of uncovered lines / `difflib.Differ` lines, averaged over problems, x 100 (± ExcessCodeSE).
- ``excess_code_changed_lines``: ours, never published (the uncovered share of the lines the
  edit wrote, aggregated like ``excess_code_repo``).

Results written before this layout had ``excess_code`` = the repository's metric, with
``excess_code_stderr`` beside it and the paper's as ``excess_code_v1``/``mean_median_coverage``;
`current_layout` reads them under today's names so no reader shows one metric as the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EXCESS_CODE = "excess_code"
EXCESS_CODE_REPO = "excess_code_repo"
EXCESS_CODE_REPO_STDERR = "excess_code_repo_stderr"
EXCESS_CODE_CHANGED_LINES = "excess_code_changed_lines"


@dataclass(frozen=True)
class PublishedMetric:
    """A results key, the name a report shows, and where the metric was published."""

    key: str
    name: str
    source: str
    stderr_key: str | None = None


PUBLISHED: tuple[PublishedMetric, ...] = (
    PublishedMetric(
        EXCESS_CODE,
        "ExcessCode (paper)",
        "the CanItEdit paper, §5.1 and Table 3: the median line coverage of passing completions, "
        "averaged across problems (those without a passing completion omitted), shown as "
        "excess = 100 - coverage; the first nuprl/CanItEdit `benchmark/pass_k.py` printed it as "
        "ExcessCode, today's prints it as MeanMedianCoverage.",
    ),
    PublishedMetric(
        EXCESS_CODE_REPO,
        "ExcessCode (repo)",
        "nuprl/CanItEdit `benchmark/pass_k.py` since its v2 evaluation code (columns ExcessCode ± "
        "ExcessCodeSE): per problem, the mean over passing completions of uncovered lines / "
        "`difflib.Differ` lines of before vs. completion; the mean over problems, × 100.",
        EXCESS_CODE_REPO_STDERR,
    ),
)


def is_legacy(split_metrics: Mapping[str, Any]) -> bool:
    """True for a split's metrics written when ``excess_code`` held the repository's metric
    (its standard error was then ``excess_code_stderr``, a key today's layout never writes)."""
    return "excess_code_stderr" in split_metrics and EXCESS_CODE_REPO not in split_metrics


def current_layout(split_metrics: Mapping[str, Any]) -> dict[str, Any]:
    """One split's metrics under today's names; metrics already in today's layout are returned as
    they are. A legacy file without the paper's figure (written before ``excess_code_v1``) gets
    ``excess_code`` None: its samples' coverage percents were not kept in results.json."""
    out = dict(split_metrics)
    if not is_legacy(out):
        return out
    out[EXCESS_CODE_REPO] = out.pop(EXCESS_CODE, None)
    out[EXCESS_CODE_REPO_STDERR] = out.pop("excess_code_stderr", None)
    paper = out.pop("excess_code_v1", None)
    median = out.pop("mean_median_coverage", None)
    out[EXCESS_CODE] = paper if paper is not None else median
    return out
