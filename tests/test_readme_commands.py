"""Every command in the README's bash blocks, word for word, on a fresh clone with the hub offline.

A command that needs no GPU, hub or Ray cluster runs to the end, in an order where each finds what
an earlier one made (the README's own order, the tables after the runs they read). The others stop
before any work with one line (`error: ...`, exit 2; under torchrun the exit code is torchrun's, its
own summary of the failed worker follows, and no worker prints a traceback). A command added to the
README without a place here fails the first test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, default_sigint, fresh_clone

BOLTONS = "python -m data_pipeline.novel_api all library=boltons old=20.2.1 new=25.0.0 out=data/novel/boltons"
FIX_TASKS = (
    "python -m data_pipeline.build pipeline=fix-tasks source=pypi \"source.packages=['inflection==0.5.1']\" "
    "out=data/fix-tasks"
)
HEF_AUDIT = "python -m eval.audit benchmark=humanevalfix 'benchmark.languages=[python,js,cpp,java,go,rust]' out=audits/hef"

# Run to the end, in this order (each after the ones it reads).
RUNS = [
    "python -m data_pipeline.build pipeline=commits2023ft source=git 'source.repos=[.]' out=data/commits2023ft",
    "torchrun --nproc_per_node 2 train/sft.py recipe=tiny",
    "python -m eval.run benchmark=fixtures model.path=runs/tiny/final backend=hf gen.n=4 out=runs/tiny-fixtures",
    "python -m eval.run benchmark=humanevalfix model=reference gen.n=1",
    "python -m eval.run benchmark=humanevalfix model=identity gen.n=1",
    "python -m eval.run benchmark=humanevalfix benchmark.variant=fixdocs 'benchmark.languages=[python,js]' "
    "model=reference gen.n=1 out=runs/hef-fixdocs",
    "python -m eval.tables compare runs/eval/humanevalfix-reference runs/eval/humanevalfix-identity "
    "--out tables/compare.md",
    "python -m eval.build_apiupdate source=humaneval out=data/apiupdate",
    "python -m eval.audit benchmark=fixtures 'model_results=[runs/tiny-fixtures]' out=audits/fixtures",
    BOLTONS,  # from the package registry (PyPI), which CI reaches too
    FIX_TASKS,  # an sdist from the package registry
    "python train/sft.py recipe=tiny-warmup && python train/rl.py recipe=tiny-grpo",
]

# Started word for word, interrupted after a while (Ctrl-C): one line, exit 130, and what finished is kept.
# Its full run is 41 min on the 2-core machine (docs/audit.md); the audit tests run it on smaller sets.
INTERRUPTED = {HEF_AUDIT: "audits/hef"}

# Need a GPU's output, the hub or a Ray cluster: one line naming what is missing, before any work.
MODEL_6_7B = "recipe.model.path='deepseek-ai/deepseek-coder-6.7b-base'"
STOPS = {
    "torchrun --nproc_per_node 8 train/sft.py recipe=editcoder-6.7b": MODEL_6_7B,
    "python train/sft.py recipe=editcoder-6.7b-lora": MODEL_6_7B,
    "torchrun --nproc_per_node 8 train/rl.py recipe=editcoder-1.3b-grpo 'tasks.sources=[{name: canitedit, "
    "path: data/rl/tasks.jsonl}]' reward.tests=0.2 probe.path=probes.jsonl": "needs vLLM",
    "python train/sft.py recipe=editcoder-33b-qlora": "recipe.model.path='deepseek-ai/deepseek-coder-33b-base'",
    "python train/sft.py recipe=editcoder-6.7b-lora run.push_to_hub=true run.hub_model_id=ORG/NAME "
    "run.report_to=[wandb,tensorboard]": "run.push_to_hub=true",
    "torchrun --nproc_per_node 8 train/sft.py recipe=editcoder-6.7b recipe.lr=1e-5 data=editpackft "
    "deepspeed=zero3-offload run.output_dir=runs/ec67-lr1e-5": MODEL_6_7B,
    "python -m data_pipeline.build pipeline=editpackft source=hub source.name=bigcode/commitpackft "
    "source.subset=python out=data/editpackft": "bigcode/commitpackft",
    # the hub source is checked first (a Ray cluster that is not there: tests/data_pipeline/test_build.py)
    "python -m data_pipeline.build pipeline=editpackft executor=ray executor.address=auto out=data/editpackft": (
        "bigcode/commitpackft"
    ),
    "python -m eval.run benchmark=canitedit model.path=runs/editcoder-6.7b/final backend=vllm "
    "out=runs/ec67-canitedit": "model.path='runs/editcoder-6.7b/final'",
    "python -m eval.run benchmark=canitedit backend=openai model.name=gpt-4o-mini "
    "backend.base_url=https://api.openai.com/v1": "nuprl/CanItEdit",
    "python -m eval.tables apiupdate runs/study/*/": "runs/study/*",
    "python -m eval.tables novelapi runs/novelapi/*/": "runs/novelapi/*",
    "python -m eval.tables audit audits/canitedit audits/editbench": "audits/canitedit",
    "python -m eval.run benchmark=apiupdate benchmark.path=data/apiupdate model.path=runs/editcoder-6.7b/final "
    "gen.n=5 'score.ks=[1,3,5]'": "model.path='runs/editcoder-6.7b/final'",
    "python -m eval.apiupdate_edit editor=rome regime=single model.path=runs/editcoder-6.7b/final": (
        "model.path='runs/editcoder-6.7b/final'"
    ),
    "python -m eval.tables apiupdate runs/apiupdate/*/ --out report.md": "runs/apiupdate/*",
    "torchrun --nproc_per_node 8 train/sft.py recipe=novelapi-sft-lora data.path=data/novel/boltons/corpus/sft": (
        MODEL_6_7B
    ),
    "python -m eval.run benchmark=novelapi benchmark.path=data/novel/boltons "
    "model.path=runs/novelapi-sft-lora/final": "model.path='runs/novelapi-sft-lora/final'",
}

# Run by other tests or by CI itself.
ELSEWHERE = {
    "bash scripts/setup.sh --torch cpu": ".ci/run (tests/scripts/test_setup.py checks it runs this line)",
    "bash scripts/quickstart.sh": "tests/scripts/test_quickstart.py, twice in one folder",
    ".venv/bin/python -m pytest -q": ".ci/run",
}


def readme_commands(text: str) -> list[str]:
    """The commands of the bash blocks: continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def test_every_readme_command_has_its_place_here():
    commands = readme_commands((REPO / "README.md").read_text())
    placed = [*RUNS, *INTERRUPTED, *STOPS, *ELSEWHERE]
    assert len(placed) == len(set(placed))
    assert sorted(commands) == sorted(placed)


