"""The audit hook of in-process runs lives in its own module (code_guard.py), which stays in
``sys.modules`` where a program can reach it: rebinding that module's globals must not change what
the installed hook refuses (everything it uses is bound when it is installed)."""

from __future__ import annotations

import textwrap

import pytest

from core.sandbox import SandboxLimits, bwrap_available, make_sandbox

LIMITS = SandboxLimits(timeout_s=5.0, memory_mb=512, max_output_bytes=100_000, max_processes=64, disk_mb=64)
BACKENDS = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
    ),
    "local",
]
HIDDEN = "assert f(1) == 48213\n"  # the tests hold the expected value; the program cannot know it
READ_THE_CALLERS_CODE = """
def f(x):
    try:
        raise ValueError
    except ValueError as exc:
        frame = exc.__traceback__.tb_frame
    consts = frame.f_back.f_code.co_consts
    return next((c for c in consts if type(c) is int and c > 1000), 0)
"""
REBIND = {
    "attributes_emptied": "g._CODE_ATTRS = g._FRAME_ATTRS = frozenset()\n",
    "tests_file_renamed": "g.TESTS_FILE = 'elsewhere'\n",
    "everything_at_once": "g._CODE_ATTRS = g._FRAME_ATTRS = frozenset(); g.TESTS_FILE = ''; g.RAW_MEMORY_MODULES = frozenset()\n",
}


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request):
    with make_sandbox(request.param, limits=LIMITS, workers=1) as sb:
        yield sb


@pytest.mark.parametrize("rebind", list(REBIND.values()), ids=list(REBIND))
def test_rebinding_the_guard_modules_globals_changes_nothing(sandbox, rebind):
    program = "import sys\ng = sys.modules.get('code_guard')\nif g is not None:\n" + textwrap.indent(
        rebind, "    "
    )
    result = sandbox.run(program + READ_THE_CALLERS_CODE, HIDDEN, split=False)
    assert not result.passed, result
    assert "tb_frame is not allowed" in result.stderr + result.detail, result


def test_the_same_program_passes_without_the_guard_in_the_way(sandbox):
    """The control: a program that returns the value passes (the tests are what they seem).
    Against the hook as it was first cut out of the harness, reading these globals at call time,
    the first and third rebindings above passed."""
    own = "def f(x):\n    return 48213\n"
    assert sandbox.run(own, HIDDEN, split=False).passed
