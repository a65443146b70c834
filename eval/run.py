"""Evaluate a model on a code-editing benchmark.

    python -m eval.run benchmark=NAME model.path=runs/editcoder-6.7b/final backend=vllm out=runs/x
    python -m eval.run benchmark=NAME model=reference out=runs/check    # the benchmark checks itself
    python -m eval.run benchmark=NAME backend=openai model.name=gpt-4o-mini backend.base_url=URL
    python -m eval.run ... stage=generate   # then stage=execute / stage=score, e.g. on another machine

`python -m eval.run --help` lists the benchmarks (`eval/benchmarks/`, one module per kind).

The config is validated and the machine checked (the benchmark's source and toolchains, the
model's weights, the hub) before the evaluation stack is imported; the stages live in
`eval/evaluation.py`, the benchmarks in `eval/benchmarks/`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from core.config import to_validated
from core.entry import App, run_app
from eval.benchmarks import get_kind
from eval.config import EvalConfig


def to_eval_config(cfg: Any) -> EvalConfig:
    return to_validated(cfg, EvalConfig)


def preflight(cfg: EvalConfig) -> None:
    """What can be checked before anything heavy loads: the benchmark's source, toolchains, the model."""
    from eval.models import check_model

    get_kind(cfg.benchmark.name).check(cfg.benchmark)
    check_model(cfg.model, cfg.backend)


def evaluate(cfg: EvalConfig, resolved: dict[str, Any]) -> None:
    from eval.evaluation import EvalRun

    out = Path(cfg.out)
    fresh = not out.exists()
    try:
        run = EvalRun(cfg, resolved)
    except BaseException:
        if fresh:  # a run that stopped before its first sample leaves no folder behind
            shutil.rmtree(out, ignore_errors=True)
        raise
    stage = cfg.stage
    try:
        if stage in ("execute", "all"):
            run.start_sandboxes()
        if stage in ("generate", "all"):
            run.generate()
        if stage in ("execute", "all"):
            run.execute()
        if stage in ("score", "all"):
            print(run.score()["summary"])
    except BaseException:
        run.close()
        if fresh and not any(run.store.records.values()):
            shutil.rmtree(out, ignore_errors=True)
        raise
    run.close()


APP = App("eval", EvalConfig, run=evaluate, preflight=preflight)

if __name__ == "__main__":
    run_app(APP)
