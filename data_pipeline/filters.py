"""Named filter rules for commit edit examples (CommitPackFT, EditPackFT, Commits2023FT).

Each rule takes a row and its parameters and returns None to keep it or the reason it is
dropped. Rules run in the configured order and the first failure names the drop, so a
manifest counts every dropped row under exactly one reason. A transform (`TRANSFORMS`)
rewrites the row instead: the rules after it judge, and the output keeps, the rewritten
code. The released EditPackFT filter (nuprl/CanItEdit `editpackft/filter.py`) needs one: it
strips each file's header before its checks, and the preset `editpackft-released`
reproduces it.

>>> apply_rules({"instruction": "Added x", "before": "a = 1", "after": "a = 2"}, [("imperative_subject", {})])
(False, 'not_imperative')
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from rapidfuzz.distance import Levenshtein

from data_pipeline.verbs import starts_with_imperative

Rule = Callable[..., "str | None"]
Transform = Callable[..., dict]


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


def min_edit_distance(row: dict, min_chars: int = 10) -> str | None:
    """Released EditPackFT: drop edits under `min_chars` of character Levenshtein distance.

    The released filter drops `editdistance.eval(old, new) < 10`: inserting, deleting or
    substituting one character costs 1. It subsumes `changed` (distance 0). The cut-off
    lets the computation stop early, so large files cost little.
    """
    if min_chars <= 0:
        return None
    distance = Levenshtein.distance(row["before"], row["after"], score_cutoff=min_chars - 1)
    return "small_edit" if distance < min_chars else None


SETUPTOOLS_IMPORTS = ("from setuptools import", "import setuptools")


def no_setuptools_import(row: dict, patterns: Sequence[str] = SETUPTOOLS_IMPORTS) -> str | None:
    """Released EditPackFT: 'after' contains none of `patterns`, as plain substrings.

    It drops packaging scripts (setup.py), whose edits are version bumps and metadata.
    """
    return "setuptools_import" if any(p in row["after"] for p in patterns) else None


def strip_header_lines(code: str) -> str:
    """The released filter's `cleanup()`, quirks included: drop a file's leading header.

    Lines are scanned from the top. A line holding exactly one triple double quote opens a
    docstring and the next such line closes it: everything up to the closing line is
    dropped and the scan stops. Outside a docstring, a line starting with `#` (column 0) is
    dropped with all before it, a blank line is passed over, and any other line stops the
    scan. So a one-line docstring (two triple quotes), a single-quoted docstring or an
    indented comment stops it; blank lines after the last dropped comment stay; an unclosed
    docstring keeps the file from the line after the last comment. A code line with one
    triple quote (`X = ` and a quote) opens a "docstring" too and is dropped with the lines
    up to the closing quote: the released behaviour, reproduced rather than fixed.
    """
    lines = code.split("\n")
    start = 0
    in_docstring = False
    for i, line in enumerate(lines):
        if line.count('"""') == 1:
            if in_docstring:
                start = i + 1
                break
            in_docstring = True
        elif not in_docstring and line.startswith("#"):
            start = i + 1
        elif not in_docstring and line.strip() != "":
            break
    return "\n".join(lines[start:])


def strip_header(row: dict) -> dict:
    """Released EditPackFT: 'before' and 'after' without their headers (`strip_header_lines`).

    Licence headers, shebangs and module docstrings change in many commits without being
    the edit the subject describes; the released filter strips them before every check, and
    its output keeps the stripped files.
    """
    return {**row, "before": strip_header_lines(row["before"]), "after": strip_header_lines(row["after"])}


RULES: dict[str, Rule] = {
    "subject_length": subject_length,
    "imperative_subject": imperative_subject,
    "nonempty": nonempty,
    "changed": changed,
    "no_markers": no_markers,
    "python_parses": python_parses,
    "min_edit_distance": min_edit_distance,
    "no_setuptools_import": no_setuptools_import,
}

# Steps that rewrite the row instead of judging it; they share the rules' namespace and config.
TRANSFORMS: dict[str, Transform] = {"strip_header": strip_header}


def _step(name: str) -> Rule | Transform:
    return TRANSFORMS[name] if name in TRANSFORMS else RULES[name]


def check_rules(rules: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Fail at start-up on an unknown rule or parameter, naming it."""
    import inspect

    for name, params in rules:
        if name not in RULES and name not in TRANSFORMS:
            raise ValueError(f"unknown filter rule {name!r}; known: {sorted({*RULES, *TRANSFORMS})}")
        accepted = set(inspect.signature(_step(name)).parameters) - {"row"}
        unknown = set(params) - accepted
        if unknown:
            raise ValueError(
                f"filter rule {name!r} has no parameter(s) {sorted(unknown)}; it takes {sorted(accepted)}"
            )


def run_rules(row: dict, rules: Sequence[tuple[str, dict[str, Any]]]) -> tuple[dict, str]:
    """(the row as the transforms met so far rewrote it, the drop reason or "").

    The first rule that rejects the row names the reason and ends the run.
    """
    for name, params in rules:
        if name in TRANSFORMS:
            row = TRANSFORMS[name](row, **params)
            continue
        reason = RULES[name](row, **params)
        if reason is not None:
            return row, reason
    return row, ""


def apply_rules(row: dict, rules: Sequence[tuple[str, dict[str, Any]]]) -> tuple[bool, str]:
    """(keep, reason): the first rule that rejects the row names the reason."""
    reason = run_rules(row, rules)[1]
    return not reason, reason


def filter_batch(batch: dict[str, list], rules: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, list]:
    """Batched form for `datasets.map` and Ray `map_batches`: adds a `drop_reason` column.

    With a transform among the rules every column is written back as rewritten, so a kept
    row carries the code its rules judged.
    """
    n = len(batch["id"])
    results = [run_rules({key: batch[key][i] for key in batch}, rules) for i in range(n)]
    reasons = [reason for _, reason in results]
    if not any(name in TRANSFORMS for name, _ in rules):
        return {**batch, "drop_reason": reasons}
    return {**{key: [row[key] for row, _ in results] for key in batch}, "drop_reason": reasons}
