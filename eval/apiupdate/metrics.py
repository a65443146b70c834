"""Compiles@k, Pass@k, Adoption@k, Workaround@k, the outcome taxonomy, and the Shapley split.

Per problem with n samples: c_compile pass the compile stage, c_pass pass, c_adopt pass and
call the new API. Each rate is the unbiased pass@k estimator over those counts, averaged over
problems (`eval/metrics.py`); Workaround@k = Pass@k - Adoption@k.

The Shapley split attributes a change of Pass = Compiles x Q (Q = P / C, the pass rate of
compiling samples) between its two factors, from before (0) to after (1):

    phi_C = 1/2 dC (Q0 + Q1),   phi_Q = 1/2 dQ (C0 + C1),   CF = |phi_C| / (|phi_C| + |phi_Q|) x 100

phi_C + phi_Q = dP exactly. When C1 = 0, Q1 is undefined and Q1 := Q0 (the study's tables: a
collapse from 1.00/1.00 to 0/0 is phi_C = -1, phi_Q = 0, CF = 100); CF is undefined (None)
when dP = 0.

>>> [round(v, 3) for v in shapley_split(1.0, 1.0, 0.76, 0.26)]
[-0.161, -0.579, 21.764]
>>> shapley_split(1.0, 1.0, 0.0, 0.0)
(-1.0, 0.0, 100.0)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eval.metrics import aggregate_pass_at_k

RATES = ("compiles", "pass", "adoption", "workaround")
EPS = 1e-12


def shapley_split(c0: float, p0: float, c1: float, p1: float) -> tuple[float, float, float | None]:
    """(phi_C, phi_Q, CF) for Pass going from p0 to p1 while Compiles goes from c0 to c1."""
    for name, value in (("c0", c0), ("p0", p0), ("c1", c1), ("p1", p1)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name}={value}: rates lie in [0, 1]")
    if p0 > c0 + EPS or p1 > c1 + EPS:
        raise ValueError("a pass rate cannot exceed its compile rate (passing samples compile)")
    q0 = p0 / c0 if c0 > 0 else 0.0
    q1 = p1 / c1 if c1 > 0 else q0
    phi_c = 0.5 * (c1 - c0) * (q0 + q1)
    phi_q = 0.5 * (q1 - q0) * (c0 + c1)
    total = abs(phi_c) + abs(phi_q)
    cf = None if abs(p1 - p0) < EPS or total < EPS else abs(phi_c) / total * 100.0
    return phi_c, phi_q, cf


def rates(per_problem: Mapping[str, Sequence[int]], ks: Iterable[int]) -> dict[str, float]:
    """{compiles@k, pass@k, adoption@k, workaround@k (+ pass@k_stderr)} from per-problem
    `(n, c_compile, c_pass, c_adopt)`; a k above the smallest n is left out."""
    if not per_problem:
        return {}
    ks = list(ks)
    out: dict[str, float] = {}
    for index, name in ((1, "compiles"), (2, "pass"), (3, "adoption")):
        agg = aggregate_pass_at_k({p: (c[0], c[index]) for p, c in per_problem.items()}, ks)
        for key, value in agg.items():
            if name == "pass" or not key.endswith("_stderr"):
                out[key.replace("pass@", f"{name}@")] = value
    for k in ks:
        if f"pass@{k}" in out:
            out[f"workaround@{k}"] = max(out[f"pass@{k}"] - out[f"adoption@{k}"], 0.0)
    return out


def score_outcomes(records: Iterable[dict[str, Any]], ks: Iterable[int]) -> dict[str, Any]:
    """Metrics of one split from execution records that carry `problem`, `type`, `outcome`,
    `compiles`, `passed`, `adopted`: overall, per modification type, and the taxonomy."""
    ks = list(ks)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    by_type: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0, 0]))
    outcomes: Counter = Counter()
    outcomes_by_type: dict[str, Counter] = defaultdict(Counter)
    for r in records:
        for table in (counts[r["problem"]], by_type[r["type"]][r["problem"]]):
            table[0] += 1
            table[1] += int(r["compiles"])
            table[2] += int(r["passed"])
            table[3] += int(r["adopted"])
        outcomes[r["outcome"]] += 1
        outcomes_by_type[r["type"]][r["outcome"]] += 1
    result: dict[str, Any] = rates(counts, ks)
    result.update(
        problems=len(counts),
        samples=sum(c[0] for c in counts.values()),
        outcomes=dict(sorted(outcomes.items())),
        by_type={
            t: {**rates(per, ks), "problems": len(per), "outcomes": dict(sorted(outcomes_by_type[t].items()))}
            for t, per in sorted(by_type.items())
        },
    )
    return result


def shapley_rows(before: Mapping[str, float], after: Mapping[str, float], k: int) -> dict[str, float | None]:
    """The Shapley split of Pass@k between two metric dicts (`compiles@k`, `pass@k`)."""
    c0, p0 = before[f"compiles@{k}"], before[f"pass@{k}"]
    c1, p1 = after[f"compiles@{k}"], after[f"pass@{k}"]
    phi_c, phi_q, cf = shapley_split(c0, p0, c1, p1)
    return {"C0": c0, "P0": p0, "C1": c1, "P1": p1, "dP": p1 - p0, "phi_C": phi_c, "phi_Q": phi_q, "CF": cf}
