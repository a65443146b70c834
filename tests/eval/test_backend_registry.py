"""Generation backends are one registry: a backend an installed package declares (one module) runs
through `eval.run` end to end with its own options schema; each backend's keys are its own; the
runner and the model resolution never name a backend."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, install_plugin

from core.errors import ConfigError
from eval.generation.backends import BACKENDS, HFOptions, OpenAIOptions, VLLMOptions, backend_options_of

PLUGIN = """
from dataclasses import dataclass

from core.errors import ConfigError
from eval.generation.backends import Backend, BackendOptions


@dataclass
class EchoOptions(BackendOptions):
    name: str = "echo"
    answer: str = "after"  # after: the reference edit; before: the code unchanged

    def validate(self, key="backend"):
        if self.answer not in ("after", "before"):
            raise ConfigError(f"{key}.answer must be after or before, got {self.answer!r}")


class EchoGenerator:
    name = "echo"

    def __init__(self, answer, fmt):
        self.answer, self.fmt = answer, fmt

    def generate(self, requests, n, sampling):
        for request in requests:
            yield request, [self.fmt.completion(getattr(request.problem, self.answer))] * n

    def close(self):
        self.answer = None  # holds no weights: nothing else to free


class Echo(Backend):
    name = "echo"
    options = EchoOptions

    def check(self, model, options):
        return None  # nothing to check: it loads no weights

    def make(self, model, options, fmt):
        return EchoGenerator(options.answer, fmt)


BACKEND = Echo()
"""


def _install(tmp_path: Path) -> Path:
    return install_plugin(
        tmp_path, "echo_backend", PLUGIN, "[editforge.backends]\necho = echo_backend:BACKEND\n"
    )


def _eval(site: Path, overrides: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{site}{os.pathsep}{REPO}"}
    args = [sys.executable, "-m", "eval.run", "benchmark=fixtures", "gen.n=1", *overrides]
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_an_installed_package_declares_a_backend_that_runs_through_eval_run(tmp_path):
    site = _install(tmp_path)
    for answer, expected in (("after", 1.0), ("before", 0.0)):
        out = tmp_path / answer
        done = _eval(site, ["backend=echo", f"backend.answer={answer}", "model.name=echo", f"out={out}"])
        assert done.returncode == 0, done.stderr[-3000:]
        metrics = json.loads((out / "results.json").read_text())["metrics"]
        assert {split: m["pass@1"] for split, m in metrics.items()} == dict.fromkeys(metrics, expected)
        assert f"answer: {answer}" in (out / "config.yaml").read_text()  # the run records its options
    # its own schema: another backend's key is unknown, its own values are checked, before any run
    for bad, message in (
        ("backend.batch_size=2", "unknown config key backend.batch_size"),
        ("backend.answer=middle", "backend.answer must be after or before"),
    ):
        done = _eval(site, ["backend=echo", bad, f"out={tmp_path / 'bad'}"])
        assert done.returncode != 0 and message in done.stderr, done.stderr[-2000:]
        assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize(
    "node, expected",
    [
        ({"name": "hf", "batch_size": 2}, HFOptions(batch_size=2)),
        (
            {"name": "vllm", "batch_size": 64, "tensor_parallel_size": 8},
            VLLMOptions(batch_size=64, tensor_parallel_size=8),
        ),
        (
            {"name": "openai", "base_url": "http://x/v1", "chat": False},
            OpenAIOptions(base_url="http://x/v1", chat=False),
        ),
    ],
)
def test_each_backend_reads_its_own_keys(node, expected):
    assert backend_options_of(node) == expected


@pytest.mark.parametrize(
    "node, message",
    [
        ({"name": "hf", "concurrency": 3}, "unknown config key backend.concurrency"),  # openai's key
        ({"name": "openai", "tensor_parallel_size": 2}, "unknown config key backend.tensor_parallel_size"),
        ({"name": "vllm", "gpu_memory_utilization": 1.5}, "gpu_memory_utilization must be in (0, 1]"),
        ({"name": "tgi"}, "backend.name='tgi': choose one of"),
    ],
)
def test_a_key_of_another_backend_or_a_bad_value_is_one_line(node, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        backend_options_of(node)


def test_the_runner_and_the_model_resolution_name_no_backend():
    names = re.compile("|".join(rf"[\"']{name}[\"']" for name in BACKENDS))
    for file in ("eval/evaluation.py", "eval/run.py", "eval/models.py"):
        assert not names.search((REPO / file).read_text()), file
