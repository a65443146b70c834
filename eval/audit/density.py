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
"""

from __future__ import annotations

import ast
import re
import statistics
from collections.abc import Sequence
from typing import Any

from core.problems import Problem

# A string literal (kept as empty quotes) or a comment (dropped), in C-like languages.
_C_TOKENS = re.compile(
    r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|`(?:\\.|[^`\\])*`|//[^\n]*|/\*.*?\*/', re.DOTALL
)

_FUNCTIONS = {
    "js": re.compile(
        r"\b(?:const|let|var)\s+test\w*\s*=\s*(?:async\s*)?(?:\([^()]*\)|[\w$]+)\s*=>"
        r"|\bfunction\s*\*?\s*test\w*\s*\("
        r"|(?<![\w.$])(?:test|it)\s*\(\s*[\"'`]"
    ),
    "cpp": re.compile(r"\bint\s+main\s*\(|\bTEST(?:_F|_P)?\s*\("),
    "java": re.compile(r"\bpublic\s+static\s+void\s+main\s*\(|@Test\b"),
    "go": re.compile(r"\bfunc\s+Test\w*\s*\(\s*\w+\s+\*testing\.T\s*\)"),
    "rust": re.compile(r"#\[test\]"),
}
_ASSERTIONS = {
    "js": re.compile(r"(?<![\w$])(?:console\.)?assert(?:\.\w+)?\s*\(|(?<![\w.$])expect\s*\("),
    "cpp": re.compile(r"(?<![\w.])(?:static_assert|assert|ASSERT_\w+|EXPECT_\w+)\s*\("),
    "java": re.compile(r"\bthrow\s+new\s+AssertionError\b|\bassert(?:[A-Z]\w*)?\s*\(|\bassert\s+(?![\s(])"),
    "go": re.compile(r"\b(?:assert|require)\.(?!New\b)[A-Z]\w*\s*\(|\bt\.(?:Error|Fatal|Fail)\w*\s*\("),
    "rust": re.compile(r"(?<![\w:])(?:debug_)?assert(?:_eq|_ne)?!\s*[(\[{]"),
}
_JAVA_CHECK_LIST = re.compile(r"\bList\s*<\s*Boolean\s*>\s+(\w+)\s*=\s*Arrays\.asList\s*\(")
_PY_FUNCTIONS = re.compile(r"^\s*(?:async\s+)?def\s+(?:test\w*|check)\s*\(", re.MULTILINE)
_PY_ASSERTIONS = re.compile(
    r"^\s*assert\b|\braise\s+AssertionError\b|\bassert\w+\s*\(|\bpytest\.(?:raises|warns)\s*\(",
    re.MULTILINE,
)


def strip_c_comments(code: str) -> str:
    """`code` without comments and with every string literal emptied (JS, C++, Java, Go, Rust)."""
    return _C_TOKENS.sub(lambda m: "" if m.group()[0] == "/" else m.group()[0] * 2, code)


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _is_assertion_call(call: ast.Call) -> bool:
    name = _call_name(call)
    if name.startswith("assert"):
        return True
    func = call.func
    return (
        name in ("raises", "warns")
        and isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "pytest"
    )


def _raises_assertion_error(node: ast.Raise) -> bool:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == "AssertionError"


def python_counts(tests: str) -> tuple[int, int]:
    """(test functions, assertions) of Python tests, by the rules in the module docstring."""
    try:
        tree = ast.parse(tests)
    except SyntaxError:
        return len(_PY_FUNCTIONS.findall(tests)), len(_PY_ASSERTIONS.findall(tests))
    functions = assertions = 0

    def visit(node: ast.AST, in_function: bool, in_assert: bool) -> None:
        nonlocal functions, assertions
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not in_function and (node.name.startswith("test") or node.name == "check"):
                functions += 1
            in_function = True
        elif isinstance(node, ast.Assert):
            assertions += 1
            in_assert = True
        elif (
            isinstance(node, ast.Raise)
            and _raises_assertion_error(node)
            or isinstance(node, ast.Call)
            and not in_assert
            and _is_assertion_call(node)
        ):
            assertions += 1
        for child in ast.iter_child_nodes(node):
            visit(child, in_function, in_assert)

    visit(tree, False, False)
    return functions, assertions


def _list_elements(code: str, start: int) -> int:
    """Top-level comma-separated elements of the argument list that opens just before `start`."""
    depth, elements, pending = 0, 0, False
    for ch in code[start:]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            elements, pending = elements + 1, False
            continue
        pending = pending or not ch.isspace()
    return elements + pending


def _java_list_checks(code: str) -> int:
    """Assertions a guarded `List<Boolean> x = Arrays.asList(...)` adds beyond its one `throw`."""
    extra = 0
    for match in _JAVA_CHECK_LIST.finditer(code):
        if re.search(rf"\b{match.group(1)}\s*\.\s*contains\s*\(\s*false\s*\)", code):
            extra += _list_elements(code, match.end()) - 1
    return extra


def counts(tests: str, language: str) -> tuple[int, int]:
    """(test functions, assertions) of `tests` written in `language` (python | js | cpp | java | go | rust)."""
    if language == "python":
        return python_counts(tests)
    if language not in _ASSERTIONS:
        raise ValueError(f"no test-density rules for language {language!r}")
    code = strip_c_comments(tests)
    assertions = len(_ASSERTIONS[language].findall(code))
    if language == "java":
        assertions += _java_list_checks(code)
    return len(_FUNCTIONS[language].findall(code)), assertions


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