def test_the_commands_are_read_as_a_shell_reads_them():
    text = "```bash\n# a comment\npython a.py x=1 \\\n    y=2   # what it does\n\nbash b.sh\n```\n"
    assert readme_commands(text) == ["python a.py x=1 y=2", "bash b.sh"]


@dataclass
class Ran:
    done: subprocess.CompletedProcess
    seconds: float


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh clone, with this interpreter's virtualenv first on PATH (as `. .venv/bin/activate`
    would put it), the clone's code first on the import path, and the hub, GPUs and keys away."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout")
    root = tmp_path_factory.mktemp("readme")
    path = fresh_clone(root / "editforge")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "HF_TOKEN", "RAY_ADDRESS")},
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        "VIRTUAL_ENV": sys.prefix,
        "PYTHONPATH": str(path),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(root / "hf-home"),
        "CUDA_VISIBLE_DEVICES": "",
        "WANDB_MODE": "offline",
    }
    return path, env


def _shell(command: str, clone: tuple[Path, dict[str, str]], timeout: float) -> Ran:
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", command], cwd=clone[0], env=clone[1], capture_output=True, text=True, timeout=timeout
    )
    return Ran(done, time.monotonic() - started)


@pytest.fixture(scope="module")
def runs(clone) -> dict[str, Ran]:
    """Every command of RUNS, in order, each whatever the one before it did."""
    return {command: _shell(command, clone, timeout=1800) for command in RUNS}


def _json(clone, relative: str) -> dict:
    return json.loads((clone[0] / relative).read_text())


def _pass1(clone, run: str) -> dict[str, float]:
    return {split: m["pass@1"] for split, m in _json(clone, f"{run}/results.json")["metrics"].items()}


def _check_mining(clone, ran: Ran) -> None:
    manifest = _json(clone, "data/commits2023ft/manifest.json")
    assert manifest["kept"] > 0 and manifest["input"] == manifest["kept"] + sum(manifest["dropped"].values())
    notices = [line for line in ran.done.stderr.splitlines() if "decontamination: canitedit" in line]
    assert len(notices) == 1 and "skipped" in notices[0]  # on the hub only: skipped, said once, at start-up
    stage = next(s for s in manifest["stages"] if s["name"] == "decontaminate")
    assert stage["extra"]["skipped_benchmarks"] == ["canitedit"]
    assert stage["extra"]["benchmarks"] == ["humanevalfix", "fixtures"]


def _check_boltons(clone, ran: Ran) -> None:
    tasks = [
        json.loads(line) for line in (clone[0] / "data/novel/boltons/tasks.jsonl").read_text().splitlines()
    ]
    assert len(tasks) >= 3 and all(t["c1"] for t in tasks)
    bundles = (clone[0] / "data/novel/boltons/bundles.jsonl").read_text().splitlines()
    assert any(json.loads(b)["qualname"].endswith("chunk_ranges") for b in bundles)
    assert any((clone[0] / "data/novel/boltons/corpus/sft").iterdir())


