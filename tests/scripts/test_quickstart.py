"""The README's main job, shortened: scripts/quickstart.sh from mining to the results table,
on a fresh clone with the hub offline and nothing beside the clone (no ../shared)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, fresh_clone

pytestmark = pytest.mark.slow


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs git and a git checkout"
)
def test_quickstart_runs_offline_on_a_fresh_clone(tmp_path):
    clone = fresh_clone(tmp_path / "clone" / "editforge")
    assert not (clone.parent / "shared").exists()
    assert "shared" not in (clone / "scripts" / "quickstart.sh").read_text()
    out = tmp_path / "out"
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "QUICKSTART_FAST": "1",
        "QUICKSTART_DIR": str(out),
        # This interpreter and its packages, the clone's code first (the editable install points here).
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "VIRTUAL_ENV": sys.prefix,
        "PYTHONPATH": str(clone),
        # The hub offline and an empty cache: nothing may come from a download.
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf-home"),
    }

    def quickstart() -> subprocess.CompletedProcess:
        done = subprocess.run(
            ["bash", "scripts/quickstart.sh"],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        assert "Traceback" not in done.stdout + done.stderr
        return done

    proc = quickstart()

    manifest = json.loads((out / "data" / "manifest.json").read_text())
    assert manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values())
    final = out / "model" / "final"
    assert (final / "model.safetensors").exists()
    for name in ("eval-fixtures", "eval-humanevalfix"):
        results = json.loads((out / name / "results.json").read_text())
        assert all(0.0 <= m["pass@1"] <= 1.0 for m in results["metrics"].values())
    hef = json.loads((out / "eval-humanevalfix" / "results.json").read_text())
    assert hef["metrics"]["python"]["problems"] == 8  # QUICKSTART_FAST's sample of the shipped copy

    # The results table closes the run; every skipped step said so in one line.
    tail = proc.stdout[proc.stdout.index("== Results") :]
    assert "| tiny | descriptive |" in tail and "| tiny | lazy |" in tail and "| tiny | python |" in tail
    notices = [line for line in proc.stderr.splitlines() if "decontamination: canitedit" in line]
    assert len(notices) == 1 and "skipped" in notices[0]  # on the hub only, which is offline here
    # The model card carries the data manifest and both evaluations.
    card = (final / "README.md").read_text()
    assert f"{manifest['kept']} rows kept of {manifest['input']}" in card
    assert "| fixtures | descriptive |" in card and "| humanevalfix | python |" in card

    # Run again in the same folder: the finished training is left as it was, the evaluations
    # draw the same samples, and the card comes out the same.
    again = quickstart()
    assert "already holds this run" in again.stderr
    assert (final / "README.md").read_text() == card
