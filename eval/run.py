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
from eval.sandbox_start import Begun, close_started, start_sandbox


def to_eval_config(cfg: Any) -> EvalConfig:
    return to_validated(cfg, EvalConfig)


# the sandbox begun for a validated config (by its id) in preflight, until evaluate() takes it over
_BEGUN: dict[int, Begun] = {}


def preflight(cfg: EvalConfig) -> None:
    """What can be checked before anything heavy loads: the benchmark's source, toolchains, the model.
    Meanwhile the sandbox of this interpreter starts booting, on other cores (a run that executes
    samples takes it over; a failed check stops it)."""
    from eval.models import check_model

    if cfg.stage in ("execute", "all"):
        # the benchmark's languages where its options name them, else Python's: a run with others starts its own
        languages = frozenset(getattr(cfg.benchmark, "languages", None) or ["python"])
        future = start_sandbox(cfg.sandbox, None, languages, cfg.score.measured_in_verdicts)
        _BEGUN[id(cfg)] = Begun(future, languages)
    try:
        get_kind(cfg.benchmark.name).check(cfg.benchmark)
        check_model(cfg.model, cfg.backend)
    except BaseException:
        if id(cfg) in _BEGUN:
            close_started(_BEGUN.pop(id(cfg)).future)
        raise


def evaluate(cfg: EvalConfig, resolved: dict[str, Any]) -> None:
    from eval.evaluation import EvalRun

    out = Path(cfg.out)
    fresh = not out.exists()
    begun = _BEGUN.pop(id(cfg), None)
    try:
        run = EvalRun(cfg, resolved, begun)
    except BaseException:
        if begun is not None:
            close_started(begun.future)
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
