"""Shared fixtures: Hydra composition of the real configs, tiny tokenizers, CPU-only runs."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Tests mirror the packages (tests/eval/... tests eval/...) and import helpers from each other by
# module name: every test folder is importable. The folders have no __init__.py on purpose: a
# tests/eval package would shadow the real eval package.
for _folder in sorted({p.parent for p in Path(__file__).resolve().parent.rglob("test_*.py")}):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))
os.environ.setdefault("WANDB_SILENT", "true")


def default_sigint() -> None:
    """Popen's preexec_fn for a child the test interrupts with SIGINT: a suite started as a background
    job (`pytest &`) runs with SIGINT ignored, and a child that inherits that never sees Ctrl-C."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


os.environ.pop("WANDB_API_KEY", None)  # tests never log online


class JSONHandler:
    """Mixed into a test server's request handler: no request log, JSON in and out."""

    def log_message(self, *args):
        return None

    def read_json(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def reply_json(self, payload: object, content_type: str = "application/json") -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextlib.contextmanager
def local_server(handler: type) -> Iterator[str]:
    """`http://127.0.0.1:PORT`, served by `handler` in a thread until the block ends (scripted
    model endpoints, package indexes)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def install_plugin(tmp_path: Path, module: str, source: str, entry_points: str) -> Path:
    """A site folder holding an installed one-module package `module` (its `source`) that declares
    `entry_points` (entry_points.txt's text), as `pip install` of a plugin leaves it: put the folder
    on PYTHONPATH (or sys.path) and the registries find it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(source)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return site


def commitpackft_row(commit: str, before: str, after: str, subject: str) -> dict:
    """One row in CommitPackFT's schema (a Python file edited by a commit), for builds from files."""
    return {
        "commit": commit,
        "old_file": "m.py",
        "new_file": "m.py",
        "old_contents": before,
        "new_contents": after,
        "subject": subject,
        "message": subject,
        "lang": "Python",
    }


def fresh_clone(dest: Path) -> Path:
    """A `git clone` of this repository (its history is what the quickstart mines), with the
    working tree's tracked files copied over it, so uncommitted changes are what runs."""
    import shutil
    import subprocess

    def git(*args: str, cwd: Path) -> str:
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout

    git("clone", "--quiet", "--no-hardlinks", str(REPO), str(dest), cwd=REPO)
    for name in git("ls-files", "-z", cwd=REPO).split("\0"):
        src = REPO / name
        if name and src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def compose(overrides: list[str]):
    """Compose configs/sft.yaml with `overrides`, exactly as `train/sft.py` does."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import train.config  # noqa: F401  (registers the structured schema)

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        return hydra_compose(config_name="sft", overrides=overrides)


def app_config(overrides: list[str]):
    from omegaconf import OmegaConf

    from train.config import to_app_config

    cfg = compose(overrides)
    return to_app_config(cfg), OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)


@pytest.fixture
def tiny_tokenizer():
    from core.formats import FORMATS
    from train.modeling import train_tiny_tokenizer
    from train.synthetic_edits import synthetic_edits

    fmt = FORMATS["editcoder"]
    rows = synthetic_edits(300, seed=1)
    texts = [fmt.prompt(r["before"], r["instruction"]) + fmt.completion(r["after"]) for r in rows]
    return train_tiny_tokenizer(texts, vocab_size=512)


def python_cmd() -> list[str]:
    return [sys.executable]


def torchrun_cmd(nproc: int = 2) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc)]


def compose_build(overrides: list[str]):
    """Compose configs/build.yaml with `overrides`, as `python -m data_pipeline.build` does."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import data_pipeline.config  # noqa: F401  (registers the structured schema)

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        return hydra_compose(config_name="build", overrides=overrides)


def build_commits(tmp_path: Path, bodies: list[str], overrides: list[str]) -> dict:
    """manifest.json of a real build (no decontamination) of six commits, each appending a line to a body."""
    import json

    from data_pipeline.build import to_build_config
    from data_pipeline.pipeline import run_pipeline

    rows = [
        {"commit": f"c{i}", "old_file": "m.py", "new_file": "m.py", "lang": "Python",
         "old_contents": bodies[i % len(bodies)], "new_contents": bodies[i % len(bodies)] + "LIMIT = 10\n",
         "subject": f"Add a constant to module number {i}", "message": "Add a constant"}
        for i in range(6)
    ]  # fmt: skip
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = compose_build(
        ["source=files", f"source.paths=[{raw}]", f"out={tmp_path / 'out'}",
         "pipeline.decontaminate.enabled=false", *overrides]
    )  # fmt: skip
    run_pipeline(to_build_config(cfg))
    return json.loads((tmp_path / "out" / "manifest.json").read_text())


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny Llama (random weights) with a tokenizer trained on synthetic edits, saved as a model
    folder any backend or entry point can load."""
    import torch
    from transformers import AutoModelForCausalLM

    from core.formats import FORMATS
    from train.config import TinyModelConfig
    from train.modeling import tiny_llama_config, train_tiny_tokenizer
    from train.synthetic_edits import synthetic_edits

    fmt = FORMATS["editcoder"]
    rows = synthetic_edits(200)
    tok = train_tiny_tokenizer([fmt.prompt(r["before"], r["instruction"]) + r["after"] for r in rows], 512)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_llama_config(TinyModelConfig(), tok))
    out = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
