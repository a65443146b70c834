"""An hf-backend evaluation killed (SIGKILL) or interrupted (SIGINT) at several points, then run again,
ends with the completions and results of one uninterrupted run; so does a run with another
`backend.batch_size`. Each sample's draws come from its own seed (eval/generation/hf.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, default_sigint

pytestmark = pytest.mark.slow


def _command(model: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "eval.run",
        "benchmark=fixtures",
        "benchmark.splits=[descriptive]",
        f"model.path={model}",
        "backend=hf",
        "backend.batch_size=4",
        "gen.n=3",
        "gen.temperature=0.8",
        "gen.max_new_tokens=40",
        "score.ks=[1,3]",
        "score.excess_code=false",
        "sandbox.limits.timeout_s=5",
        f"out={out}",
        *extra,
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}


def _run(command: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _samples(out: Path) -> int:
    path = out / "samples.jsonl"
    if not path.exists():
        return 0
    return path.read_text(errors="replace").count('"type": "sample"')


def _interrupt(command: list[str], out: Path, after: int, sig: int) -> None:
    """Start the run and send ``sig`` once ``after`` samples exist (or the run ends first)."""
    proc = subprocess.Popen(
        command, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=default_sigint,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while proc.poll() is None and _samples(out) < after and time.monotonic() < deadline:
        time.sleep(0.01)
    if proc.poll() is None:
        proc.send_signal(sig)
    proc.wait(timeout=120)


def _outcome(out: Path) -> tuple[dict, dict]:
    completions = {}
    for line in (out / "samples.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "sample":
            completions[(record["problem"], record["split"], record["index"])] = record["completion"]
    return completions, json.loads((out / "results.json").read_text())["metrics"]


def test_an_interrupted_hf_evaluation_resumes_to_the_uninterrupted_result(tiny_model_dir, tmp_path):
    whole = _outcome_of(_run(_command(tiny_model_dir, tmp_path / "whole")), tmp_path / "whole")
    completions, metrics = whole
    assert len(completions) == 3 * 14 and len(set(completions.values())) > 14  # sampled, not one answer
    out = tmp_path / "interrupted"
    command = _command(tiny_model_dir, out)
    for after, sig in ((5, signal.SIGKILL), (14, signal.SIGINT), (26, signal.SIGKILL)):
        _interrupt(command, out, after, sig)
    done = _run(command)
    assert "resuming:" in done.stderr and "samples done" in done.stderr
    assert _outcome(out) == whole
    other = tmp_path / "batch-one"
    _run(_command(tiny_model_dir, other, "backend.batch_size=1"))
    assert _outcome(other) == whole


def _outcome_of(done: subprocess.CompletedProcess, out: Path) -> tuple[dict, dict]:
    assert "resuming:" not in done.stderr
    return _outcome(out)
