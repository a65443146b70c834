"""The README's main job, shortened: scripts/quickstart.sh from mining to the results table."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


def test_quickstart_runs_end_to_end(tmp_path):
    env = {**os.environ, "QUICKSTART_FAST": "1", "QUICKSTART_DIR": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "quickstart.sh")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values())
    assert (tmp_path / "model" / "final" / "model.safetensors").exists()
    for name in ("eval-fixtures", "eval-humanevalfix"):
        results = json.loads((tmp_path / name / "results.json").read_text())
        assert all(0.0 <= m["pass@1"] <= 1.0 for m in results["metrics"].values())
    assert "| tiny |" in proc.stdout
