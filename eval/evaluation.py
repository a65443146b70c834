"""One evaluation, top to bottom: load the benchmark, generate, execute, score.

`EvalRun(cfg, resolved)` loads the problems and resolves the prompt format; `generate()`,
`execute()` and `score()` are the stages `python -m eval.run stage=...` runs. Every sample
is appended to OUT/samples.jsonl as soon as it exists, so a killed run started again
continues where it stopped; metrics go to OUT/results.json and OUT/report.md.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from tqdm.auto import tqdm

from core.benchmarks import load_source
from core.config import wandb_has_key
from core.formats import PromptFormat, get_format
from core.layout import TrainedConfig
from core.sandbox import Sandbox, SandboxLimits, make_sandbox
from eval.config import EvalConfig
from eval.execute import execute_samples
from eval.generate import build_requests, generate_samples
from eval.generation import SamplingConfig, make_generator
from eval.languages import check_languages
from eval.report import render_report
from eval.samples import SampleStore, check_identity
from eval.scoring import measure_coverage, score

log = logging.getLogger("eval.run")


def resolve_format(cfg: EvalConfig) -> PromptFormat:
    """The model's prompt format: explicit, else the one it was trained in, else a default."""
    if cfg.model.prompt_format:
        return get_format(cfg.model.prompt_format)
    trained = TrainedConfig.read(cfg.model.path) if cfg.model.path and cfg.model.kind == "model" else None
    if trained is not None:
        return get_format(trained.prompt_format)
    if cfg.model.kind == "model" and cfg.backend.name == "openai" and cfg.backend.chat:
        return get_format("chat")
    return get_format("editcoder")


def _generator_options(cfg: EvalConfig) -> dict[str, Any]:
    b, m = cfg.backend, cfg.model
    if b.name == "hf":
        return {
            "path": m.path,
            "batch_size": b.batch_size,
            "dtype": m.dtype,
            "trust_remote_code": m.trust_remote_code,
        }
    if b.name == "vllm":
        return {
            "path": m.path,
            "tensor_parallel_size": b.tensor_parallel_size,
            "dtype": m.dtype,
            "gpu_memory_utilization": b.gpu_memory_utilization,
            "max_model_len": b.max_model_len,
            "trust_remote_code": m.trust_remote_code,
        }
    return {
        "model": m.name,
        "base_url": b.base_url,
        "chat": b.chat,
        "api_key_env": b.api_key_env,
        "concurrency": b.concurrency,
        "max_retries": b.max_retries,
        "backoff_s": b.backoff_s,
        "timeout_s": b.timeout_s,
    }


def _identity(cfg: EvalConfig) -> dict[str, Any]:
    """What decides which samples exist: the benchmark, the model and how it is sampled (not n)."""
    b, m, g = cfg.benchmark, cfg.model, cfg.gen
    return {
        "benchmark": [b.name, b.path, list(b.languages), b.variant, b.cells, b.retrieval, b.bundle],
        "model": [m.kind, m.path, m.name, m.prompt_format],
        "sampling": [g.temperature, g.top_p, g.max_new_tokens, g.seed],
    }


