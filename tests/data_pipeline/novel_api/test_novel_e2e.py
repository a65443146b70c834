"""The novel-API path end to end on CPU: discover -> bundles -> tasks -> SFT and RAFT corpora ->
a tiny LoRA -> evaluation of every knowledge cell -> the report's taxonomy table and plot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import REPO, app_config
from test_eval_run import run_eval
from test_novel_discover import build_wheel

from core.knowledge import CELL_PRESETS
from train.sft_run import SFTRun

pytestmark = pytest.mark.slow

V1 = {
    "novlib/__init__.py": "from novlib.core import add\n",
    "novlib/core.py": 'def add(a, b):\n    """Add two numbers together, the plain way."""\n    return a + b\n',
}
V2_TEXT = '''
def add(a, b):
    """Add two numbers together, the plain way."""
    return a + b


def _words(text):
    return [w for w in text.replace("-", " ").split() if w]


def initials(text, sep=""):
    """Return the upper-case first letters of the words of a text.

    >>> initials("portable network graphics")
    'PNG'
    >>> initials("free and open source", sep=".")
    'F.A.O.S'
    """
    return sep.join(w[0].upper() for w in _words(text))


def repeat_words(text, times=2):
    """Repeat every word of the text a number of times, keeping their order.

    >>> repeat_words("a b", times=3)
    'a a a b b b'
    """
    return " ".join(w for w in _words(text) for _ in range(times))


def center_pad(text, width, fill="*"):
    """Pad a text on both sides with a fill character up to a total width.

    >>> center_pad("hi", 6)
    '**hi**'
    """
    return text.center(width, fill)
'''
V2 = {"novlib/__init__.py": "from novlib.core import add, initials\n", "novlib/core.py": V2_TEXT}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("e2e")
    wheels = {
        v: build_wheel(root / f"src{v}", files, v, root / "dist") for v, files in (("1.0", V1), ("2.0", V2))
    }
    return novel_all(wheels, root / "novel", "corpus.test_fraction=0.34", "corpus.distractors=1")


def novel_all(wheels: dict[str, Path], out: Path, *overrides: str) -> Path:
    """`python -m data_pipeline.novel_api all` on novlib 1.0 -> 2.0 from local wheels, offline."""
    done = subprocess.run(
        [sys.executable, "-m", "data_pipeline.novel_api", "all", "library=novlib", "old=1.0", "new=2.0",
         f"old_wheel={wheels['1.0']}", f"new_wheel={wheels['2.0']}", f"out={out}", *overrides],
        cwd=REPO, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PIP_NO_INDEX": "1", "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_stage_writes_its_output(built):
    apis = _jsonl(built / "apis.jsonl")
    assert sorted(a["qualname"] for a in apis if a["kept"]) == [
        "novlib.core.center_pad",
        "novlib.core.repeat_words",
        "novlib.initials",
    ]  # fmt: skip (the shortest public path names an API: initials is re-exported by the package)
    bundles = _jsonl(built / "bundles.jsonl")
    assert {b["qualname"] for b in bundles} == {a["qualname"] for a in apis if a["kept"]}
    assert all(
        b["E"] and "_words" in b["M"]["code"] for b in bundles if b["qualname"] != "novlib.core.center_pad"
    )
    tasks = _jsonl(built / "tasks.jsonl")
    assert tasks and all(t["c1"] for t in tasks) and {t["split"] for t in tasks} == {"train", "test"}
    for t in tasks:
        assert t["qualname"].rsplit(".", 1)[-1] not in t["description"]
    test_ids = {t["id"] for t in tasks if t["split"] == "test"}  # the paper's task-level split
    for kind in ("sft", "raft"):
        table = pq.read_table(built / "corpus" / kind / "data.parquet").to_pylist()
        manifest = json.loads((built / "corpus" / kind / "manifest.json").read_text())
        assert table and manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values())
        metas = [json.loads(r["meta"]) for r in table]
        assert not {m["task"] for m in metas} & test_ids  # no evaluation task leaks into a corpus
    raft_rows = pq.read_table(built / "corpus" / "raft" / "data.parquet").to_pylist()
    assert all(r["instruction"].count("<doc id=") == 2 for r in raft_rows)


def test_tiny_lora_then_every_cell_evaluated(built, tmp_path):
    app, resolved = app_config(
        ["recipe=tiny-lora", f"data.path={built / 'corpus' / 'sft'}", "data.val_size=0", "run.max_steps=2",
         "recipe.per_device_batch_size=2", "recipe.lora.merge=true", f"run.output_dir={tmp_path / 'lora'}",
         "run.report_to=none"]
    )  # fmt: skip
    run = SFTRun(app, resolved)
    run.setup()
    run.train()
    final = run.save()
    run.cleanup()
    out = tmp_path / "eval"
    results = run_eval(
        ["benchmark=novelapi", f"benchmark.path={built}", f"model.path={final}", "backend=hf", "gen.n=1",
         "gen.temperature=0", "gen.max_new_tokens=8", "score.ks=[1]", f"out={out}"]
    )  # fmt: skip
    assert set(results["metrics"]) == set(CELL_PRESETS)
    for m in results["metrics"].values():
        assert sum(m["classes"].values()) == m["samples"] and 0.0 <= m["pass@1"] <= 1.0
    report = (out / "report.md").read_text()
    assert "| Full |" in report and "## Failure classes" in report
    assert (out / "failure_classes.png").stat().st_size > 1000
    done = subprocess.run(  # the paper's layouts regenerated from this run
        [sys.executable, "-m", "eval.tables", "novelapi", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for heading in ("Companion metrics per cell", "Pooled pass@1 per cell and model", "Failure-class stack"):
        assert heading in done.stdout
    assert "| S+M_code |" in done.stdout and f"| {out} |" in done.stdout and "WrongImport" in done.stdout
