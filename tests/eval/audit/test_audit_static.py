"""The static audits: test density, CanItEdit's Table 1, and which problems share a codebase.

Expected numbers are derived here by hand or by an independent computation, never by calling the
function under test twice.
"""

from __future__ import annotations

import statistics

import pytest

from core.benchmarks import load_benchmark
from core.minhash_config import MinHashConfig
from core.problems import Problem
from eval.audit.density import counts, density, summarize
from eval.audit.distributions import render_table1, table1
from eval.audit.independence import (
    calibrate,
    default_threshold,
    identical_instructions,
    load_pairs,
    pick_threshold,
    shared_codebases,
)


def problem(pid: str, before: str = "x = 1\n", tests: str = "", language: str = "python", **kw) -> Problem:
    return Problem(
        id=pid,
        name=f"p{pid}",
        before=before,
        after=kw.pop("after", before),
        tests=tests,
        instructions=kw.pop("instructions", {"descriptive": f"do {pid}", "lazy": pid}),
        language=language,
        **kw,
    )


@pytest.fixture(scope="module")
def fixtures() -> list[Problem]:
    return load_benchmark("fixtures").problems


@pytest.fixture(scope="module")
def humanevalfix() -> dict[str, Problem]:
    problems = load_benchmark(
        "humanevalfix", languages=["python", "js", "cpp", "java", "go", "rust"]
    ).problems
    return {p.id: p for p in problems}


# ---------------------------------------------------------------------------------------- density
PY_TESTS = """
import numpy as np
import pytest

def helper(x):
    assert x

def test_one():
    assert f(1) == 2
    for i in range(3):
        assert f(i) >= 0
    np.testing.assert_allclose(g(), 1.0)
    assert np.testing.assert_equal(g(), 1.0) is None

class TestThing:
    def test_method(self):
        self.assertEqual(f(0), 1)
        with pytest.raises(ValueError):
            f(-1)

    def test_nested(self):
        def test_inner():
            pass
        assert True

def check(candidate):
    try:
        candidate(0)
    except ValueError:
        pass
    else:
        raise AssertionError("no raise")
    assert isinstance(candidate(1), int)

# assert f(99) == 0
s = "assert f(1) == 2"
check(f)
"""

JS_TESTS = """
const testFoo = () => {
  console.assert(foo(1) === 2)
  // console.assert(foo(2) === 3)
  for (let i = 0; i < 3; i++) {
    console.assert(foo(i) > 0, "console.assert( in a message")
  }
}
function testBar() {
  assert.strictEqual(bar(), 1)
  assert(bar() > 0)
}
test("baz works", () => {
  expect(baz()).toBe(3)
})
testFoo()
testBar()
"""

CPP_TESTS = """
#undef NDEBUG
#include<assert.h>
// assert(false);
int main(){
    assert (f(1) == 2);
    for (int i = 0; i < 3; i++) {
        assert(f(i) > 0);
    }
    static_assert(sizeof(int) >= 2, "assert(");
    /* assert(f(9)); */
}
TEST(Suite, Name) {
    EXPECT_EQ(f(1), 2);
    ASSERT_TRUE(f(2));
}
"""

JAVA_TESTS = """
import static org.junit.Assert.assertEquals;

public class Main {
    public static void main(String[] args) {
        Solution s = new Solution();
        List<Boolean> correct = Arrays.asList(
                s.f(1) == 2,
                s.g(Arrays.asList(1, 2)) == 3,
                !s.h("a, b")
        );
        if (correct.contains(false)) {
            throw new AssertionError();
        }
        for (int i = 0; i < 3; i++) {
            if (s.f(i) < 0) throw new AssertionError("i=" + i);
        }
        assert s.f(0) == 1;
        // throw new AssertionError();
    }

    @Test
    public void testF() {
        assertEquals(2, new Solution().f(1));
    }
}
"""


GO_TESTS = """func TestF(t *testing.T) {
    assert := assert.New(t)
    assert.Equal(1, F(1))
    // assert.Equal(2, F(2))
    require.True(t, F(3) > 0, "assert.Equal(")
    for i := 0; i < 3; i++ {
        assert.NotEqual(0, F(i))
    }
    if F(4) != 4 {
        t.Errorf("F(4) = %d", F(4))
    }
}

func TestG(t *testing.T) {
    t.Fatal("unreachable")
}

func helper(t *testing.T) {}
"""

