"""One sandbox config for every tool: the same `sandbox.*` keys reach the sandbox each tool starts,
through `SandboxConfig.open`, the one constructor its callers use."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from conftest import REPO

from core.entry import validate_overrides
from core.errors import ConfigError
from core.sandbox import SandboxLimits
from core.sandbox.config import SandboxConfig


def _apps():
    from data_pipeline.novel_api.app import APP as novel_api
    from eval.apiupdate_edit import APP as apiupdate_edit
    from eval.audit.__main__ import APP as audit
    from eval.build_apiupdate import APP as build_apiupdate
    from eval.run import APP as evaluate

    return {
        "eval.run": (evaluate, ["model=reference"]),
        "eval.audit": (audit, []),
        "eval.build_apiupdate": (build_apiupdate, []),
        "eval.apiupdate_edit": (apiupdate_edit, []),
        "data_pipeline.novel_api": (novel_api, []),
    }


TOOLS = ["eval.run", "eval.audit", "eval.build_apiupdate", "eval.apiupdate_edit", "data_pipeline.novel_api"]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_reads_the_same_sandbox_keys_into_the_one_config(tool):
    app, base = _apps()[tool]
    keys = [
        "sandbox.workers=3",
        "sandbox.backend=local",
        "sandbox.limits.timeout_s=7",
        "sandbox.strict=false",
    ]
    cfg = validate_overrides(app, [*base, *keys])
    assert type(cfg.sandbox) is SandboxConfig
    assert (cfg.sandbox.workers, cfg.sandbox.backend, cfg.sandbox.strict) == (3, "local", False)
    assert cfg.sandbox.limits.timeout_s == 7
    assert validate_overrides(app, base).sandbox == SandboxConfig()  # every tool's defaults are the same


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_takes_sandbox_workers_on_its_command_line(tool):
    """As a user runs it: the tool's own imports register everything its config composes from."""
    args = ["model=reference"] if tool == "eval.run" else []
    proc = subprocess.run(
        [sys.executable, "-m", tool, *args, "sandbox.workers=3", "--cfg", "job"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\n  workers: 3\n" in proc.stdout


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize(
    "override, needle",
    [
        ("sandbox.backend=docker", "sandbox.backend='docker'"),
        ("sandbox.workers=0", "sandbox.workers=0"),
        ("sandbox.limits.timeout_s=0", "SandboxLimits.timeout_s"),
        ("+sandbox.timeout_s=5", "sandbox.timeout_s"),  # the novel-API tool's old key: limits.timeout_s now
    ],
)
def test_a_bad_sandbox_value_is_one_line_naming_the_key(tool, override, needle):
    app, base = _apps()[tool]
    with pytest.raises(ConfigError) as err:
        validate_overrides(app, [*base, override])
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_open_starts_the_sandbox_the_config_describes():
    cfg = SandboxConfig(backend="local", workers=3, strict=False, limits=SandboxLimits(timeout_s=7))
    with cfg.open() as sandbox:
        assert (sandbox.backend, sandbox._pool.size, sandbox.strict) == ("local", 3, False)
        assert sandbox.limits.timeout_s == 7
        assert sandbox.run("x = 1", "assert x == 1").passed


def test_no_tool_unpacks_the_config_into_make_sandbox_by_hand():
    """Outside core.sandbox (and the benchmark scripts, which time the backends themselves) a sandbox
    is started only by `SandboxConfig.open`."""
    calls = []
    for package in ("eval", "data_pipeline", "train"):
        for file in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text(), str(file))):
                if isinstance(node, ast.Call) and getattr(
                    node.func, "id", getattr(node.func, "attr", "")
                ) in (
                    "make_sandbox",
                    "ForkServerSandbox",
                ):
                    calls.append(f"{file.relative_to(REPO)}:{node.lineno}")
    assert not calls, calls
