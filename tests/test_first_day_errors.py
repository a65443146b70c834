"""A new user's mistakes and interruptions through the real entry points: one line on stderr, exit 2
for a mistake and 130 for Ctrl-C, nothing half-written, and under torchrun no worker's traceback."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, app_config, default_sigint

pytestmark = pytest.mark.slow
ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "offline",
    "CUDA_VISIBLE_DEVICES": "",
}
TRAIN = [sys.executable, "train/sft.py", "recipe=tiny", "run.report_to=none"]


def _run(command: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout)


def _one_error_line(done: subprocess.CompletedProcess, code: int, *words: str) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith(("error:", "interrupted:"))]
    assert done.returncode == code, done.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def _rows(n: int, before: str = "x = 1\n") -> list[dict]:
    return [
        {"before": before + f"# {i}\n", "after": before + f"# {i}\ny = {i}\n", "instruction": f"add y = {i}"}
        for i in range(n)
    ]


def test_a_truncated_jsonl_is_one_line(tmp_path):
    data = tmp_path / "edits.jsonl"
    text = "".join(json.dumps(r) + "\n" for r in _rows(40))
    data.write_text(text + text.splitlines()[0][:30])  # the last line cut off
    done = _run([*TRAIN, f"data.path={data}", f"run.output_dir={tmp_path / 'run'}"])
    _one_error_line(done, 2, str(data), "cannot be read as json")
    assert not (tmp_path / "run" / "final").exists()


def test_a_model_path_that_does_not_exist_is_one_line_before_the_data_loads(tmp_path):
    started = time.monotonic()
    done = _run(
        [
            sys.executable,
            "train/sft.py",
            "recipe=editcoder-1.3b-lora",
            "recipe.model.path=/nonexistent/model",
            "data.datasets=[{synthetic: 50}]",
            f"run.output_dir={tmp_path / 'run'}",
            "run.report_to=none",
        ]
    )
    _one_error_line(done, 2, "recipe.model.path='/nonexistent/model'", "no such folder")
    assert time.monotonic() - started < 60 and not (tmp_path / "run").exists()


def test_a_split_left_empty_by_the_length_filter_is_one_line_and_truncate_keeps_the_rows(tmp_path):
    data = tmp_path / "edits.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows(40, before="z = 0\n" * 400)))  # all too long
    common = [*TRAIN, f"data.path={data}", "data.val_size=4", f"run.output_dir={tmp_path / 'run'}"]
    done = _run([*common, "recipe.overlong=drop"])
    line = _one_error_line(done, 2, "training split is empty", "36 overlong", "recipe.max_length")
    assert "recipe.overlong=truncate" in line and not (tmp_path / "run" / "final").exists()
    kept = _run([*common, "recipe.overlong=truncate", "run.max_steps=2"])
    assert kept.returncode == 0, kept.stderr[-3000:]
    stats = json.loads((tmp_path / "run" / "data_stats.json").read_text())
    assert (
        stats["train"]["kept"] == 36
        and stats["validation"]["kept"] == 4
        and stats["train"]["truncated"] == 36
    )


def test_the_empty_split_message_names_the_options_that_keep_rows():
    from train.sft_run import empty_split_message
    from train.tokenization import EncodeReport

    app, _ = app_config(["recipe=tiny", "recipe.overlong=drop"])
    report = EncodeReport(input=2, kept=0, truncated=0, dropped={"overlong": 2}, tokens=0, target_tokens=0)
    line = empty_split_message("validation", report, app)
    assert line.startswith("the validation split is empty: all 2 rows were dropped (2 overlong)")
    assert (
        "recipe.max_length (now 512)" in line
        and "recipe.overlong=truncate" in line
        and "data.val_size=0" in line
    )


@pytest.mark.skipif(shutil.which("torchrun") is None and not Path(sys.executable).with_name("torchrun").exists(),
                    reason="no torchrun")  # fmt: skip
def test_under_torchrun_only_rank_zero_prints_the_error_and_no_worker_a_traceback(tmp_path):
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    done = _run(
        [torchrun, "--nproc_per_node", "2", "train/sft.py", "recipe=tiny", f"data.path={tmp_path / 'none.jsonl'}",
         f"run.output_dir={tmp_path / 'run'}", "run.report_to=none"]
    )  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode != 0 and len(errors) == 1 and "none.jsonl" in errors[0], done.stderr[-3000:]
    # what remains is torchrun's own report of a worker that exited with 2 (its ChildFailedError)
    assert "sft.py" not in "".join(
        line for line in done.stderr.splitlines() if line.strip().startswith("File ")
    )


def test_ctrl_c_in_an_evaluation_is_one_line_and_keeps_the_samples(tiny_model_dir, tmp_path):
    out = tmp_path / "eval"
    command = [
        sys.executable, "-m", "eval.run", "benchmark=fixtures", f"model.path={tiny_model_dir}", "backend=hf",
        "gen.n=3", "gen.max_new_tokens=40", "score.excess_code=false", f"out={out}",
    ]  # fmt: skip
    proc = subprocess.Popen(
        command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=default_sigint,
    )  # fmt: skip
    samples = out / "samples.jsonl"
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if samples.exists() and samples.read_text().count('"type": "sample"') >= 6:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    done = subprocess.CompletedProcess(command, proc.returncode, "", stderr)
    _one_error_line(done, 130, f"out={out}", "resumes")
    kept = [json.loads(line) for line in samples.read_text().splitlines()]
    assert kept and all(record["type"] in ("sample", "execution") for record in kept)
