"""Each filter rule keeps the rows it should and drops the others under its reason."""

from __future__ import annotations

import pytest

from data_pipeline.filters import apply_rules, check_rules, filter_batch, strip_header_lines
from data_pipeline.verbs import IMPERATIVE_VERBS, starts_with_imperative

GOOD = {"id": "1", "instruction": "Fix the parser on empty input", "before": "x = 1\n", "after": "x = 2\n"}


def _reason(rule: str, params: dict | None = None, **row) -> str:
    return apply_rules({**GOOD, **row}, [(rule, params or {})])[1]


@pytest.mark.parametrize(
    "subject, keep",
    [
        ("Add retries to the client", True),
        ("fix typo", True),
        ("Refactor: split module", True),
        ("Added retries", False),
        ("Fixes #12", False),
        ("Parser cleanup", False),
        ("", False),
        ("WIP", False),
    ],
)
def test_imperative_subject(subject, keep):
    assert starts_with_imperative(subject) is keep
    assert _reason("imperative_subject", instruction=subject) == ("" if keep else "not_imperative")


def test_verb_list_is_substantial_and_lower_case():
    assert len(IMPERATIVE_VERBS) > 300 and all(v == v.lower() for v in IMPERATIVE_VERBS)


def test_subject_length_bounds():
    assert _reason("subject_length", instruction="Fix it") == "subject_length"
    assert _reason("subject_length", instruction="Fix the bug") == ""
    assert _reason("subject_length", instruction="Fix " + "x" * 1000) == "subject_length"
    assert _reason("subject_length", {"min_chars": 3}, instruction="Fix it") == ""


def test_nonempty_ignores_whitespace():
    assert _reason("nonempty", before="  \n\t") == "empty_code"
    assert _reason("nonempty", after="\n") == "empty_code"
    assert _reason("nonempty") == ""


def test_changed():
    assert _reason("changed", after=GOOD["before"]) == "unchanged"
    assert _reason("changed", {"ignore_whitespace": True}, after="x  =  1\n") == "unchanged"
    assert _reason("changed") == ""


def test_markers_whole_words_by_default():
    assert _reason("no_markers", after="x = 2  # TODO: later\n") == "todo_marker"
    assert _reason("no_markers", after="# FIXME\n") == "todo_marker"
    assert _reason("no_markers", after="BUG = 1\n") == "todo_marker"
    assert _reason("no_markers", after="DEBUG = True\n") == ""
    assert _reason("no_markers", {"whole_word": False}, after="DEBUG = True\n") == "todo_marker"


def test_python_parses():
    assert _reason("python_parses", after="def f(:\n") == "after_syntax_error"
    assert _reason("python_parses", after="x = '\\d'\n") == ""  # a SyntaxWarning is not an error
    assert _reason("python_parses", after="def f(:\n", lang="javascript") == ""
    assert _reason("python_parses") == ""


def test_first_failing_rule_names_the_drop_and_batches_agree():
    rules = [("subject_length", {}), ("imperative_subject", {}), ("changed", {})]
    rows = [GOOD, {**GOOD, "id": "2", "instruction": "Fixed"}, {**GOOD, "id": "3", "after": GOOD["before"]}]
    batch = {k: [r[k] for r in rows] for k in GOOD}
    assert filter_batch(batch, rules)["drop_reason"] == ["", "subject_length", "unchanged"]


def test_unknown_rules_and_parameters_fail_at_start_up():
    with pytest.raises(ValueError, match="nope"):
        check_rules([("nope", {})])
    with pytest.raises(ValueError, match="max_len"):
        check_rules([("subject_length", {"max_len": 3})])


# The released EditPackFT filter (nuprl/CanItEdit editpackft/filter.py), rule by rule.
# Each row below is one the released script would keep or drop as asserted.

RELEASED_MARKERS = {"markers": ["TODO", "FIXME", "BUG", "FIX ME", "todo", "fixme", "bug", "fix me"]}


