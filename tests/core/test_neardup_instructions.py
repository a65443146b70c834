"""When two instructions count as the same, for decontamination and the audit alike."""

from __future__ import annotations

import pytest

from core.neardup.instructions import normalize_instruction


@pytest.mark.parametrize(
    "text, normal",
    [
        ("  Fix  the\tBug.!  ", "fix the bug"),
        ("Fix bugs in f.", "fix bugs in f"),
        ("Fix it . !", "fix it"),  # spaces between the final marks go too
        ("Fix the bug,", "fix the bug"),
        ("Add a flag:\n", "add a flag"),
        ("Fix\u00a0the\u2003bug\n\n", "fix the bug"),  # any Unicode whitespace
        ("Make it faster!!!", "make it faster"),
        ("Rename x.y to x.z.", "rename x.y to x.z"),  # inner punctuation counts
        ("Return a tuple (a, b).", "return a tuple (a, b)"),
        ("Why?", "why"),
        ("...", ""),
        ("", ""),
    ],
)
def test_normal_form(text, normal):
    assert normalize_instruction(text) == normal


def test_what_still_differs():
    assert normalize_instruction("Fix f.") != normalize_instruction("Fix g.")
    assert normalize_instruction("Use a list") != normalize_instruction("Use a list.)")
    assert normalize_instruction("Fix it ... now") == "fix it ... now"
