"""The README's three commands, scripts/setup.sh's arguments, and .ci/run running the same commands
(with the linters and the type checker between set-up and tests)."""

from __future__ import annotations

import re
import subprocess

from conftest import REPO


def _readme_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", readme, re.DOTALL)
    assert block, "README.md: no bash block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


# What .ci/run checks between set-up and tests (README.md, "Set up, run, test").
CHECKS = [".venv/bin/ruff check .", ".venv/bin/ruff format --check .", ".venv/bin/python -m mypy"]


def test_ci_runs_the_readme_set_up_and_test_commands():
    setup, _, tests = _readme_commands()
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    commands = [line for line in ci if line and not line.startswith(("#", "set ", "cd ", "export "))]
    assert commands == [setup, *CHECKS, tests]


def _setup(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "setup.sh"), *args], capture_output=True, text=True, timeout=60
    )


def test_setup_asks_for_an_explicit_torch_build():
    for args in ((), ("--torch", "rocm"), ("--torch",)):
        proc = _setup(*args)
        assert proc.returncode == 2, args
        assert proc.stderr.count("\n") == 1 and "--torch cpu or --torch cuda" in proc.stderr, args


def test_setup_rejects_unknown_options_and_explains_itself():
    proc = _setup("--torch", "cpu", "--fast")
    assert proc.returncode == 2 and "unknown option --fast" in proc.stderr
    proc = _setup("--help")
    assert proc.returncode == 0 and "--torch cpu" in proc.stdout and "--torch cuda" in proc.stdout
