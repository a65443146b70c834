"""NovelAPIBench's companion metrics (App. E.2) on a hand-built set: API_acc (the code selects the
target, run or not) and Param_corr (among samples that call it, calls that bind the reference's
parameters with compatible kinds), the expected values worked out by hand in the comments, next to
the earlier spy- and value-based definitions kept as options; E.2(ii)'s and E.6's readings."""

from __future__ import annotations

import pytest

from core.problems import Problem
from eval.benchmarks.novelapi import render_novelapi_report, score_novelapi
from eval.novelapi.classify import Attempt, explain
from eval.novelapi.metrics import (
    argument_kind,
    binds_like_reference,
    param_values_match,
    selects,
    static_calls,
)

TARGET = "novlib.text.slugify"
ALIASES = ("novlib.text.slugify", "novlib.compat.slugify")
SIGNATURE = "(text, sep='-', max_len=None)"
REFERENCE_CALL = {"args": ["'Hello, World'"], "kwargs": {"sep": "'+'", "max_len": "8"}}
NAMES = frozenset({"novlib", "text", "compat", "slugify", "split_words", "normalize"})
TB = 'Traceback (most recent call last):\n  File "<string>", line 3, in <module>\n'
TB_LIB = TB + '  File "/env/site-packages/novlib/text.py", line 6, in slugify\n'
HEAD = "def solve(title):\n"


def sample(code: str, passed: bool = False, stderr: str = "", calls: tuple[dict, ...] = ()) -> Attempt:
    return Attempt(
        code=code, target=TARGET, aliases=ALIASES, signature=SIGNATURE, passed=passed,
        status="passed" if passed else "failed", stderr=stderr, calls=calls,
        reference_calls=(REFERENCE_CALL,), library_names=NAMES,
        library_modules=frozenset({"novlib", "novlib.text", "novlib.compat"}),
    )  # fmt: skip


# (class, selects, binds, spy saw a call, values equal)
SET = {
    "P1": [
        (  # the reference's call, run: selects, binds
            sample("from novlib.text import slugify\n" + HEAD + "    return slugify(title, sep='+', max_len=8)\n",
                   passed=True, calls=(REFERENCE_CALL,)),
            ("OK", True, True, True, True),
        ),
        (  # the right symbol from the wrong module, never ran: selects; binds (text, sep, max_len) as str/number
            sample("from novlib import slugify\n" + HEAD + "    return slugify(title, sep='_', max_len=12)\n",
                   stderr=TB + "ImportError: cannot import name 'slugify' from 'novlib'"),
            ("WrongImport", True, True, False, False),
        ),
        (  # never imported: selects; binds (text, sep) only
            sample(HEAD + "    return slugify(title, '_')\n", stderr=TB + "NameError: name 'slugify' is not defined"),
            ("WrongImport", True, False, False, False),
        ),
        (  # a reimplementation: selects nothing, calls nothing
            sample("import re\n" + HEAD + "    return re.sub('[^a-z]+', '+', title.lower())[:8]\n",
                   stderr=TB + "AssertionError"),
            ("WrongAPISelection", False, None, False, False),
        ),
    ],
    "P2": [
        (  # the right call, max_len a str where the reference passes a number: a kind error
            sample("from novlib.text import slugify\n" + HEAD + "    return slugify(title, sep='+', max_len='8')\n",
                   stderr=TB_LIB + "TypeError: slice indices must be integers or None",
                   calls=({"args": ["'Hello, World'"], "kwargs": {"sep": "'+'", "max_len": "'8'"}},)),
            ("WrongShapeDtype", True, False, True, False),
        ),
        (  # a sibling at a wrong path
            sample("from novlib import split_words\n" + HEAD + "    return '+'.join(split_words(title))\n",
                   stderr=TB + "ImportError: cannot import name 'split_words' from 'novlib'"),
            ("WrongAPISelection", False, None, False, False),
        ),
    ],
    "P3": [
        (sample(HEAD + "    return title\n", stderr=TB + "AssertionError"), ("WrongAPISelection", False, None, False, False)),
    ],
}  # fmt: skip


def record(attempt: Attempt) -> dict:
    """An execution record as the benchmark stores it (eval/benchmarks/novelapi.py `_record`)."""
    return {
        "passed": attempt.passed,
        "calls": list(attempt.calls),
        "used": bool(attempt.calls),
        "selects": selects(attempt),
        "class": explain(attempt)[0],
        "param_correct": param_values_match(attempt.calls, attempt.reference_calls, attempt.signature),
        "param_binds": binds_like_reference(attempt),
    }


def problems(ids) -> dict[str, Problem]:
    return {
        pid: Problem(id=pid, name=pid, before="", after="", tests="", instructions={"Full": ""})
        for pid in ids
    }


@pytest.mark.parametrize(
    ("attempt", "expected"), [s for samples in SET.values() for s in samples], ids=lambda v: str(v)[:40]
)
def test_each_hand_built_sample(attempt, expected):
    got = record(attempt)
    assert (got["class"], got["selects"], got["param_binds"], got["used"], got["param_correct"]) == expected


def executions(cells: dict[str, dict[str, list[Attempt]]]) -> dict:
    return {
        (pid, cell, i): record(a)
        for cell, per in cells.items()
        for pid, attempts in per.items()
        for i, a in enumerate(attempts)
    }


