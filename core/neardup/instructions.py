"""When two instructions are the same: the normal form both decontamination and the benchmark audit compare.

Instructions are prose typed by people: ``"Fix the bug."``, ``"fix  the bug"`` and
``"Fix the bug!"`` ask for the same edit, so case, runs of whitespace and the punctuation
that ends a sentence do not count. Everything else does (inner punctuation, words, order).
Pure Python, so evaluation imports it without numba.
"""

from __future__ import annotations

# What may end an instruction without changing it; spaces between such marks go too.
_TRAILING = ".,;:!? "


def normalize_instruction(text: str) -> str:
    """Lower case, runs of whitespace as one space, trailing sentence punctuation removed."""
    return " ".join(text.lower().split()).rstrip(_TRAILING)
