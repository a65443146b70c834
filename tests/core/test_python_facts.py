"""core.python_facts: what the host reads from a problem's texts, one parse per text."""

from __future__ import annotations

import ast

from core.python_facts import facts
from core.sandbox.declared import imported_roots, split_modules

TEXT = """\
import numpy as np, os.path
from math import sqrt as root, pi
from . import sibling
from typing import *
X = Y = 1
a.b = 2

class Base:
    pass_count = 0

async def go(): ...

def f(x):
    import json
    class Inner(Base, mod.Other):
        y = x
    return Inner
"""


def test_facts_of_a_text_that_parses():
    got = facts(TEXT)
    assert got.parses
    assert got.imported == {"numpy", "os", "math", "typing", "json"}  # `from . import` is relative
    assert got.bindings == (("np", "numpy"), ("os", "os"), ("root", "math.sqrt"), ("pi", "math.pi"))
    assert got.names == {"X", "Y", "Base", "go", "f"}  # `a.b = 2` binds no name
    assert got.classes == {"Base"}
    assert got.used == {node.id for node in ast.walk(ast.parse(TEXT)) if isinstance(node, ast.Name)}
    assert got.class_bases == (frozenset(), frozenset({"Base"}))  # `mod.Other` is no plain name


def test_a_text_that_does_not_parse_keeps_its_import_lines():
    got = facts("import os, sys.path\nfrom json import loads\ndef broken(:\n")
    assert not got.parses
    assert got.imported == {"os", "sys", "json"}
    assert not got.bindings and not got.names and not got.used


def test_each_text_is_parsed_once_whatever_asks():
    text = "import itertools\nfrom functools import reduce\n"
    facts.cache_clear()
    assert imported_roots(text, text) == {"itertools", "functools"}
    assert split_modules((text,), (text,)) == [
        "functools",
        "itertools",
        "itertools=itertools",
        "reduce=functools.reduce",
    ]
    assert facts.cache_info().misses == 1