RUST_TESTS = """#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_f() {
        assert_eq!(f(1), 1);
        assert!(f(2) == 2, "assert!(f(3))");
        // assert_ne!(f(0), 9);
        for i in 0..3 {
            assert_ne!(f(i), 99);
        }
        debug_assert!(f(4) > 0);
    }

    #[test]
    #[should_panic]
    fn test_g() {
        f(-1);
    }

    fn helper() {}
}
"""


@pytest.mark.parametrize(
    "language, tests, functions, assertions",
    [
        # test_one, test_method, test_nested, check (test_inner is nested, helper is no test);
        # helper 1, test_one 4 (loop once), test_method 2, test_nested 1, check 2
        ("python", PY_TESTS, 4, 10),
        # CanItEdit's layout: one `if True:` block of asserts, no test function
        (
            "python",
            "### START TESTS ###\nif True:  # pragma: no cover\n    assert a\n    assert b == 1\n",
            0,
            2,
        ),
        # unparsable (Python 2): the line regexes
        ("python", 'print "x"\nassert f(1) == 2\ndef test_x():\n    self.assertTrue(1)\n', 1, 2),
        ("js", JS_TESTS, 3, 5),  # testFoo, testBar, test("..."); 2 console.assert, assert.x, assert, expect
        ("cpp", CPP_TESTS, 2, 5),  # main, TEST; 2 assert, static_assert, EXPECT_EQ, ASSERT_TRUE
        ("java", JAVA_TESTS, 2, 6),  # main, @Test; 3 list checks, loop throw, assert, assertEquals
        # TestF, TestG (helper takes *testing.T but is no Test); Equal, True, NotEqual, Errorf, Fatal
        # (assert.New binds, the comment and the string do not count)
        ("go", GO_TESTS, 2, 5),
        # two #[test]; assert_eq, assert, assert_ne (once, in its loop), debug_assert
        ("rust", RUST_TESTS, 2, 4),
    ],
)
def test_density_counts_hand_written_tests(language, tests, functions, assertions):
    assert counts(tests, language) == (functions, assertions)
    d = density(problem("1", tests=tests, language=language))
    assert (d["test_functions"], d["assertions"], d["single_test"]) == (functions, assertions, False)


@pytest.mark.parametrize(
    "tests, single", [("", True), ("assert f() == 1\n", True), ("assert a\nassert b\n", False)]
)
def test_single_test_means_at_most_one_assertion(tests, single):
    assert density(problem("1", tests=tests))["single_test"] is single


def test_density_rejects_an_unknown_language():
    with pytest.raises(ValueError, match="kotlin"):
        counts("fun main() {}", "kotlin")


# HumanEvalPack tasks 0 (7 checks), 32 (one check in a loop) and 53 (5 checks + one in a loop),
# counted by hand from core/data/humanevalpack/*.jsonl; Java/0 and Java/53 hold their checks in an
# Arrays.asList guarded by one throw.
@pytest.mark.parametrize("prefix", ["Python", "JavaScript", "CPP", "Java", "Go", "Rust"])
def test_density_on_real_humanevalpack_problems(humanevalfix, prefix):
    for task, assertions in ((0, 7), (32, 1), (53, 6)):
        d = density(humanevalfix[f"{prefix}/{task}"])
        assert d["test_functions"] == 1, d
        assert d["assertions"] == assertions, d
        assert d["single_test"] is (assertions == 1)


def test_density_summary_on_the_fixtures(fixtures):
    # the fixtures are plain top-level asserts, like CanItEdit's tests: no test functions
    s = summarize(fixtures)
    assert s["test_functions"] == {"mean": 0.0, "median": 0}
    assert s["single_test"] == 0
    # fixture 1: nine top-level asserts and two in a loop (counted once each)
    assert density(fixtures[0])["assertions"] == 11


