"""pass@k: the unbiased estimator of Chen et al. (2021), averaged over problems.

Sampling n completions and counting c correct ones, the probability that at least one of k
completions drawn without replacement passes is 1 - C(n-c, k) / C(n, k). Averaging the
per-problem estimates is unbiased; 1 - (1 - c/n)^k is not. Pure functions: the runner counts
n and c per problem (and per instruction kind, which is a separate split).

>>> pass_at_k(n=5, c=2, k=2)
0.7
>>> aggregate_pass_at_k({"p1": (5, 2), "p2": (5, 5)}, ks=[1, 2, 10])
{'pass@1': 0.7, 'pass@1_stderr': 0.3, 'pass@2': 0.85, 'pass@2_stderr': 0.15}
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k) as a product of n-c+1..n terms, so it stays exact for huge n.

    Binomials of n=1000 overflow floats; the Codex paper's product form never builds them.
    """
    if n < 0 or c < 0 or k < 1:
        raise ValueError(f"pass@k needs n >= 0, c >= 0 and k >= 1; got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} is undefined with only n={n} samples: sample at least k")
    if c > n:
        raise ValueError(f"c={c} correct samples out of n={n}: c cannot exceed n")
    if n - c < k:
        return 1.0  # every draw of k samples contains a correct one
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def aggregate_pass_at_k(per_problem: Mapping[str, tuple[int, int]], ks: Sequence[int]) -> dict[str, float]:
    """Mean pass@k over problems and its standard error, for every k no problem has too few samples for.

    `per_problem` maps a problem id to `(n, c)`. A k above the smallest n is left out rather than
    estimated from fewer samples than k (the estimator is undefined there). The standard error
    is the sample standard deviation (ddof=1) of the per-problem values over sqrt(#problems);
    0 with a single problem.
    """
    if not per_problem:
        return {}
    min_n = min(n for n, _ in per_problem.values())
    result: dict[str, float] = {}
    for k in sorted(set(ks)):
        if k > min_n:
            continue
        values = np.array([pass_at_k(n, c, k) for n, c in per_problem.values()])
        stderr = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
        result[f"pass@{k}"] = float(values.mean())
        result[f"pass@{k}_stderr"] = stderr
    return result
