"""The three entry points as a user runs them: strict keys, fast checks, one-line errors, own help.

Each runs as a subprocess, exactly as from a shell. A user error prints one line on stderr
(`error: what was wrong; what to do`) and exits 2; EDITFORGE_DEBUG=1 shows the traceback.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO

SFT = [sys.executable, str(REPO / "train" / "sft.py")]
RL = [sys.executable, str(REPO / "train" / "rl.py")]
EVAL = [sys.executable, "-m", "eval.run"]
BUILD = [sys.executable, "-m", "data_pipeline.build"]
ENV = {k: v for k, v in os.environ.items() if k != "EDITFORGE_DEBUG"}


def run(
    cmd: list[str], *args: str, cwd: Path = REPO, **env: str
) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    proc = subprocess.run(
        [*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=120, env={**ENV, **env}
    )
    return proc, time.perf_counter() - start


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "cmd, args, key",
    [
        (SFT, ["recipe=tiny", "+recipe.lrr=1e-5"], "recipe.lrr"),
        (SFT, ["recipe=tiny", "+recipe.lrr=1e-5", "--cfg", "job"], "recipe.lrr"),
        (SFT, ["recipe=tiny", "recipe.lrr=1e-5"], "recipe.lrr"),
        (EVAL, ["model=reference", "+gen.nn=5"], "gen.nn"),
        (EVAL, ["model=reference", "+gen.nn=5", "--cfg", "job"], "gen.nn"),
        (EVAL, ["model=reference", "sandbox.limits.memry_mb=1"], "sandbox.limits.memry_mb"),
        (BUILD, ["+pipeline.dedup.minhash.thresh=0.5"], "pipeline.dedup.minhash.thresh"),
    ],
)
def test_an_unknown_key_fails_at_start_up_naming_it(tmp_path, cmd, args, key):
    proc, seconds = run(cmd, *args)
    assert_one_line_error(proc, key, "unknown config key")
    assert seconds < 6, seconds


def test_a_missing_relative_data_path_fails_in_seconds_naming_it(tmp_path):
    proc, seconds = run(SFT, "recipe=tiny", "data.path=data/does-not-exist", cwd=tmp_path)
    line = assert_one_line_error(proc, "data/does-not-exist", "hub:")
    print(f"\nmissing data.path reported in {seconds:.2f} s: {line}")
    assert seconds < 3, seconds
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "cmd, args, needle",
    [
        (SFT, ["recipe=nope"], "recipe/nope"),  # unknown recipe: the options are listed
        (SFT, ["recipe=tiny", "recipe.loss_on=everything"], "recipe.loss_on"),  # bad value
        (SFT, ["recipe=tiny", "recipe.max_length=0"], "recipe.max_length"),
        (
            SFT,
            ["recipe=tiny", "data=editpackft+commits2023ft"],
            "data/editpackft",
        ),  # recipe default not built
        (EVAL, ["model=reference", "benchmark.path=none.jsonl"], "none.jsonl"),  # missing benchmark file
        (EVAL, ["model=reference", "gen.n=0"], "gen.n"),
        (EVAL, ["model=reference", "benchmark=humanevalfix", "benchmark.languages=[kotlin]"], "kotlin"),
        (BUILD, ["source=files", "source.paths=[nope.jsonl]"], "nope.jsonl"),
        (BUILD, ["pipeline.decontaminate.benchmarks=[{name: canitedit, path: gone.jsonl}]"], "gone.jsonl"),
        (BUILD, ["pipeline.dedup.minhash.threshold=1.5"], "threshold"),
    ],
)
def test_a_user_error_prints_one_line_and_exits_2(tmp_path, cmd, args, needle):
    proc, seconds = run(cmd, *args, cwd=REPO if cmd is not SFT else tmp_path)
    assert_one_line_error(proc, needle)
    assert seconds < 6, seconds


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="flash-attn is installed here")
def test_missing_flash_attn_is_one_line_before_anything_loads(tmp_path):
    proc, seconds = run(SFT, "recipe=tiny", "recipe.attn_implementation=flash_attention_2", cwd=tmp_path)
    assert_one_line_error(proc, "flash-attn", "recipe.attn_implementation=sdpa")
    assert seconds < 6 and not (tmp_path / "runs").exists()


def test_editforge_debug_shows_the_traceback(tmp_path):
    proc, _ = run(SFT, "recipe=tiny", "data.path=data/does-not-exist", cwd=tmp_path, EDITFORGE_DEBUG="1")
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "ConfigError" in proc.stderr


def test_cfg_job_answers_before_the_training_stack_loads(tmp_path):
    run(SFT, "recipe=editcoder-6.7b", "--cfg", "job", cwd=tmp_path)  # warm the file cache
    times = []
    for _ in range(3):
        proc, seconds = run(SFT, "recipe=editcoder-6.7b", "--cfg", "job", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "deepseek-ai/deepseek-coder-6.7b-base" in proc.stdout
        times.append(seconds)
    print(f"\n`train/sft.py recipe=editcoder-6.7b --cfg job`: {min(times):.2f} s (best of 3: {times})")
    assert min(times) < 6  # generous for loaded CI machines; about 0.4 s on 2 idle cores


GROUPS = {
    "sft": (SFT, {"recipe", "data", "deepspeed"}),
    "rl": (RL, {"recipe", "deepspeed"}),
    "eval": (EVAL, {"benchmark", "model", "backend"}),
    "build": (BUILD, {"source", "pipeline", "executor"}),
}


@pytest.mark.parametrize("tool", sorted(GROUPS))
def test_help_says_what_the_tool_does_and_lists_its_own_groups(tmp_path, tool):
    cmd, own = GROUPS[tool]
    proc, _ = run(cmd, "--help")
    assert proc.returncode == 0, proc.stderr
    groups = {
        line.split(":")[0].strip()
        for line in proc.stdout.splitlines()
        if line.startswith("  ") and ":" in line and "," in line
    }
    every = set().union(*(g for _, g in GROUPS.values()))
    assert groups & every == own, proc.stdout
    first = proc.stdout.strip().splitlines()[0]
    assert first.split(":")[0] in (cmd[-1].replace(str(REPO) + "/", ""), "python -m " + cmd[-1])


HYDRA_TOOLS = {
    "sft": SFT,
    "rl": RL,
    "build": BUILD,
    "eval": EVAL,
    "audit": [sys.executable, "-m", "eval.audit"],
    "build_apiupdate": [sys.executable, "-m", "eval.build_apiupdate"],
    "apiupdate_edit": [sys.executable, "-m", "eval.apiupdate_edit"],
    "novel_api": [sys.executable, "-m", "data_pipeline.novel_api"],
}


@pytest.mark.parametrize("tool", sorted(HYDRA_TOOLS))
def test_cfg_job_needs_no_required_path_and_help_names_only_real_keys(tmp_path, tool):
    import re

    cmd = HYDRA_TOOLS[tool]
    proc, _ = run(cmd, "--cfg", "job", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr
    help_text, _ = run(cmd, "--help", cwd=tmp_path)
    keys = set(re.findall(r"(?<![\w./<-])([a-z_]+\.[a-z_][a-z_0-9.]*)=", help_text.stdout))
    for key in sorted(keys):  # each dotted key the help names resolves in the printed config
        check, _ = run(cmd, "--cfg", "job", f"{key}=null", cwd=tmp_path)
        assert "unknown config key" not in check.stderr and "Could not override" not in check.stderr, key


@pytest.mark.parametrize("model", ["missing", "empty", "unloadable"])
def test_a_model_path_that_cannot_load_is_one_line_and_leaves_no_out_folder(tmp_path, model):
    folder = tmp_path / "model"
    if model != "missing":
        folder.mkdir()
    if model == "unloadable":  # a config but no tokenizer or weights: transformers itself refuses it
        (folder / "config.json").write_text('{"model_type": "llama"}')
    out = tmp_path / "out"
    proc, _ = run(EVAL, "benchmark=fixtures", f"model.path={folder}", "gen.n=1", f"out={out}", cwd=tmp_path)
    assert_one_line_error(proc, "model.path")
    assert not out.exists()


def test_the_ctrl_c_line_says_whether_the_same_command_resumes():
    from types import SimpleNamespace

    from core.entry import App, interrupted_message

    cfg = SimpleNamespace(out="runs/x", run=SimpleNamespace(output_dir="runs/t"))
    resumes = App("eval", object, run=print)
    assert interrupted_message(resumes, []) == "nothing was started"
    assert interrupted_message(resumes, [cfg]) == (
        "what finished is kept in out=runs/x; the same command resumes from there"
    )
    assert "run.output_dir=runs/t" in interrupted_message(
        App("sft", object, run=print, output_key="run.output_dir"), [cfg]
    )
    starts_over = App("build", object, run=print, interrupted="nothing was written to {out}; it starts over")
    assert interrupted_message(starts_over, [cfg]) == "nothing was written to out=runs/x; it starts over"


LATE_RANK_0 = """
import os, sys, time
from dataclasses import dataclass
sys.path.insert(0, {repo!r})
from core.entry import App, run_app
from core.errors import UserError

