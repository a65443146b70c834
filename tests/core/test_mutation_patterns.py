"""The bug patterns of real commits (`core.mutation.pattern_sites`) and `splice`, which writes one
change into a module's own text."""

from __future__ import annotations

import ast

import pytest

from core.mutation import applied, mutation_sites, pattern_sites, preorder, splice

SOURCE = '''def f(xs, n):  # keep this comment
    """Doc."""
    total = 0
    for i in range(1, len(xs) - 1):
        if xs[i] < n:
            total += xs[i]
        elif xs[i] > 2 * n:
            total -= 1
        else:
            total = max(total, xs[0])
    if not xs:
        return None
    return sorted([total, n])[0]
'''


def _changes(operator: str) -> list[tuple[str, str]]:
    """(line before, line after) of each splice of `operator`'s sites; the rest of the text is kept."""
    tree = ast.parse(SOURCE)
    nodes = preorder(tree)
    found = []
    for site in pattern_sites(tree, nodes):
        if site.operator != operator:
            continue
        text = splice(SOURCE, tree, nodes, site)
        if text is None:
            continue
        old, new = SOURCE.splitlines(), text.splitlines()
        diff = [(a, b) for a, b in zip(old, new, strict=False) if a != b]
        found.append(diff[0] if diff else ("", ""))
    return found


@pytest.mark.parametrize(
    "operator, expected",
    [
        ("off_by_one", ("    for i in range(1, len(xs) - 1):", "    for i in range(1, len(xs)):")),
        ("off_by_one", ("    for i in range(1, len(xs) - 1):", "    for i in range(0, len(xs) - 1):")),
        ("flipped_comparison", ("        if xs[i] < n:", "        if xs[i] > n:")),
        (
            "swapped_arguments",
            ("            total = max(total, xs[0])", "            total = max(xs[0], total)"),
        ),
        ("wrong_return", ("    return sorted([total, n])[0]", "    return None")),
        ("missing_branch", ("    if not xs:", "    pass")),
    ],
)
def test_each_pattern_writes_its_bug_into_the_text(operator, expected):
    assert expected in _changes(operator)


def test_a_removed_else_takes_its_lines_and_nothing_else():
    tree = ast.parse(SOURCE)
    nodes = preorder(tree)
    site = next(s for s in pattern_sites(tree, nodes) if s.operator == "missing_branch" and s.line == 5)
    text = splice(SOURCE, tree, nodes, site)
    assert text is not None and "elif" not in text and "max(total" not in text
    assert (
        text.startswith("def f(xs, n):  # keep this comment\n")
        and "    return sorted([total, n])[0]\n" in text
    )


def test_every_splice_parses_to_the_mutated_tree_and_keeps_the_comment():
    tree = ast.parse(SOURCE)
    nodes = preorder(tree)
    sites = mutation_sites(tree, nodes) + pattern_sites(tree, nodes)
    spliced = 0
    for site in sites:
        text = splice(SOURCE, tree, nodes, site)
        if text is None:
            continue
        spliced += 1
        with applied(nodes, site):
            assert ast.dump(ast.parse(text)) == ast.dump(tree)
        assert "# keep this comment" in text
    assert spliced >= len(sites) - 3  # an `elif` rewritten alone is not an `if`: left out


def test_a_change_that_needs_parentheses_gets_them():
    source = "def g(a, b, c):\n    return a * (b + c)\n"
    tree = ast.parse(source)
    nodes = preorder(tree)
    site = next(s for s in pattern_sites(tree, nodes) if s.operator == "wrong_return")
    assert splice(source, tree, nodes, site) == "def g(a, b, c):\n    return a\n"
    texts = [splice(source, tree, nodes, s) for s in mutation_sites(tree, nodes) if s.operator == "operator"]
    assert "def g(a, b, c):\n    return a * (b - c)\n" in texts


FORMATTED = """def f(s, k):
    pat = r"(?:^|_)(.)"
    v = bool((1 << (k - 1)) & s)
    return re.sub(
        pat, lambda m: m.group(1).upper(), "x", count=(1 + k)
    )
"""


def test_a_bug_changes_its_own_tokens_and_leaves_quotes_and_parentheses_as_written():
    tree = ast.parse(FORMATTED)
    nodes = preorder(tree)
    texts = {
        splice(FORMATTED, tree, nodes, s) for s in mutation_sites(tree, nodes) + pattern_sites(tree, nodes)
    }
    assert FORMATTED.replace('r"(?:^|_)(.)"', 'r""') in texts  # a raw string stays raw
    assert FORMATTED.replace("(k - 1)", "(k + 1)") in texts  # the operator token alone
    assert FORMATTED.replace("(k - 1)", "(k)") in texts  # off by one: the operand's own text
    swapped = FORMATTED.replace("pat, lambda m: m.group(1).upper(),", "lambda m: m.group(1).upper(), pat,")
    assert swapped in texts  # the arguments' own text, the call's layout kept
    for text in texts:
        assert text is not None
        changed = [a for a, b in zip(FORMATTED.splitlines(), text.splitlines(), strict=False) if a != b]
        assert len(changed) <= 1 or "pass" in text, text  # one line, or a statement deleted
