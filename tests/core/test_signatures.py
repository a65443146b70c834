"""Signature text read by `core.signatures`: every parameter kind, annotations and defaults kept
as text, clear errors, and nothing in the text ever run."""

from __future__ import annotations

import inspect
import json
import shutil
import textwrap

import pytest

from core.signatures import Parameter, Signature, SignatureError, parse_signature

P = inspect.Parameter


def test_every_parameter_kind_in_order():
    sig = Signature.from_text("(a, b, /, c, *args, d, e=1, **kwargs)")
    assert [(p.name, p.kind) for p in sig.parameters] == [
        ("a", P.POSITIONAL_ONLY),
        ("b", P.POSITIONAL_ONLY),
        ("c", P.POSITIONAL_OR_KEYWORD),
        ("args", P.VAR_POSITIONAL),
        ("d", P.KEYWORD_ONLY),
        ("e", P.KEYWORD_ONLY),
        ("kwargs", P.VAR_KEYWORD),
    ]
    assert [p.has_default for p in sig.parameters] == [False] * 5 + [True, False]
    assert Signature.from_text("(*, key)").parameters == (Parameter("key", P.KEYWORD_ONLY),)
    assert Signature.from_text("  ()  ") == Signature(())


def test_binding_follows_the_kinds():
    sig = Signature.from_text("(a, /, b, *rest, c, **extra)").to_inspect()
    bound = sig.bind(1, 2, 3, 4, c=5, z=6)
    assert bound.arguments == {"a": 1, "b": 2, "rest": (3, 4), "c": 5, "extra": {"z": 6}}
    with pytest.raises(TypeError):
        sig.bind(a=1, b=2, c=3)  # positional-only passed by name, and **extra does not take it
    with pytest.raises(TypeError):
        sig.bind(1, 2)  # keyword-only c missing


def test_annotations_and_return_annotation_are_kept_as_written():
    text = "(x: dict[str, int], /, *ys: 'Y', key: Callable[[int], str] | None = None, **kw: Any) -> ~T"
    sig = Signature.from_text(text)
    assert [p.annotation for p in sig.parameters] == [
        "dict[str, int]",
        "'Y'",
        "Callable[[int], str] | None",
        "Any",
    ]
    assert sig.returns == "~T"
    assert str(sig) == text
    assert Signature.from_text("(x)").parameters[0].annotation is None
    assert Signature.from_text("(x)").returns is None


@pytest.mark.parametrize(
    ("written", "default", "bound_repr"),
    [
        ('"-"', '"-"', "'-'"),  # a literal binds as Python's repr, as a recorded argument reads
        ("None", "None", "None"),
        ("-1.5", "-1.5", "-1.5"),
        ("(1,2)", "(1,2)", "(1, 2)"),
        ("{'k': [1, b'x']}", "{'k': [1, b'x']}", "{'k': [1, b'x']}"),
        ("float64", "float64", "float64"),  # a name: its text
        ("datetime.date(2020, 1, 1)", "datetime.date(2020, 1, 1)", "datetime.date(2020, 1, 1)"),
        ("<object object at 0x7f>", "<object object at 0x7f>", "<object object at 0x7f>"),
        ("<function <lambda> at 0x7f>", "<function <lambda> at 0x7f>", "<function <lambda> at 0x7f>"),
    ],
)
def test_defaults_are_text_and_bind_as_reprs(written, default, bound_repr):
    sig = Signature.from_text(f"(x, sep={written}, *, n: int = 2)")
    assert [p.default for p in sig.parameters] == [None, default, "2"]
    bound = sig.to_inspect().bind("'a'")
    bound.apply_defaults()
    assert {k: repr(v) for k, v in bound.arguments.items()} == {"x": "\"'a'\"", "sep": bound_repr, "n": "2"}


def test_a_repr_with_non_ascii_text_keeps_the_positions_after_it():
    sig = Signature.from_text("(a=<Tag 'é ü'>, b: int = 2)")
    assert [(p.name, p.annotation, p.default) for p in sig.parameters] == [
        ("a", None, "<Tag 'é ü'>"),
        ("b", "int", "2"),
    ]


@pytest.mark.parametrize("function", [shutil.copytree, textwrap.shorten, json.dumps, inspect.Parameter])
def test_inspects_own_text_reads_back_unchanged(function):
    text = str(inspect.signature(function))
    assert str(Signature.from_text(text)) == text


@pytest.mark.parametrize(
    "text",
    [
        "(x",
        "x, y",
        "slugify(text)",
        "",
        "(a=1, b)",
        "(a, a)",
        "(<not a name>)",
        "(a) -> int: return 1",
        "(a): pass\ndef _g(b)",
        "(a):\n    import os\n    if 1",
        "(x)\x00",
    ],
)
def test_a_malformed_signature_is_a_clear_error(text):
    with pytest.raises(SignatureError) as caught:
        Signature.from_text(text)
    assert isinstance(caught.value, ValueError)
    assert repr(text) in str(caught.value)
    assert parse_signature(text) is None


def test_parse_signature_is_the_binding_signature_or_none():
    assert parse_signature(None) is None
    sig = parse_signature("(text, sep='-')")
    assert isinstance(sig, inspect.Signature)
    assert list(sig.parameters) == ["text", "sep"]


def test_code_in_a_signature_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    effects = [
        f"__import__('os').system('touch {marker}')",
        f"open({str(marker)!r}, 'w')",
        f"__import__('pathlib').Path({str(marker)!r}).touch()",
    ]
    text = f"(a={effects[0]}, b: {effects[2]} = {effects[1]}, *, c=[{effects[2]}]) -> {effects[0]}"
    sig = Signature.from_text(text)
    assert [p.default for p in sig.parameters] == [effects[0], effects[1], f"[{effects[2]}]"]
    bound = sig.to_inspect().bind()
    bound.apply_defaults()
    assert repr(bound.arguments["a"]) == effects[0]
    assert str(sig) == text
    with pytest.raises(SignatureError):
        Signature.from_text(f"(a): pass\n{effects[0]}\ndef _g(b)")
    with pytest.raises(SignatureError):
        Signature.from_text(f"(a):\n    {effects[1]}\n    if 1")
    assert not marker.exists()
