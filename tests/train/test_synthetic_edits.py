"""Synthetic edits (train/synthetic_edits.py): real Python on both sides, and a real change."""

from __future__ import annotations

import ast

import pytest

from train.synthetic_edits import rename_identifier, synthetic_edits


def test_a_thousand_edits_all_parse_and_all_change_the_code():
    rows = synthetic_edits(1000, seed=0)
    assert len({r["id"] for r in rows}) == 1000
    for row in rows:
        before, after = ast.parse(row["before"]), ast.parse(row["after"])
        assert ast.dump(before) != ast.dump(after), row


def test_parameter_renames_touch_the_parameter_only():
    renames = [
        r for r in synthetic_edits(1000, seed=3) if r["instruction"].startswith("Rename the parameter")
    ]
    assert len(renames) > 100
    for row in renames:
        old, new = row["instruction"].removesuffix(".").split()[-3::2]
        before, after = ast.parse(row["before"]), ast.parse(row["after"])
        assert old not in {n.id for n in ast.walk(after) if isinstance(n, ast.Name)}, row
        # The same tree once the parameter's name is put back: nothing else changed.
        for node in ast.walk(after):
            if isinstance(node, ast.Name) and node.id == new:
                node.id = old
            if isinstance(node, ast.arg) and node.arg == new:
                node.arg = old
        assert ast.dump(after) == ast.dump(before), row


def test_rename_identifier_is_token_aware():
    source = 'def clamp(n):\n    """n in range"""\n    return max(0, min(n, obj.n))  # n\n'
    assert rename_identifier(source, "n", "k") == (
        'def clamp(k):\n    """n in range"""\n    return max(0, min(k, obj.n))  # n\n'
    )
    with pytest.raises(ValueError, match="already used"):
        rename_identifier("def f(a, b):\n    return a + b\n", "a", "b")


def test_same_seed_same_rows():
    assert synthetic_edits(50, seed=7) == synthetic_edits(50, seed=7)