# ---------------------------------------------------------------------------------------- Table 1
def _levenshtein(a: str, b: str) -> int:
    """Textbook dynamic programme, independent of rapidfuzz."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _is_subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(ch in it for ch in short)


def test_table1_on_the_fixtures(fixtures):
    stats = table1(fixtures)
    by_id = {p.id: p for p in fixtures}
    assert stats["problems"] == 14
    assert stats["by_language"] == {"python": 14}
    assert stats["by_change_kind"] == {"perfective": 6, "corrective": 5, "adaptive": 3}
    assert stats["by_topic"]["Classes"] == 2 and stats["by_topic"]["Parsing"] == 2
    assert len(stats["by_topic"]) == 12 and sum(stats["by_topic"].values()) == 14

    # by hand: find_first is 12 lines before and after, lru_cache_recency 15 -> 19,
    # shape_perimeter (the largest) 25 -> 38, and every fixture ends with a newline
    assert all(p.before.endswith("\n") and p.after.endswith("\n") for p in fixtures)
    assert [len(by_id[i].before.splitlines()) for i in ("1", "9", "14")] == [12, 15, 25]
    assert [len(by_id[i].after.splitlines()) for i in ("1", "9", "14")] == [12, 19, 38]
    before = sorted(p.before.count("\n") for p in fixtures)
    after = sorted(p.after.count("\n") for p in fixtures)
    assert stats["lines_before"] == {
        "n": 14,
        "mean": pytest.approx(sum(before) / 14),
        "median": (before[6] + before[7]) / 2,
        "min": before[0],
        "max": 25,
    }
    assert stats["lines_after"]["max"] == 38 and stats["lines_after"]["min"] == after[0]
    assert stats["lines_after"]["mean"] == pytest.approx(sum(after) / 14)

    # shape_perimeter only inserts code, so its distance is the length difference
    assert _is_subsequence(by_id["14"].before, by_id["14"].after)
    distances = [_levenshtein(p.before, p.after) for p in fixtures]
    assert distances[13] == len(by_id["14"].after) - len(by_id["14"].before)
    assert stats["levenshtein"]["mean"] == pytest.approx(statistics.fmean(distances))
    assert stats["levenshtein"]["median"] == statistics.median(distances)

    # whitespace words: "find_first is buggy, fix it" is 5, "the LRU cache evicts the wrong key" 7
    tokens = stats["instruction_tokens"]
    assert set(tokens) == {"descriptive", "lazy"}
    lazy = [len(p.instructions["lazy"].split()) for p in fixtures]
    assert lazy[0] == 5 and lazy[8] == 7
    assert tokens["lazy"]["mean"] == pytest.approx(sum(lazy) / 14)
    descriptive = sorted(len(p.instructions["descriptive"].split()) for p in fixtures)
    assert tokens["descriptive"]["median"] == (descriptive[6] + descriptive[7]) / 2

    table = render_table1(stats)
    assert "| Lines (before) |" in table and "| perfective | 6 | 42.9 |" in table


def test_table1_pools_non_canitedit_splits_and_unlabelled_taxonomy():
    ps = [
        problem("1", instructions={"python": "Fix bugs in f."}, language="python"),
        problem("2", instructions={"js": "Fix bugs in g now."}, language="js"),
    ]
    stats = table1(ps)
    assert stats["instruction_tokens"] == {"other": {"n": 2, "mean": 4.5, "median": 4.5}}  # 4 and 5 words
    assert stats["by_change_kind"] == {"unlabelled": 2}
    assert stats["by_language"] == {"js": 1, "python": 1}


# ------------------------------------------------------------------------------------ independence
ACCOUNT = '''class Account:
    """A bank account that keeps its balance in cents."""

    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance
        self.history = []

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("amount must be positive")
        self.balance += amount
        self.history.append(("deposit", amount))

    def withdraw(self, amount):
        if amount > self.balance:
            raise ValueError("insufficient funds")
        self.balance -= amount
        self.history.append(("withdraw", amount))

    def statement(self):
        return "\\n".join(f"{kind}: {amount}" for kind, amount in self.history)
'''
ACCOUNT_EDITED = ACCOUNT.replace(
    """    def statement(self):""",
    """    def interest(self, rate):
        self.deposit(round(self.balance * rate))

    def statement(self):""",
)
PRIMES = """def primes_up_to(n):
    sieve = [True] * (n + 1)
    sieve[0:2] = [False, False]
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = [False] * len(sieve[i * i :: i])
    return [i for i, is_prime in enumerate(sieve) if is_prime]
"""
WORDS = """from collections import Counter


def top_words(text, k=3):
    words = [w.strip(".,!?").lower() for w in text.split()]
    return [w for w, _ in Counter(w for w in words if w).most_common(k)]
