"""Versions recorded in manifests, so a dataset can be rebuilt with the same tools."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path

PACKAGES = ("editforge", "datasets", "datasketch", "xxhash", "numpy", "pyarrow", "ray")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, check=False
    )
    if commit.returncode == 0:
        found["editforge_commit"] = commit.stdout.strip()
    return found