CHECKS = {
    RUNS[0]: _check_mining,
    RUNS[1]: lambda clone, ran: (
        (clone[0] / "runs/tiny/final/model.safetensors").is_file() or pytest.fail("no model")
    ),
    RUNS[2]: lambda clone, ran: (
        set(_pass1(clone, "runs/tiny-fixtures")) == {"descriptive", "lazy"} or pytest.fail()
    ),
    RUNS[3]: lambda clone, ran: (
        _pass1(clone, "runs/eval/humanevalfix-reference") == {"python": 1.0} or pytest.fail()
    ),
    RUNS[4]: lambda clone, ran: (
        _pass1(clone, "runs/eval/humanevalfix-identity") == {"python": 0.0} or pytest.fail()
    ),
    RUNS[5]: lambda clone, ran: (
        _pass1(clone, "runs/hef-fixdocs") == {"python": 1.0, "js": 1.0} or pytest.fail()
    ),
    RUNS[6]: lambda clone, ran: (
        (
            "humanevalfix-reference" in (clone[0] / "tables/compare.md").read_text()
            and (clone[0] / "tables/compare.png").is_file()
        )
        or pytest.fail("no table or plot")
    ),
    RUNS[7]: lambda clone, ran: _json(clone, "data/apiupdate/manifest.json") or pytest.fail(),
    RUNS[8]: lambda clone, ran: _json(clone, "audits/fixtures/audit.json") or pytest.fail(),
    BOLTONS: _check_boltons,
    FIX_TASKS: lambda clone, ran: (
        (_json(clone, "data/fix-tasks/manifest.json")["kept"] > 0 and "rows/s" in ran.done.stderr)
        or pytest.fail("no fix-task rows")
    ),
    RUNS[-1]: lambda clone, ran: (
        (
            (clone[0] / "runs/tiny-grpo/final/model.safetensors").is_file()
            and _json(clone, "runs/tiny-grpo/tasks_manifest.json")["kept"] > 0
        )
        or pytest.fail("no RL model or task manifest")
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", RUNS)
def test_the_readme_command_runs_word_for_word(command, runs, clone):
    ran = runs[command]
    unreachable = ("could not install", "could not download")
    if (
        command in (BOLTONS, FIX_TASKS)
        and ran.done.returncode != 0
        and any(u in ran.done.stderr for u in unreachable)
    ):
        pytest.skip(f"the package registry cannot be reached: {ran.done.stderr.strip().splitlines()[-1]}")
    assert ran.done.returncode == 0, ran.done.stdout[-2000:] + ran.done.stderr[-4000:]
    assert "Traceback" not in ran.done.stderr, ran.done.stderr[-4000:]
    CHECKS[command](clone, ran)
    print(f"{ran.seconds:.0f} s: {command}")


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(INTERRUPTED))
def test_a_long_readme_command_starts_and_stops_on_ctrl_c(command, runs, clone):
    process = subprocess.Popen(
        ["bash", "-c", f"exec {command}"], cwd=clone[0], env=clone[1], stderr=subprocess.PIPE, text=True,
        preexec_fn=default_sigint,
    )  # fmt: skip
    time.sleep(45)
    assert process.poll() is None, process.stderr.read()[-3000:]  # working, not stopped by an error
    process.send_signal(signal.SIGINT)
    stderr = process.communicate(timeout=120)[1]
    lines = [line for line in stderr.splitlines() if line.startswith(("error:", "interrupted:"))]
    assert process.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("interrupted:") and INTERRUPTED[command] in lines[0]
    assert any((clone[0] / INTERRUPTED[command]).iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("command", list(STOPS))
def test_the_readme_command_stops_at_start_up_with_one_line(command, runs, clone):
    """After the runs (so a command stops on what only a GPU or the hub can make, not on a
    missing earlier step), with nothing written where it would have put its output."""
    before = sorted(p.relative_to(clone[0]) for p in clone[0].rglob("*") if ".git" not in p.parts)
    ran = _shell(command, clone, timeout=300)
    errors = [line for line in ran.done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and STOPS[command] in errors[0], ran.done.stderr[-4000:]
    if command.startswith("torchrun"):
        assert ran.done.returncode != 0
        frames = [line for line in ran.done.stderr.splitlines() if line.strip().startswith("File ")]
        assert not any("train/" in frame for frame in frames), ran.done.stderr[-4000:]
    else:
        assert ran.done.returncode == 2 and "Traceback" not in ran.done.stderr, ran.done.stderr[-4000:]
    after = sorted(p.relative_to(clone[0]) for p in clone[0].rglob("*") if ".git" not in p.parts)
    assert set(after) - set(before) <= {
        p for p in set(after) if "wandb" in p.parts or "__pycache__" in p.parts
    }
    assert ran.seconds < 120