"""


def test_shared_codebases_clusters_problems_on_the_same_code():
    ps = [
        problem("10", ACCOUNT, instructions={"lazy": "Add interest."}),
        problem("2", PRIMES, instructions={"lazy": "make it faster"}),
        problem("3", ACCOUNT_EDITED, instructions={"lazy": "add   INTEREST"}),
        problem("4", WORDS, instructions={"lazy": "Make it faster!"}),
        problem("5", WORDS.replace("k=3", "k=5"), instructions={"lazy": "Count words."}),
    ]
    out = shared_codebases(ps)
    assert out["threshold"] == default_threshold()
    assert out["clusters"] == [["3", "10"], ["4", "5"]]  # lowest id first, "3" before "10"
    assert out["distinct_contexts"] == 3  # {3, 10}, {2}, {4, 5}
    assert out["problems_sharing"] == 4 and out["share_fraction"] == pytest.approx(0.8)
    assert {(p["a"], p["b"]) for p in out["pairs"]} == {("10", "3"), ("4", "5")}
    assert out["identical_instructions"] == [
        {"instruction": "make it faster", "ids": ["2", "4"], "instructions": 1},
        {"instruction": "add interest", "ids": ["3", "10"], "instructions": 1},
    ]
    twice = [
        problem("7", PRIMES, instructions={"d": "Speed up.", "l": "go"}),
        problem("8", WORDS, instructions={"d": "speed up", "l": "Go!"}),
    ]
    assert identical_instructions(twice) == [
        {"instruction": "speed up", "ids": ["7", "8"], "instructions": 2}
    ]


def test_unrelated_problems_stay_apart(fixtures):
    out = shared_codebases(fixtures)
    assert out["distinct_contexts"] == 14 and out["clusters"] == [] and out["identical_instructions"] == []
    # with a threshold nothing reaches, every problem is its own context
    assert (
        shared_codebases([problem("1", ACCOUNT), problem("2", ACCOUNT_EDITED)], 0.999)["distinct_contexts"]
        == 2
    )


def test_humanevalpack_near_duplicates_are_found(humanevalfix):
    python = [p for p in humanevalfix.values() if p.language == "python"]
    out = shared_codebases(python)
    # correct_bracketing twice: "<>" in task 56, "()" in task 61, otherwise the same code
    assert ["Python/56", "Python/61"] in out["clusters"]
    assert out["distinct_contexts"] == 164 - sum(len(c) - 1 for c in out["clusters"])


# ------------------------------------------------------------------------------------- calibration
@pytest.fixture(scope="module")
def calibration() -> dict:
    return calibrate(load_pairs())


def test_the_shipped_sample_is_a_labelled_mix():
    pairs = load_pairs()
    assert len(pairs) >= 25
    assert all(isinstance(p["same_codebase"], bool) and p["why"] and p["a"] != p["b"] for p in pairs)
    positives = sum(p["same_codebase"] for p in pairs)
    assert 0.3 < positives / len(pairs) < 0.7


def test_calibration_on_the_shipped_sample(calibration):
    assert calibration["f1"] >= 0.8
    assert calibration["threshold"] == default_threshold() == 0.4
    assert calibration["precision"] == 1.0 and calibration["recall"] == pytest.approx(14 / 15)
    row = next(r for r in calibration["curve"] if r["threshold"] == calibration["threshold"])
    assert row["f1"] == calibration["f1"] == max(r["f1"] for r in calibration["curve"])


def test_the_calibrated_threshold_is_stable(calibration):
    pairs, scores, chosen = load_pairs(), calibration["jaccard"], calibration["threshold"]
    truth = [p["same_codebase"] for p in pairs]
    # deterministic
    assert calibrate(pairs)["jaccard"] == scores
    # leaving any one pair out moves it by at most one grid step
    for i in range(len(pairs)):
        left_out = pick_threshold(truth[:i] + truth[i + 1 :], scores[:i] + scores[i + 1 :])
        assert abs(left_out["threshold"] - chosen) <= 0.05 + 1e-9, i
    # F1 holds at the neighbouring grid points, and under other MinHash seeds at the chosen one
    for row in calibration["curve"]:
        if abs(row["threshold"] - chosen) <= 0.05 + 1e-9:
            assert row["f1"] >= 0.8, row
    for seed in (1, 7):
        other = calibrate(pairs, MinHashConfig(seed=seed))
        assert next(r for r in other["curve"] if r["threshold"] == chosen)["f1"] >= 0.8