@dataclass
class Config:
    def validate(self) -> None:
        "Nothing to check: the preflight below is what fails."

def preflight(config: Config) -> None:
    if os.environ["RANK"] == "0":
        time.sleep(4)  # rank 0 scheduled last, as eight ranks on two cores are
    raise UserError("this launch needs a GPU")

if __name__ == "__main__":
    run_app(App("app", Config, run=print, preflight=preflight, config_dir={config_dir!r}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("rank_0_fails", [True, False])
def test_a_start_up_error_under_torchrun_is_one_line_however_the_ranks_are_scheduled(tmp_path, rank_0_fails):
    """The first rank to exit ends the launch: it must not be a silent one."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "app.yaml").write_text("{}\n")
    script = LATE_RANK_0.format(repo=str(REPO), config_dir=str(tmp_path / "conf"))
    if not rank_0_fails:  # a check only the other ranks fail: they speak for themselves, after the wait
        script = script.replace(
            'raise UserError("this', 'if os.environ["RANK"] != "0": raise UserError("this'
        )
        script = script.replace("time.sleep(4)", "time.sleep(60)")
    (tmp_path / "app.py").write_text(script)
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run(
        [str(torchrun), "--nproc_per_node", "3", str(tmp_path / "app.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**ENV, "OMP_NUM_THREADS": "1", "EDITFORGE_RANK_ERROR_WAIT_S": "2" if not rank_0_fails else "60"},
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0
    if rank_0_fails:
        assert errors == ["error: this launch needs a GPU"], proc.stderr[-3000:]
    else:
        assert errors and all(e.startswith("error: rank ") and "needs a GPU" in e for e in errors), (
            proc.stderr
        )


@dataclass
class _Counted:
    x: int = 1
    name: str = "a"

    def validate(self) -> None:
        if self.x < 0:
            raise ValueError("x must be >= 0")


def test_overrides_alone_compose_once_and_hydra_flags_still_take_hydras_own_entry(tmp_path, monkeypatch):
    """A command line of overrides is composed once, through Hydra's compose API, into the same
    config and record as Hydra's own entry makes; a sweep (-m) and hydra.* overrides still go there."""
    from hydra._internal.hydra import Hydra

    from core.entry import App, only_overrides, run_app

    assert only_overrides(["x=2", "+y=3", "~z", "model=reference"])
    assert not any(
        only_overrides(argv)
        for argv in (["-m", "x=1,2"], ["--cfg", "job"], ["hydra.verbose=true"], ["+hydra/x=y"])
    )
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "app.yaml").write_text("x: 1\nname: run-${x}\n")
    monkeypatch.chdir(tmp_path)
    runs: list[tuple[_Counted, dict]] = []
    compositions: list[str] = []
    compose = Hydra.compose_config

    def counted(self, *args, **kwargs):
        compositions.append(kwargs.get("config_name") or args[0])
        return compose(self, *args, **kwargs)

    monkeypatch.setattr(Hydra, "compose_config", counted)
    app = App("app", _Counted, run=lambda config, record: runs.append((config, record)), config_dir=conf)
    run_app(app, ["x=2"])
    assert len(compositions) == 1
    run_app(app, ["x=2", "hydra.verbose=false"])
    assert len(compositions) == 3  # Hydra's entry: once for its run mode, once to run
    assert runs[0] == runs[1] == (_Counted(x=2, name="run-2"), {"x": 2, "name": "run-2"})
    run_app(app, ["-m", "x=3,4", "hydra.sweep.dir=sweep"])
    assert [config.x for config, _ in runs[2:]] == [3, 4]


def test_an_evaluation_loads_no_asyncio():
    """What eval.run imports to evaluate and score a program benchmark leaves asyncio out: its
    progress bars are tqdm's notebook-or-console bars without tqdm.auto's asyncio class."""
    check = (
        "import sys\n"
        "import eval.run, eval.evaluation, eval.benchmarks.humanevalfix, eval.scoring\n"
        "from core.progress import tqdm\n"
        "assert sum(tqdm(range(3), disable=True)) == 3\n"
        "assert 'asyncio' not in sys.modules, sorted(m for m in sys.modules if 'asyncio' in m)\n"
    )
    proc = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True, env=ENV)
    assert proc.returncode == 0, proc.stderr
