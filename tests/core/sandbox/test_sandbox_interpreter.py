"""The sandbox's interpreter option: Python runs use another virtualenv (a library version's),
whose packages are importable inside the sandbox; the project's own packages are not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.sandbox import SandboxUnavailable, make_sandbox
from core.sandbox.bwrap import bwrap_available


@pytest.fixture(scope="module")
def other_env(tmp_path_factory) -> Path:
    """A virtualenv (no pip) with a one-module package only it has."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "env")], check=True)
    site = next((root / "env" / "lib").glob("python*/site-packages"))
    (site / "only_here.py").write_text("VERSION = '2.0'\ndef answer():\n    return 42\n")
    return root / "env" / "bin" / "python"


BACKENDS = ["local", *(["bwrap"] if bwrap_available() else [])]


@pytest.mark.parametrize("backend", BACKENDS)
def test_runs_use_the_given_interpreter_and_its_packages(other_env, backend):
    with make_sandbox(backend, workers=1, python=str(other_env)) as sandbox:
        ok = sandbox.run("import only_here, sys\nprint(sys.prefix)\n", "assert only_here.answer() == 42\n")
        assert ok.passed, (ok.status, ok.stderr)
        assert ok.stdout.strip() == str(other_env.parent.parent)
        no_project = sandbox.run("import core.sandbox\n")
        assert not no_project.passed
    with make_sandbox(backend, workers=1) as default:
        assert not default.run("import only_here\n").passed


def test_an_interpreter_that_cannot_run_is_a_clear_error(tmp_path):
    with pytest.raises(SandboxUnavailable, match="cannot run"):
        make_sandbox("local", workers=1, python=str(tmp_path / "nope" / "python"))