def released_rules() -> list[tuple[str, dict]]:
    """The preset's rules as the build composes them."""
    from conftest import compose_build

    from data_pipeline.build import to_build_config

    cfg = compose_build(["pipeline=editpackft-released", "source=files", "source.paths=[.]"])
    return to_build_config(cfg).pipeline.rules()


def test_released_preset_lists_the_released_checks_in_order():
    """filter.py runs cleanup(), then blanks, then the bad-word list, then the edit
    distance, then ast.parse; nothing else (its input already passed CommitPackFT's
    subject filters)."""
    names = [name for name, _ in released_rules()]
    assert names == [
        "strip_header",
        "nonempty",
        "no_markers",
        "no_setuptools_import",
        "min_edit_distance",
        "python_parses",
    ]


def test_strip_header_drops_leading_comments_but_keeps_the_blank_lines_after_them():
    """cleanup(): each line that starts with '#' moves the cut below it; blank lines are
    passed over without moving it; the first other line ends the scan."""
    code = "#!/usr/bin/env python\n# Copyright\n\nimport os\n# later comment\n"
    assert strip_header_lines(code) == "\nimport os\n# later comment\n"


def test_strip_header_drops_a_module_docstring_through_its_closing_line():
    """cleanup(): a line with one triple quote opens a docstring; the next such line closes
    it, the cut goes below it and the scan stops, so comments after it stay."""
    code = '# licence\n"""Module.\n\nMore.\n"""\n# kept comment\nx = 1\n'
    assert strip_header_lines(code) == "# kept comment\nx = 1\n"


@pytest.mark.parametrize(
    "code, kept_from",
    [
        ('# c\n"""One line."""\nx = 1\n', '"""One line."""'),  # two triple quotes: a code line
        ("# c\n'''Single quotes.\n'''\nx = 1\n", "'''Single quotes."),  # only double quotes count
        ("# c\n    # indented\nx = 1\n", "    # indented"),  # only column-0 comments are dropped
        ('# c\n"""never closed\nx = 1\n', '"""never closed'),  # unclosed: cut stays after the comment
    ],
)
def test_strip_header_stops_where_the_released_cleanup_stops(code, kept_from):
    """cleanup() only counts lines with exactly one triple double quote as docstring
    boundaries and only lines starting with '#' as comments; anything else ends the scan,
    and an unclosed docstring leaves the cut below the last comment."""
    assert strip_header_lines(code) == code[code.index(kept_from) :]


def test_strip_header_drops_code_that_opens_a_triple_quoted_string():
    """cleanup() takes any line with one triple quote for a docstring opening, so a leading
    assignment of a multi-line string is dropped up to its closing quote (a released quirk)."""
    code = 'X = """\ntext\n"""\nprint(X)\n'
    assert strip_header_lines(code) == "print(X)\n"


def test_strip_header_rewrites_both_sides_for_the_rules_and_the_output():
    """filter.py overwrites old_contents and new_contents with cleanup() before any check
    and keeps the cleaned files: an edit of the header alone is then no edit at all, and a
    file of comments only is blank."""
    body = "def f(x):\n    return x * 2 + 1\n"
    header_only = {"before": "# v1\n" + body, "after": "# version 2 of the module\n" + body}
    rules = [("strip_header", {}), ("min_edit_distance", {"min_chars": 10})]
    assert apply_rules({**GOOD, **header_only}, rules) == (False, "small_edit")
    assert apply_rules({**GOOD, **header_only}, rules[1:]) == (True, "")
    comments_only = [("strip_header", {}), ("nonempty", {})]
    assert apply_rules({**GOOD, "after": "# all gone\n# really\n"}, comments_only) == (False, "empty_code")
    batch = {k: [v] for k, v in {**GOOD, "before": "# a\nx = 1\n", "after": "# b\nx = 22\n"}.items()}
    out = filter_batch(batch, [("strip_header", {})])
    assert (out["before"], out["after"], out["drop_reason"]) == (["x = 1\n"], ["x = 22\n"], [""])
    assert out["instruction"] == batch["instruction"]


