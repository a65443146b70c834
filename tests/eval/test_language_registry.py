"""Languages are one registry: a language an installed package declares (in one module, with a
benchmark kind of its problems) runs through `eval.run` end to end, with its run token, and the
audit counts its tests by its own rules; the built-in languages are each one registered object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, install_plugin

from eval.languages import LANGUAGES, Language, command_job, get_language

PLUGIN = '''
import re
from dataclasses import dataclass

from core.benchmarks.options import BenchmarkOptions
from core.problems import Problem
from eval.benchmarks.programs import ProgramKind
from eval.languages import CommandJob, Language


class Shell(Language):
    """POSIX shell: the program's functions, then the tests under `set -e`, then the run token."""

    name = "sh"
    tool = "sh"
    test_functions = re.compile(r"^test_\\w+\\(\\)", re.M)
    assertions = re.compile(r"^\\s*\\[ ", re.M)

    def job(self, program, tests, helpers="", split=False):
        source = "set -e\\n" + program + "\\n" + tests + "\\ncat <&3 >&4\\n"
        return CommandJob(["sh", "main.sh"], {"main.sh": source})


LANGUAGE = Shell()


@dataclass
class ShellFixOptions(BenchmarkOptions):
    name: str = "shellfix"


class ShellFix(ProgramKind):
    name = "shellfix"
    options = ShellFixOptions

    def load(self, options):
        return [
            Problem(
                id=f"inc{i}",
                name=f"inc by {i}",
                before=f"inc() {{ echo $(($1 + {i - 1})); }}\\n",
                after=f"inc() {{ echo $(($1 + {i})); }}\\n",
                tests=f'[ "$(inc 1)" = "{i + 1}" ]\\n[ "$(inc 5)" = "{i + 5}" ]\\n',
                instructions={"shell": f"make inc add {i}"},
                language="sh",
            )
            for i in (1, 2, 3)
        ]


KIND = ShellFix()
'''


def _install(tmp_path: Path) -> Path:
    entry_points = "[editforge.languages]\nsh = shell_plugin:LANGUAGE\n\n[editforge.benchmarks]\nshellfix = shell_plugin:KIND\n"
    return install_plugin(tmp_path, "shell_plugin", PLUGIN, entry_points)


@pytest.mark.parametrize("model, expected", [("reference", 1.0), ("identity", 0.0)])
def test_an_installed_package_declares_a_language_that_runs_through_eval_run(tmp_path, model, expected):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{_install(tmp_path)}{os.pathsep}{REPO}"}
    out = tmp_path / "out"
    args = [sys.executable, "-m", "eval.run", "benchmark=shellfix", f"model={model}", "gen.n=2", f"out={out}"]
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "results.json").read_text())["metrics"]["shell"]["pass@1"] == expected
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    executions = [r for r in records if r["type"] == "execution"]
    assert len(executions) == 6 and {e["mode"] for e in executions} == {"command"}


def test_a_registered_language_is_looked_up_counted_and_checked(tmp_path, monkeypatch):
    from eval.audit.density import counts
    from eval.audit.linecoverage import unavailable

    monkeypatch.syspath_prepend(str(_install(tmp_path)))
    monkeypatch.setattr("eval.languages.PLUGINS.done", False)
    try:
        shell = get_language("sh")
        assert isinstance(shell, Language) and shell is LANGUAGES["sh"]
        assert command_job("sh", "f() { :; }", "[ 1 ]").argv == ["sh", "main.sh"]
        assert counts("test_a() {\n  [ 1 ]\n  [ 2 ]\n}\n", "sh") == (1, 2)
        assert unavailable("sh") == "no coverage tool for sh"  # it declares no measurer
    finally:
        LANGUAGES.pop("sh", None)
    with pytest.raises(ValueError, match="not supported"):
        command_job("cobol", "", "")


def test_each_built_in_language_is_one_registered_object_with_its_rules():
    assert list(LANGUAGES)[:6] == ["python", "js", "cpp", "java", "go", "rust"]
    for name, language in LANGUAGES.items():
        assert language.name == name and type(language).__module__.startswith("eval.languages.")
        assert language.test_counts("") == (0, 0)
