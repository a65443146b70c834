"""An interrupted audit started again redoes only what its steps had not finished (eval/audit/steps.py),
and says so; other settings start the steps over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, default_sigint

from core.benchmarks import load_benchmark
from eval.audit.steps import StepStore, identity, in_chunks


def _problems():
    return load_benchmark("fixtures", None).problems


def test_a_step_interrupted_mid_way_runs_only_the_rest_again(tmp_path):
    problems = _problems()
    seen: list[str] = []

    def work(chunk):
        if len(seen) >= 6:
            raise KeyboardInterrupt
        seen.extend(p.id for p in chunk)
        return {p.id: {"n": len(p.after)} for p in chunk if p.language == "python"}

    store = StepStore(tmp_path / "steps", {"a": 1})
    with pytest.raises(KeyboardInterrupt):
        in_chunks(store, "validity", problems, work, size=3)
    assert len(seen) == 6
    again: list[str] = []

    def rest(chunk):
        again.extend(p.id for p in chunk)
        return {p.id: {"n": len(p.after)} for p in chunk if p.language == "python"}

    rows = in_chunks(StepStore(tmp_path / "steps", {"a": 1}), "validity", problems, rest, size=3)
    assert again == [p.id for p in problems[6:]]
    assert rows == {p.id: {"n": len(p.after)} for p in problems}


def test_a_line_cut_short_is_run_again_and_other_settings_start_over(tmp_path):
    problems = _problems()[:4]
    store = StepStore(tmp_path / "steps", {"a": 1})
    in_chunks(store, "coverage", problems, lambda chunk: {p.id: {"x": 1} for p in chunk}, size=2)
    path = tmp_path / "steps" / "coverage.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:10])  # killed while writing the second chunk
    assert sorted(StepStore(tmp_path / "steps", {"a": 1}).done("coverage")) == [p.id for p in problems[:2]]
    assert StepStore(tmp_path / "steps", {"a": 2}).done("coverage") == {}  # other settings


def test_identity_follows_the_problems_and_options_not_the_model_results():
    from core.sandbox import SandboxLimits
    from eval.audit.audit import AuditOptions

    problems = _problems()
    base = identity("fixtures", problems, AuditOptions(), SandboxLimits())
    assert identity("fixtures", problems, AuditOptions(model_results=["runs/a"]), SandboxLimits()) == base
    assert identity("fixtures", problems, AuditOptions(repeats=5), SandboxLimits()) != base
    assert identity("fixtures", problems[1:], AuditOptions(), SandboxLimits()) != base
    assert identity("fixtures", problems, AuditOptions(), SandboxLimits(timeout_s=3)) != base


@pytest.mark.slow
def test_ctrl_c_in_an_audit_keeps_the_finished_problems_and_the_same_command_resumes(tmp_path):
    out = tmp_path / "audit"
    command = [sys.executable, "-m", "eval.audit", "benchmark=fixtures", f"out={out}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint
    )
    mutation = out / "steps" / "mutation.jsonl"
    deadline = time.monotonic() + 300
    while not (mutation.is_file() and len(mutation.read_text().splitlines()) >= 3):
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()[-3000:]
        time.sleep(0.05)
    # Stopped at once, so that a fast (or an unloaded) machine cannot finish the step before the
    # interrupt lands; the SIGINT waits until the process continues.
    process.send_signal(signal.SIGSTOP)
    assert len(mutation.read_text().splitlines()) < 14, "the mutation step finished before the interrupt"
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGCONT)
    stderr = process.communicate(timeout=120)[1]
    assert process.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert [line for line in stderr.splitlines() if line.startswith("interrupted:")] == [
        f"interrupted: what finished is kept in out={out}; the same command resumes from there"
    ]
    kept = {json.loads(line)["id"]: json.loads(line)["row"] for line in mutation.read_text().splitlines()}
    validity = (out / "steps" / "validity.jsonl").read_text()

    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"audit mutation: resuming, {len(kept)} of 14 problems done" in done.stderr + done.stdout
    assert (out / "steps" / "validity.jsonl").read_text() == validity  # not run again
    lines = [json.loads(line) for line in mutation.read_text().splitlines()]
    assert len(lines) == len({r["id"] for r in lines}) == 14  # each problem once
    audit = json.loads((out / "audit.json").read_text())
    rows = {r["id"]: r for r in audit["problems"]}
    assert all(rows[pid].get("mutation") == row for pid, row in kept.items() if row is not None)