def test_the_hand_built_set_scores_as_computed_by_hand():
    runs = executions({"Full": {pid: [a for a, _ in samples] for pid, samples in SET.items()}})
    default = score_novelapi(runs, problems(SET), ["Full"], [1])["metrics"]["Full"]
    # API_acc, a mean over problems: P1 3/4 (two WrongImport samples select it), P2 1/2, P3 0
    assert default["api_acc"] == pytest.approx((3 / 4 + 1 / 2 + 0) / 3)
    # Param_corr over the problems with a calling sample: P1 2 of its 3 callers, P2 0 of 1; P3 none
    assert default["param_corr"] == pytest.approx((2 / 3 + 0) / 2)
    assert default["classes"]["WrongImport"] == 2 and default["pass@1"] == pytest.approx((1 / 4) / 3)
    assert default["definitions"] == {"api_acc": "static", "param_corr": "binding"}
    # the earlier definitions, by name: the spy's record (P1 1/4, P2 1/2) and equal values (P1 1/4)
    old = score_novelapi(runs, problems(SET), ["Full"], [1], api_acc="spy", param_corr="values")["metrics"][
        "Full"
    ]
    assert old["api_acc"] == pytest.approx((1 / 4 + 1 / 2 + 0) / 3)
    assert old["param_corr"] == pytest.approx((1 / 4 + 0 + 0) / 3)
    report = render_novelapi_report("m", {"metrics": {"Full": default}}, [1], None)
    assert "| Full | 3 | 7 | 8.3 | 41.7 | 33.3 |" in report and "compatible kinds" in report


def test_e2_and_e6_patterns_can_occur():
    """E.2(ii): a cell with the higher API_acc and the lower pass@1 (its WrongImport band); E.6:
    moving out of distribution leaves Param_corr where it was while WrongImport grows."""
    right = SET["P1"][0][0]
    wrong_path = SET["P1"][1][0]
    other_api = SET["P2"][1][0]
    cells = {
        "in": {"P1": [right, right, other_api, other_api]},  # pass@1 1/2, API_acc 1/2
        "ood": {"P1": [right, wrong_path, wrong_path, wrong_path]},  # pass@1 1/4, API_acc 1
    }
    m = score_novelapi(executions(cells), problems(["P1"]), ["in", "ood"], [1])["metrics"]
    assert m["ood"]["api_acc"] == 1.0 > m["in"]["api_acc"] == 0.5
    assert m["ood"]["pass@1"] == 0.25 < m["in"]["pass@1"] == 0.5
    assert m["in"]["param_corr"] == m["ood"]["param_corr"] == 1.0
    assert (m["in"]["classes"]["WrongImport"], m["ood"]["classes"]["WrongImport"]) == (0, 3)
    # under the spy's definitions a WrongImport sample scores 0 on both: neither reading could occur
    spy = score_novelapi(executions(cells), problems(["P1"]), ["in", "ood"], [1], "spy", "values")["metrics"]
    assert spy["ood"]["api_acc"] == 0.25 < spy["in"]["api_acc"] and spy["ood"]["param_corr"] == 0.25


def test_a_callable_argument_compares_by_kind():
    lam = {"args": ["'x'"], "kwargs": {"key": "<function <lambda> at 0x7f01>"}}
    ref = {"args": ["'y'"], "kwargs": {"key": "<function <lambda> at 0x7f99>"}}
    mine = Attempt(
        code="from m import f\nf('x', key=lambda s: s)\n", target="m.f", aliases=("m.f",),
        signature="(text, key=None)", passed=False, status="failed", stderr="", calls=(lam,), reference_calls=(ref,),
    )  # fmt: skip
    assert binds_like_reference(mine) is True and not param_values_match(
        mine.calls, mine.reference_calls, "(text, key=None)"
    )
    # the same call never run: read from the code, the lambda still a callable
    assert static_calls(mine) == ({"args": ["'x'"], "kwargs": {"key": "<function <lambda>>"}},)
    unrun = Attempt(**{**mine.__dict__, "calls": ()})
    assert binds_like_reference(unrun) is True
    assert (
        binds_like_reference(
            Attempt(**{**mine.__dict__, "calls": ({"args": ["'x'"], "kwargs": {"key": "3"}},)})
        )
        is False
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("'a'", "str"), ("b'a'", "bytes"), ("-3", "number"), ("2.5", "number"), ("True", "bool"), ("None", "none"),
        ("[1, 2]", "list"), ("(1,)", "tuple"), ("{'a': 1}", "dict"), ("<function f at 0x1>", "callable"),
        ("<built-in function len>", "callable"), ("functools.partial(<function f at 0x1>, 2)", "callable"),
        ("<class 'int'>", "class"), ("<novlib.text.Slugger object at 0x7f>", "object:Slugger"),
        ("Decimal('1')", "object:Decimal"), ("<?>", "?"), ("<weird", "?"),
    ],
)  # fmt: skip
def test_argument_kinds_from_reprs(text, kind):
    assert argument_kind(text) == kind


def test_static_calls_at_any_path_and_opaque_ones():
    code = (
        "import novlib.strings as ns\nfrom novlib.text import normalize\n" + HEAD
        + "    a = ns.slugify(title, *parts)\n    b = normalize(title)\n    return ns.slugify(f'{title}', sep=str(a))\n"
    )  # fmt: skip
    calls = static_calls(sample(code))
    assert calls == (
        {"args": ["<?>", "<?>"], "kwargs": {}, "opaque": True},
        {"args": ["f'{title}'"], "kwargs": {"sep": "<?>"}},
    )
    assert selects(sample(code)) and not selects(
        sample("from novlib.text import normalize\nnormalize('x')\n")
    )
    own = sample("def slugify(text, sep='-'):\n    return text\n" + HEAD + "    return slugify(title)\n")
    assert not selects(own) and static_calls(own) == ()  # its own function, not the target
