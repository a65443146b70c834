"""`pipeline=editpackft-released` end to end: `python -m data_pipeline.build` on a small jsonl.

Each planted row is one the released EditPackFT filter (nuprl/CanItEdit
editpackft/filter.py) drops under a known counter; the manifest must count it under the
matching reason, keep every other row with its header stripped, and account for every row.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO, commitpackft_row

HEADER = "#!/usr/bin/env python\n# Copyright (c) the authors\n"


def _module(i: int) -> str:
    """A distinct function per row, so near-dedup keeps every planted row."""
    lines = [f"def function_{i}(x):"]
    lines += [f"    v{j} = x * {i * 37 + j * 11} + {j * j + 3 * i}" for j in range(i % 4 + 4)]
    return "\n".join([*lines, "    return x", ""])


def _row(commit: str, before: str, after: str, subject: str = "Return a shifted value") -> dict:
    return commitpackft_row(commit, before, after, subject)


def write_rows(path: Path) -> tuple[dict[str, int], int]:
    """The planted corpus; returns the drops the released filter makes, by reason, and the kept count."""
    good = [
        _row(
            f"g{i}",
            HEADER + _module(i),
            HEADER + _module(i).replace("return x", f"return x + {i} * scale_factor"),
        )
        for i in range(6)
    ]
    # The released filter applies no subject rule: a past-tense subject is kept.
    good.append(
        _row("p0", _module(40), _module(40).replace("return x", "return x * scale_factor"), "Added scaling")
    )
    body = _module(50)
    planted = [
        _row("e0", body, "# nothing but comments left\n"),  # blanks after cleanup()
        _row("t0", body, body + "log.debug(x)  # prints the value\n"),  # "bug" inside "debug"
        _row("s0", body, "from setuptools import setup\n\nsetup(name='pkg', version='1.0')\n"),
        _row("h0", "# v1\n" + body, "# version two of the module\n" + body),  # header-only edit
        _row("d0", body, body.replace("return x", "return x+1")),  # 2 characters
        _row("x0", body, body + "def broken(:\n    pass\n"),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in good + planted))
    dropped = {
        "filter:empty_code": 1,
        "filter:todo_marker": 1,
        "filter:setuptools_import": 1,
        "filter:small_edit": 2,
        "filter:after_syntax_error": 1,
    }
    return dropped, len(good)


def test_released_preset_end_to_end(tmp_path):
    """Every row is kept or dropped as the released filter would, under its own reason."""
    raw = tmp_path / "rows.jsonl"
    expected, kept = write_rows(raw)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "data_pipeline.build", "pipeline=editpackft-released", "source=files"]
    cmd += [f"source.paths=[{raw}]", f"out={out}", "pipeline.decontaminate.enabled=false"]
    cmd += ["stats=false", "plots=false"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dropped"] == expected
    assert manifest["kept"] == kept
    assert manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values())
    filter_stage = next(s for s in manifest["stages"] if s["name"] == "filter")
    assert [name for name, _ in filter_stage["extra"]["rules"]][0] == "strip_header"

    from datasets import load_from_disk

    rows = list(load_from_disk(str(out / "dataset")))
    assert len(rows) == kept
    assert all(not r["before"].startswith("#") and not r["after"].startswith("#") for r in rows)
    assert {r["before"] for r in rows} >= {_module(i) for i in range(6)}  # headers gone, code whole