class EvalRun:
    def __init__(self, cfg: EvalConfig, resolved: dict[str, Any]):
        cfg.validate()
        self.cfg, self.resolved = cfg, resolved
        self.out = Path(cfg.out)
        bench = cfg.benchmark
        check_languages(bench.name, bench.languages)
        self.benchmark = load_source(bench)
        problems = self.benchmark.problems[: bench.limit] if bench.limit else self.benchmark.problems
        self.problems = {p.id: p for p in problems}
        self.splits = list(bench.splits) if bench.splits else self.benchmark.splits
        self.fmt = resolve_format(cfg)
        check_identity(self.out, _identity(cfg))
        self.store = SampleStore(self.out / "samples.jsonl")
        (self.out / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))

    def generate(self) -> int:
        cfg = self.cfg
        kind = cfg.model.kind if cfg.model.kind != "model" else cfg.backend.name
        options = {"path": cfg.model.path} if kind == "replay" else {}
        generator = make_generator(
            kind, self.fmt, _generator_options(cfg) if cfg.model.kind == "model" else options
        )
        # Chat prompts are rendered with the model's template; openai takes the messages instead.
        tokenizer = getattr(generator, "tokenizer", None)
        if tokenizer is None and self.fmt.name == "chat" and kind == "vllm":
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(cfg.model.path)
        requests = build_requests(list(self.problems.values()), self.splits, self.fmt, tokenizer)
        sampling = SamplingConfig(
            cfg.gen.temperature, cfg.gen.top_p, cfg.gen.max_new_tokens, self.fmt.stop, cfg.gen.seed
        )
        total = sum(max(cfg.gen.n - self.store.count(r.problem.id, r.split), 0) for r in requests)
        try:
            with tqdm(total=total, desc="Generating", unit="sample") as bar:
                return generate_samples(
                    self.store, requests, generator, self.fmt, cfg.gen.n, sampling, bar.update
                )
        finally:
            generator.close()

    @cached_property
    def sandbox(self) -> Sandbox:
        """One worker pool for execution and coverage, started on first use, stopped by close()."""
        s = self.cfg.sandbox
        return make_sandbox(s.backend, limits=s.limits, workers=s.workers)

    def _limits(self, timeout_s: float) -> SandboxLimits:
        return replace(self.cfg.sandbox.limits, timeout_s=timeout_s)

    def execute(self) -> None:
        s = self.cfg.sandbox
        todo = len(self.store.of_type("sample")) - len(self.store.of_type("execution"))
        if todo <= 0:
            return
        # novelapi starts one sandbox per library interpreter: the default one is not needed
        where = "" if self.benchmark.name == "novelapi" else f" ({self.sandbox.backend})"
        with tqdm(total=todo, desc=f"Executing{where}", unit="sample") as bar:
            if self.benchmark.name == "apiupdate":  # the modified API installed around each sample
                from eval.apiupdate.stages import execute_apiupdate

                execute_apiupdate(self.store, self.problems, self.sandbox, s.limits, bar.update)
                return
            if self.benchmark.name == "novelapi":  # the spy, under each library version's interpreter
                from eval.novelapi.stages import execute_novelapi

                execute_novelapi(
                    self.store, self.problems, s.backend, s.limits, s.workers, s.max_code_bytes, bar.update
                )
                return
            execute_samples(
                self.store,
                self.problems,
                self.sandbox,
                s.limits,
                s.max_code_bytes,
                bar.update,
            )

    def score(self) -> dict[str, Any]:
        if self.benchmark.name == "apiupdate":  # Compiles/Pass/Adoption/Workaround@k and the taxonomy
            from eval.apiupdate.report import render_eval_report
            from eval.apiupdate.stages import score_apiupdate

            scored = score_apiupdate(self.store, self.problems, self.splits, self.cfg.score.ks)
            report = render_eval_report(self.cfg.model.name, scored, self.cfg.score.ks)
        elif self.benchmark.name == "novelapi":  # pass@k, API_acc, Param_corr, failure classes per cell
            from eval.novelapi.stages import render_novelapi_report, score_novelapi

            scored = score_novelapi(self.store, self.problems, self.splits, self.cfg.score.ks)
            plot = self.out / "failure_classes.png"
            report = render_novelapi_report(self.cfg.model.name, scored, self.cfg.score.ks, plot)
        else:
            if self.cfg.score.excess_code:
                self._measure_coverage()
            scored = score(self.store, self.problems, self.splits, self.cfg.score.ks)
            report = render_report(self.cfg.model.name, self.benchmark.name, scored)
        results = {
            "metrics": scored["metrics"],
            "config": self.resolved,
            "benchmark": self.benchmark.name,
            "model": self.cfg.model.name,
        }
        (self.out / "results.json").write_text(json.dumps(results, indent=2))
        (self.out / "per_problem.json").write_text(json.dumps(scored["per_problem"], indent=2))
        (self.out / "report.md").write_text(report)
        if self.cfg.wandb.enabled:
            self._log_wandb(results)
        if self.benchmark.name in ("apiupdate", "novelapi"):
            results["report"] = report  # printed whole: its tables are not pass@k's
        return results

    def _measure_coverage(self) -> None:
        measured = self.store.of_type("coverage")
        todo = sum(e["passed"] and k not in measured for k, e in self.store.of_type("execution").items())
        if todo:
            limits = self._limits(self.cfg.sandbox.coverage_timeout_s)
            with tqdm(total=todo, desc="Coverage (ExcessCode)", unit="sample") as bar:
                measure_coverage(self.store, self.problems, self.sandbox, limits, bar.update)

    def _log_wandb(self, results: dict[str, Any]) -> None:
        import wandb

        run = wandb.init(
            project=self.cfg.wandb.project,
            name=f"{self.benchmark.name}-{self.cfg.model.name}",
            config=self.resolved,
            dir=str(self.out),
            mode="online" if wandb_has_key() else "offline",
        )
        run.log(
            {
                f"{split}/{k}": v
                for split, m in results["metrics"].items()
                for k, v in m.items()
                if isinstance(v, (int, float))
            }
        )
        run.finish()

    def close(self) -> None:
        if "sandbox" in self.__dict__:
            self.sandbox.close()
        self.store.close()
