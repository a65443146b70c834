"""pass@k against hand-computed values and a brute-force count over all k-subsets."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest

from eval.metrics import aggregate_pass_at_k, pass_at_k


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """Share of all k-subsets of n samples (the first c correct) that hold a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in subset) for subset in subsets) / len(subsets)


def exact_pass_at_k(n: int, c: int, k: int) -> float:
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (20, 0, 1, 0.0),
        (20, 0, 10, 0.0),
        (20, 20, 1, 1.0),
        (20, 20, 20, 1.0),
        (10, 3, 1, 0.3),  # pass@1 is c/n
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (6, 4, 3, 1.0),  # n - c = 2 < k: every 3-subset holds a correct sample
        (1, 0, 1, 0.0),
        (1, 1, 1, 1.0),
    ],
)
def test_known_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_matches_brute_force_on_random_cases() -> None:
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 12)
        c = rng.randint(0, n)
        k = rng.randint(1, n)
        assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


def test_matches_exact_binomials_for_larger_n() -> None:
    rng = random.Random(1)
    for _ in range(300):
        n = rng.randint(1, 200)
        c = rng.randint(0, n)
        k = rng.randint(1, n)
        assert pass_at_k(n, c, k) == pytest.approx(exact_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


def test_huge_n_is_stable() -> None:
    # C(1000, 500) is about 2.7e299: a float ratio of binomials would overflow or lose everything.
    for c, k in [(1, 1), (1, 500), (7, 100), (500, 500), (999, 1), (0, 1000)]:
        value = pass_at_k(1000, c, k)
        assert math.isfinite(value)
        assert value == pytest.approx(exact_pass_at_k(1000, c, k), abs=1e-12)
    assert pass_at_k(1000, 1, 1) == pytest.approx(0.001)
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5)


def test_monotone_in_k_and_c() -> None:
    values = [pass_at_k(20, 3, k) for k in range(1, 21)]
    assert values == sorted(values)
    values = [pass_at_k(20, c, 5) for c in range(21)]
    assert values == sorted(values)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 0, 6), (5, 6, 1), (5, 2, 0), (-1, 0, 1), (5, -1, 1)])
def test_rejects_impossible_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_aggregate_means_and_standard_errors() -> None:
    per_problem = {"a": (10, 3), "b": (10, 0), "c": (10, 10)}
    result = aggregate_pass_at_k(per_problem, ks=[1, 5, 10])
    assert set(result) == {"pass@1", "pass@1_stderr", "pass@5", "pass@5_stderr", "pass@10", "pass@10_stderr"}
    assert result["pass@1"] == pytest.approx((0.3 + 0.0 + 1.0) / 3)
    # ddof=1 standard deviation of the per-problem values over sqrt(3)
    values = [0.3, 0.0, 1.0]
    mean = sum(values) / 3
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / 2)
    assert result["pass@1_stderr"] == pytest.approx(std / math.sqrt(3))
    p5 = 1 - math.comb(7, 5) / math.comb(10, 5)
    assert result["pass@5"] == pytest.approx((p5 + 0.0 + 1.0) / 3)
    assert result["pass@10"] == pytest.approx((1.0 + 0.0 + 1.0) / 3)


def test_aggregate_reports_only_k_up_to_the_smallest_n() -> None:
    result = aggregate_pass_at_k({"a": (20, 5), "b": (5, 1)}, ks=[1, 5, 10, 100])
    assert sorted(k for k in result if not k.endswith("_stderr")) == ["pass@1", "pass@5"]
    assert result["pass@1"] == pytest.approx((5 / 20 + 1 / 5) / 2)


def test_aggregate_single_problem_has_zero_stderr() -> None:
    assert aggregate_pass_at_k({"only": (5, 2)}, ks=[2]) == {
        "pass@2": pytest.approx(0.7),
        "pass@2_stderr": 0.0,
    }


def test_aggregate_of_nothing_is_empty() -> None:
    assert aggregate_pass_at_k({}, ks=[1]) == {}
