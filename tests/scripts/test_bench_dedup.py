"""Smoke runs of the dedup benchmarks at tiny sizes: they run end to end and print a parsable RESULT.

Speed is not asserted: the figures come from the full runs (scripts/bench_dedup.py,
scripts/bench_build_memory.py), not from tests.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run_result(script: str, *flags: str) -> tuple[dict[str, str], str]:
    """Run ``scripts/<script>`` and return its RESULT fields and its stdout."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / script), *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, proc.stdout[-3000:]
    return dict(field.split("=", 1) for field in lines[0].split()[1:]), proc.stdout


def test_bench_dedup_quick():
    fields, out = run_result(
        "bench_dedup.py",
        "--quick",
        "--docs",
        "300",
        "--sizes",
        "300",
        "--reps",
        "1",
        "--per-token-docs",
        "20",
    )
    assert int(fields["docs"]) == 300
    quality = {k: float(v) for k, v in fields.items() if k.endswith(("precision", "recall"))}
    methods = ("ours", "ours_lsh", "datasketch_bulk", "datasketch_token", "rensa")
    assert {f"{m}_removed_recall" for m in methods} <= set(quality)
    assert all(0.0 <= v <= 1.0 for v in quality.values()), quality
    for m in methods:
        assert float(fields[f"{m}_docs_per_s"]) > 0
        assert float(fields[f"{m}_rss_mb"]) > 0
    assert math.isfinite(float(fields["ratio_vs_rensa"]))
    for title in ("Corpus", "End to end", "Quality", "Throughput by corpus size", "Build CLI", "Targets"):
        assert title in out


def test_bench_build_memory_tiny():
    fields, out = run_result("bench_build_memory.py", "--rows", "2000")
    assert int(fields["rows"]) == 2000
    assert 0 < int(fields["kept"]) <= 2000
    assert float(fields["peak_rss_mb"]) > 0 and int(fields["samples"]) > 0
    assert {"source_s", "dedup_s"} <= set(fields)
    assert "Stages (manifest)" in out
