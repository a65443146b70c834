"""Which problems run in the declared unverified mode: found from their own code, in the sandbox."""

from __future__ import annotations

import importlib.util

import pytest

from core.sandbox import make_sandbox
from core.sandbox.declared import imported_roots, raw_memory_roots, unverified_flags


def test_imported_roots_reads_imports_and_survives_broken_code():
    text = "import os.path, json as j\nfrom numpy.linalg import norm\nfrom . import local\ndef f(:\n"
    assert imported_roots(text) == {"os", "json", "numpy"}
    assert imported_roots("import a.b, c\nfrom d.e import f\nx = 'import z'\n") == {"a", "c", "d"}


@pytest.fixture(scope="module")
def sandbox():
    with make_sandbox(workers=2) as sb:
        yield sb


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def test_roots_that_load_raw_memory_are_found_by_importing_them(sandbox):
    candidates = [
        "json",
        "collections",
        "ctypes",
        "numpy",
        "no_such_module_xyz",
        "flask",
        "z3",
        "sklearn",
        "pandas",
    ]
    found = raw_memory_roots(sandbox, candidates)
    assert {"ctypes", "numpy"} <= found
    assert not found & {"json", "collections", "no_such_module_xyz"}
    if installed("flask"):
        assert "flask" not in found  # pure Python: strict mode runs it
    # ctypes and numpy underneath; pandas catches the refusal and raises an error of its own
    for package in ("z3", "sklearn", "pandas"):
        if installed(package):
            assert package in found
    assert sandbox._raw_memory_roots["numpy"] is True  # asked once per sandbox


def test_only_the_problems_own_code_declares_it(sandbox):
    flags = unverified_flags(
        sandbox, [("import numpy as np\n", "assert f() == 1\n"), ("def f():\n    return 1\n",)]
    )
    assert flags == [True, False]
    # a sample that imports numpy gains nothing: only trusted texts are passed in, and strict mode refuses it
    result = sandbox.run("import numpy\ndef f():\n    return 1\n", "assert f() == 1\n", unverified=flags[1])
    assert result.status == "failed" and "ImportError: importing numpy" in result.detail
