"""A smoke run of scripts/bench_train.py on CPU with the tiny recipe: the trainer's own step for the
padded baseline, packed rows through SDPA and through the varlen path, interleaved over rounds, and a
parsable RESULT line.

Speed is not asserted: the figures come from the full run on a GPU (docs/performance.md).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_bench_train_times_the_trainers_step_on_cpu(tmp_path):
    report = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_train.py"), "--device", "cpu", "--steps", "1",
         "--repeats", "2", "--rounds", "2", "--configs", "padded,sdpa,varlen,varlen+liger", "--json", str(report)],
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, proc.stdout[-3000:]
    fields = dict(field.split("=", 1) for field in lines[0].split()[1:])
    assert fields["device"] == "cpu"
    for config in ("padded", "sdpa", "varlen"):
        assert float(fields[f"{config}_tokens_per_s"]) > 0
        assert math.isfinite(float(fields[f"{config}_vs_padded"]))
    assert float(fields["padded_vs_padded"]) == 1.0
    results = {r["config"]: r for r in json.loads(report.read_text())["results"]}
    assert results["varlen"]["attention"] == "packed_varlen" and results["sdpa"]["attention"] == "sdpa"
    assert results["padded"]["non_pad_fraction"] < 1.0 == results["varlen"]["non_pad_fraction"]
    # two interleaved rounds of two windows each, merged into one median per configuration
    assert all(len(r["tokens_per_s_all"]) == 4 and r["rounds"] == 2 for r in results.values())
    assert all(math.isfinite(r["loss_last"]) for r in results.values())
    rounds = [line.split()[2].rstrip(":") for line in proc.stdout.splitlines() if line.startswith("round ")]
    assert rounds == ["padded", "sdpa", "varlen", "sdpa", "varlen", "padded"]  # rotated; Liger skipped on CPU
    if "liger-kernel (absent)" in proc.stdout:  # a lever this machine cannot run is skipped, with the reason
        assert "varlen+liger: skipped" in proc.stdout and "liger-kernel package" in proc.stdout
        assert "the [gpu] extra" in proc.stdout  # the reason verbatim
