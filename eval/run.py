"""Evaluate a model on a code-editing benchmark.

    python -m eval.run benchmark=canitedit model.path=runs/editcoder-6.7b/final backend=vllm out=runs/x
    python -m eval.run benchmark=humanevalfix model=reference out=runs/check
    python -m eval.run benchmark=fixtures backend=openai model.name=gpt-4o-mini backend.base_url=URL
    python -m eval.run ... stage=generate   # then stage=execute / stage=score, e.g. on another machine

The config is validated and the machine checked (benchmark files, toolchains, the hub) before
the evaluation stack is imported; the stages live in `eval/evaluation.py`.
"""

from __future__ import annotations

from typing import Any

from core.config import to_validated
from core.entry import App, run_app
from eval.config import EvalConfig
from eval.languages import check_languages


def to_eval_config(cfg: Any) -> EvalConfig:
    return to_validated(cfg, EvalConfig)


def preflight(cfg: EvalConfig) -> None:
    """What can be checked before anything heavy loads: the benchmark's source, toolchains."""
    bench = cfg.benchmark
    check_languages(bench.name, bench.languages)
    bench.check_source("benchmark")
    if cfg.model.kind == "replay":
        from core.hub import existing_path

        existing_path(cfg.model.path, "model.path", "model=replay reads a jsonl of scripted completions")


def evaluate(cfg: EvalConfig, resolved: dict[str, Any]) -> None:
    from eval.evaluation import EvalRun
    from eval.report import render_report

    run = EvalRun(cfg, resolved)
    stage = cfg.stage
    try:
        if stage in ("execute", "all") and run.benchmark.name != "novelapi":  # novelapi: one per interpreter
            run.sandbox  # noqa: B018 (starts the workers now, so they are warm once samples exist)
        if stage in ("generate", "all"):
            run.generate()
        if stage in ("execute", "all"):
            run.execute()
        if stage in ("score", "all"):
            results = run.score()
            if "report" in results:  # a benchmark with its own report (apiupdate)
                print(results["report"])
            else:
                print(render_report(cfg.model.name, run.benchmark.name, results))  # per problem: report.md
    finally:
        run.close()


APP = App("eval", EvalConfig, run=evaluate, preflight=preflight)

if __name__ == "__main__":
    run_app(APP)
