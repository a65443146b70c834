"""Named filter rules for commit edit examples (CommitPackFT, EditPackFT, Commits2023FT).

Each rule takes a row and its parameters and returns None to keep it or the reason it is
dropped. Rules run in the configured order and the first failure names the drop, so a
manifest counts every dropped row under exactly one reason.

>>> apply_rules({"instruction": "Added x", "before": "a = 1", "after": "a = 2"}, [("imperative_subject", {})])
(False, 'not_imperative')
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from data_pipeline.verbs import starts_with_imperative

Rule = Callable[..., "str | None"]


def subject_length(row: dict, min_chars: int = 10, max_chars: int = 1000) -> str | None:
    """CommitPackFT: the commit subject is 10-1000 characters."""
    n = len(row["instruction"].strip())
    return None if min_chars <= n <= max_chars else "subject_length"


def imperative_subject(row: dict) -> str | None:
    """CommitPackFT: the subject starts with an imperative verb (data_pipeline/verbs.py)."""
    return None if starts_with_imperative(row["instruction"]) else "not_imperative"


def nonempty(row: dict) -> str | None:
    """EditPackFT: neither side is empty once whitespace is ignored."""
    return None if row["before"].strip() and row["after"].strip() else "empty_code"


def changed(row: dict, ignore_whitespace: bool = False) -> str | None:
    """EditPackFT: before and after differ."""
    before, after = row["before"], row["after"]
    if ignore_whitespace:
        before, after = "".join(before.split()), "".join(after.split())
    return None if before != after else "unchanged"


def no_markers(
    row: dict, markers: Sequence[str] = ("TODO", "FIXME", "BUG"), whole_word: bool = True
) -> str | None:
    """EditPackFT: 'after' has no TODO/FIXME/BUG. Whole words by default, so DEBUG stays."""
    if whole_word:
        pattern = r"\b(?:" + "|".join(re.escape(m) for m in markers) + r")\b"
        found = re.search(pattern, row["after"]) is not None
    else:
        found = any(m in row["after"] for m in markers)
    return "todo_marker" if found else None


def python_parses(row: dict) -> str | None:
    """EditPackFT: Python's `ast` parses 'after' (rows of other languages pass)."""
    if row.get("lang", "python") not in ("python", "py", "Python"):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences warn, they still parse
            ast.parse(row["after"])
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "after_syntax_error"
    return None


RULES: dict[str, Rule] = {
    "subject_length": subject_length,
    "imperative_subject": imperative_subject,
    "nonempty": nonempty,
    "changed": changed,
    "no_markers": no_markers,
    "python_parses": python_parses,
}


def check_rules(rules: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Fail at start-up on an unknown rule or parameter, naming it."""
    import inspect

    for name, params in rules:
        if name not in RULES:
            raise ValueError(f"unknown filter rule {name!r}; known: {sorted(RULES)}")
        accepted = set(inspect.signature(RULES[name]).parameters) - {"row"}
        unknown = set(params) - accepted
        if unknown:
            raise ValueError(
                f"filter rule {name!r} has no parameter(s) {sorted(unknown)}; it takes {sorted(accepted)}"
            )


def apply_rules(row: dict, rules: Sequence[tuple[str, dict[str, Any]]]) -> tuple[bool, str]:
    """(keep, reason): the first rule that rejects the row names the reason."""
    for name, params in rules:
        reason = RULES[name](row, **params)
        if reason is not None:
            return False, reason
    return True, ""


def filter_batch(batch: dict[str, list], rules: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, list]:
    """Batched form for `datasets.map` and Ray `map_batches`: adds a `drop_reason` column."""
    n = len(batch["id"])
    rows = ({key: batch[key][i] for key in batch} for i in range(n))
    return {**batch, "drop_reason": [apply_rules(row, rules)[1] for row in rows]}
