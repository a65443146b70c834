"""Decontamination offline, through `python -m data_pipeline.build`: a hub benchmark the user named
stops the build at start-up with one line. (The README's git-mining command, where CanItEdit is
skipped with one notice, runs word for word in tests/test_readme_commands.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(REPO)}


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@b"}  # fmt: skip
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _repository(path: Path) -> Path:
    path.mkdir()
    _git(path, "init", "-q")
    text = "def area(w, h):\n    return w * h\n"
    for subject, change in (
        ("Add the area of a rectangle", None),
        ("Return a float area for integer sides", ("w * h", "float(w * h)")),
        ("Add the perimeter of a rectangle", ("float(w * h)\n", "float(w * h)\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n")),
    ):  # fmt: skip
        if change:
            text = text.replace(*change)
        (path / "shapes.py").write_text(text)
        _git(path, "add", "shapes.py")
        _git(path, "commit", "-q", "-m", subject)
    return path


def test_a_hub_benchmark_named_offline_stops_the_build_at_start_up(tmp_path):
    repo = _repository(tmp_path / "repo")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "data_pipeline.build", "pipeline=commits2023ft", "source=git",
         f"source.repos=[{repo}]", f"out={tmp_path / 'out'}",
         "pipeline.decontaminate.benchmarks=[{name: canitedit, path: 'hub:nuprl/CanItEdit'}]"],
        cwd=REPO, env=OFFLINE, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-3000:]
    assert "pipeline.decontaminate.benchmarks" in errors[0] and "offline" in errors[0]
    assert "Traceback" not in done.stderr and not (tmp_path / "out" / "manifest.json").exists()
    assert time.monotonic() - started < 60  # before any stage ran
