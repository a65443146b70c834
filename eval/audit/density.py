"""Test density: how many test functions and assertions a problem's tests hold, counted statically.

The published audit reports CanItEdit's "tests" per problem as median 13, mean 14.7. The figure to
compare with it is `assertions`, not `test_functions`: CanItEdit's tests are one block,
"### START TESTS ###\\nif True:  # pragma: no cover", of plain `assert` statements (see
`eval/excess_code.py` and tests/fixtures/canitedit_deps.jsonl), and the shipped fixtures are top-level
asserts too, so nearly every problem has zero test functions and a median of 13 can only be a count
of checks. (A problem that does define `def test_*` functions gets them counted in `test_functions`;
their asserts still count in `assertions`.)

Counting rules, static (every check is counted once where it is written, so an assert inside a loop
or a helper called many times counts once, and a check that never runs still counts):

- Python (ast): test functions are `def test*` and HumanEval's `def check`, not nested in another
  function (module level, inside `if True:` blocks, or methods of a test class). Assertions are
  `assert` statements, `raise AssertionError`, and calls named `assert*` (`self.assertEqual`,
  `np.testing.assert_allclose`, ...) or `pytest.raises`/`pytest.warns`, except calls inside an
  `assert` statement. Unparsable tests fall back to line regexes.
- JavaScript: test functions are `const|let|var test* = (...) =>` (HumanEvalPack), `function test*`,
  and jest/mocha `test("...")`/`it("...")`; assertions are `console.assert(`, `assert(`, `assert.x(`
  and `expect(` calls.
- C++: test functions are `int main(` (HumanEvalPack) and googletest `TEST(`/`TEST_F(`/`TEST_P(`;
  assertions are `assert(`, `static_assert(` and googletest `ASSERT_*(`/`EXPECT_*(` calls.
- Java: test functions are `public static void main(` (HumanEvalPack) and `@Test` methods; assertions
  are `throw new AssertionError`, `assert` statements and JUnit `assert*(` calls. HumanEvalPack's Java
  tests gather most checks in one `List<Boolean> correct = Arrays.asList(c1, c2, ...)` guarded by a
  single `if (correct.contains(false)) throw new AssertionError()`: each element of such a list counts
  as one assertion (and its guard as none), so Java's counts match JavaScript's for 156 of the 164
  HumanEvalPack problems instead of being 1 for 161 of them.
- Go: test functions are `func Test*(t *testing.T)`; assertions are testify's `assert.X(`/`require.X(`
  calls (not `assert.New(`, which HumanEvalPack's tests use to bind `assert` to `t`) and
  `t.Error*`/`t.Fatal*`/`t.Fail*` calls.
- Rust: test functions are `#[test]` items; assertions are the `assert!`, `assert_eq!`, `assert_ne!`
  macros (and their `debug_` forms).

Comments and string contents are blanked before the regexes run, so commented-out checks do not count.
Each language's patterns are declared on its `Language` (eval/languages/).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from core.problems import Problem
from eval.languages import get_language


def counts(tests: str, language: str) -> tuple[int, int]:
    """(test functions, assertions) of `tests` written in `language`, by its rules (`Language.test_counts`)."""
    found = get_language(language)
    if found is None:
        raise ValueError(f"no test-density rules for language {language!r}")
    return found.test_counts(tests)


def density(problem: Problem) -> dict[str, Any]:
    """Test density of one problem: test functions, assertions, and whether one check at most guards it."""
    functions, assertions = counts(problem.tests, problem.language)
    return {
        "id": problem.id,
        "language": problem.language,
        "test_functions": functions,
        "assertions": assertions,
        "single_test": assertions <= 1,
    }


def summarize(problems: Sequence[Problem]) -> dict[str, Any]:
    """Mean and median of both counts, and how many problems have a single test: the audit's figures."""
    rows = [density(p) for p in problems]
    out: dict[str, Any] = {"problems": len(rows), "single_test": sum(r["single_test"] for r in rows)}
    for key in ("assertions", "test_functions"):
        values = [r[key] for r in rows]
        out[key] = {
            "mean": statistics.fmean(values) if values else 0.0,
            "median": statistics.median(values) if values else 0.0,
        }
    return out
