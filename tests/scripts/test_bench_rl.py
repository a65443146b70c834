"""A smoke run of scripts/bench_rl.py: a small batch through the reward path and both subprocess
baselines, which must agree on every pass, and a parsable RESULT line.

Speed is not asserted: the figures come from the full run (its docstring says how to run it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_rl_agrees_with_the_baselines_on_a_small_batch(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "bench_rl.py"),
            "--batch",
            "24",
            "--rounds",
            "2",
            "--tasks",
            "8",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, proc.stdout[-3000:]
    fields = dict(field.split("=", 1) for field in lines[0].split()[1:])
    assert fields["batch"] == "24" and fields["disagreements"] == "0", fields
    for key in ("ours_per_s", "subprocess_per_s", "subprocess_nosite_per_s", "ratio"):
        assert float(fields[key]) > 0, fields
