"""Each filter rule keeps the rows it should and drops the others under its reason."""

from __future__ import annotations

import pytest

from data_pipeline.filters import apply_rules, check_rules, filter_batch
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