@pytest.mark.parametrize(
    "after, dropped",
    [
        ("x = 2  # TODO: later\n", True),
        ("x = 2  # todo: later\n", True),
        ("x = 2  # Todo: later\n", False),  # mixed case is not in the list
        ("DEBUG = True\n", True),  # "BUG" as a substring
        ("log.debug(x)\n", True),  # "bug" as a substring
        ("# FIX ME\n", True),
        ("# fix me\n", True),
        ("x = 2\n", False),
    ],
)
def test_released_markers_are_substrings_as_written_or_in_lower_case(after, dropped):
    """filter.py drops a row whose new file contains TODO, FIXME, BUG or FIX ME, or the same
    words in lower case, anywhere, even inside another word."""
    params = {**RELEASED_MARKERS, "whole_word": False}
    assert _reason("no_markers", params, after=after) == ("todo_marker" if dropped else "")


@pytest.mark.parametrize(
    "after, dropped",
    [
        ("from setuptools import setup\nsetup()\n", True),
        ("import setuptools\n", True),
        ("import setuptools_scm\n", True),  # a substring match
        ("from distutils.core import setup\n", False),
        ("from setuptools.command import build\n", False),  # neither phrase occurs
    ],
)
def test_setuptools_import(after, dropped):
    """filter.py's bad-word list also holds "from setuptools import" and "import setuptools",
    matched as substrings of the new file."""
    assert _reason("no_setuptools_import", after=after) == ("setuptools_import" if dropped else "")
    assert _reason("no_setuptools_import", before=after) == ""  # only the new file counts


def _levenshtein(a: str, b: str) -> int:
    """Textbook dynamic programme: unit cost for insertion, deletion and substitution."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


@pytest.mark.parametrize(
    "before, after, dropped",
    [
        ("x = 'abcdefghij'\n", "x = 'ABCDEFGHIj'\n", True),  # 9 substitutions
        ("x = 'abcdefghij'\n", "x = 'ABCDEFGHIJ'\n", False),  # 10 substitutions
        ("x = 1\n", "x = 1\ny = 1234\n", True),  # 9 insertions
        ("x = 1\n", "x = 1\ny = 12345\n", False),  # 10 insertions
        ("x = 1\n", "x = 1\n", True),  # unchanged
    ],
)
def test_min_edit_distance_is_character_levenshtein_under_ten(before, after, dropped):
    """filter.py drops a row when editdistance.eval(old, new) < 10: Levenshtein distance over
    characters, a substitution costing 1 (not 2, as insert-plus-delete would)."""
    assert (_levenshtein(before, after) < 10) is dropped
    assert _reason("min_edit_distance", before=before, after=after) == ("small_edit" if dropped else "")


def test_min_edit_distance_matches_the_textbook_distance_around_the_cut():
    """The cut-off that stops the distance early must not change which side of 10 it falls."""
    import random

    rng = random.Random(3)
    for _ in range(200):
        before = "".join(rng.choice("ab c\n") for _ in range(rng.randint(0, 30)))
        after = "".join(rng.choice("ab c\n") for _ in range(rng.randint(0, 30)))
        expected = "small_edit" if _levenshtein(before, after) < 10 else ""
        assert _reason("min_edit_distance", before=before, after=after) == expected


@pytest.mark.parametrize(
    "before, after, reason",
    [
        ("# only a header\n", "x = 1  # TODO\n", "empty_code"),  # blanks before bad words
        ("x = 1\n", "x = 2  # TODO\n", "todo_marker"),  # bad words before the distance
        ("x = 1\n", "import setuptools\n", "setuptools_import"),
        ("x = 1\n", "x = 2\n", "small_edit"),  # the distance before the parse
        ("x = 1\n", "def broken(:\n    pass\n", "after_syntax_error"),
        ("x = 1\n", "def fixed(value):\n    return value\n", ""),
    ],
)
def test_released_preset_names_the_first_released_check_that_fails(before, after, reason):
    """filter.py counts a row under the first check it fails, in the order blanks,
    bad_comments, no_diff, syntax_errors."""
    assert apply_rules({**GOOD, "before": before, "after": after}, released_rules())[1] == reason
