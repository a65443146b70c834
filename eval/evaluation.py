"""One evaluation, top to bottom: load the benchmark, generate, execute, score.

`EvalRun(cfg, resolved)` loads the problems through the benchmark's kind (`eval/benchmarks/`) and
resolves the prompt format; `generate()`, `execute()` and `score()` are the stages
`python -m eval.run stage=...` runs. The kind decides how a sample becomes a verdict, its metrics
and its report; this runner only stores: every sample and verdict is appended to
OUT/samples.jsonl as soon as it exists (`eval.samples.run_missing`), so a killed run started again
continues where it stopped; metrics go to OUT/results.json and OUT/report.md.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from core.config import wandb_has_key
from core.progress import tqdm
from core.sandbox import Sandbox
from eval.benchmarks import get_kind
from eval.benchmarks.base import ExecContext, Job, ScoreContext
from eval.config import EvalConfig
from eval.generate import build_requests, generate_samples
from eval.generation import SamplingConfig
from eval.models import load_generator, resolve_format
from eval.samples import SampleStore, check_identity, run_missing
from eval.sandbox_start import Begun, close_started, start_sandbox

log = logging.getLogger("eval.run")


def _identity(cfg: EvalConfig) -> dict[str, Any]:
    """What decides which samples exist: the benchmark, the model and how it is sampled (not n)."""
    m, g = cfg.model, cfg.gen
    return {
        "benchmark": cfg.benchmark.identity(),
        "model": [m.kind, m.path, m.name, m.prompt_format],
        "sampling": [g.temperature, g.top_p, g.max_new_tokens, g.seed],
    }


def first_per_split(problems: list, limit: int) -> list:
    """The first ``limit`` problems of each split (HumanEvalFix's languages, CanItEdit's instruction
    kinds), in their order: `benchmark.limit=10 benchmark.languages=[python,js]` is ten of each."""
    counts: dict[str, int] = defaultdict(int)
    kept = []
    for problem in problems:
        wanted = [split for split in problem.splits if counts[split] < limit]
        if wanted:
            kept.append(problem)
            for split in problem.splits:
                counts[split] += 1
    return kept


class EvalRun:
    def __init__(self, cfg: EvalConfig, resolved: dict[str, Any], begun: Begun | None = None):
        """``begun``: the sandbox of this interpreter, started while the preflight checks ran (taken
        over where it shows every toolchain the problems need, else stopped)."""
        cfg.validate()
        self.cfg, self.resolved = cfg, resolved
        self.out = Path(cfg.out)
        options = cfg.benchmark
        self.kind = get_kind(options.name)
        problems = self.kind.load(options)
        problems = first_per_split(problems, options.limit) if options.limit else problems
        self.problems = {p.id: p for p in problems}
        seen: dict[str, None] = {}
        for p in problems:
            seen.update(dict.fromkeys(p.splits))
        self.splits = list(options.splits) if options.splits else list(seen)
        self.fmt = resolve_format(cfg.model, cfg.backend)
        self.languages = frozenset(p.language for p in problems)
        self._sandboxes: dict[str | None, Future] = {}  # of Sandbox
        self._lock = threading.Lock()
        if begun is not None and self.languages <= begun.languages:
            self._sandboxes[None] = begun.future
        elif begun is not None:
            close_started(begun.future)
        check_identity(self.out, _identity(cfg))
        self.store = SampleStore(self.out / "samples.jsonl")
        (self.out / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))

    def generate(self) -> int:
        cfg = self.cfg
        generator = load_generator(cfg.model, cfg.backend, self.fmt)
        if cfg.model.kind == "model":  # a sandbox that cannot start stops the run before the model generates
            for future in list(self._sandboxes.values()):
                future.result()
        # Chat prompts are rendered with the model's template (a generator that holds weights has
        # its tokenizer); a served model takes the messages instead.
        tokenizer = getattr(generator, "tokenizer", None)
        requests = build_requests(list(self.problems.values()), self.splits, self.fmt, tokenizer)
        sampling = SamplingConfig(
            cfg.gen.temperature, cfg.gen.top_p, cfg.gen.max_new_tokens, self.fmt.stop, cfg.gen.seed
        )
        total = sum(max(cfg.gen.n - self.store.count(r.problem.id, r.split), 0) for r in requests)
        wanted = cfg.gen.n * len(requests)
        if 0 < total < wanted:
            log.info("resuming: %d of %d samples done, %d to generate", wanted - total, wanted, total)
        try:
            with tqdm(total=total, desc="Generating", unit="sample") as bar:
                return generate_samples(
                    self.store, requests, generator, self.fmt, cfg.gen.n, sampling, bar.update
                )
        finally:
            generator.close()

    def sandbox(self, python: str | None = None) -> Sandbox:
        """The worker pool for programs run by `python` (None: the sandbox's own interpreter),
        started on first use (or by `start_sandboxes`) and stopped by close()."""
        return self._starting(python).result()

    def start_sandboxes(self) -> None:
        """Begin starting the pools the problems need, on threads of their own: probing the
        backend and booting the servers takes about 0.2 s, which the generation and the first
        chunk's checks overlap."""
        for python in {self.kind.interpreter(p) for p in self.problems.values()}:
            self._starting(python)

    def _starting(self, python: str | None) -> Future:
        with self._lock:
            if python not in self._sandboxes:
                # our interpreter's servers start ready for measured split runs (another's may lack slipcover)
                measured = self.cfg.score.measured_in_verdicts and python is None
                self._sandboxes[python] = start_sandbox(self.cfg.sandbox, python, self.languages, measured)
            return self._sandboxes[python]

    def execute(self) -> int:
        s = self.cfg.sandbox
        done = self.store.of_type("execution")
        by_python: dict[str | None, list[tuple[Any, Job]]] = defaultdict(list)
        for key, sample in sorted(self.store.of_type("sample").items()):
            problem = self.problems.get(key[0])
            if key not in done and problem is not None:
                by_python[self.kind.interpreter(problem)].append((key, Job(key, problem, sample["code"])))
        todo = sum(len(jobs) for jobs in by_python.values())
        if not todo:
            return 0
        with tqdm(total=todo, desc="Executing", unit="sample") as bar:
            for python, jobs in by_python.items():
                measure = self.cfg.score.measured_in_verdicts
                coverage_limits = replace(s.limits, timeout_s=s.coverage_timeout_s)
                ctx = ExecContext(self.sandbox(python), s.limits, s.max_code_bytes, measure, coverage_limits)
                run_missing(
                    self.store,
                    "execution",
                    jobs,
                    lambda chunk, ctx=ctx: self.kind.execute([j for _, j in chunk], ctx),
                    bar.update,
                )
        return todo

    def score(self) -> dict[str, Any]:
        cfg = self.cfg
        ctx = ScoreContext(
            store=self.store,
            problems=self.problems,
            splits=self.splits,
            ks=list(cfg.score.ks),
            out=self.out,
            sandbox=self.sandbox,
            limits=replace(cfg.sandbox.limits, timeout_s=cfg.sandbox.coverage_timeout_s),
            excess_code=cfg.score.excess_code,
            probes=cfg.score.coverage == "probes",
            options=cfg.benchmark,
        )
        scored = self.kind.score(ctx)
        report = self.kind.report(cfg.model.label(), scored, ctx)
        results = {
            "metrics": scored["metrics"],
            "config": self.resolved,
            "benchmark": self.kind.name,
            "model": cfg.model.label(),
        }
        (self.out / "results.json").write_text(json.dumps(results, indent=2))
        (self.out / "per_problem.json").write_text(json.dumps(scored["per_problem"], indent=2))
        (self.out / "report.md").write_text(report)
        if cfg.wandb.enabled:
            self._log_wandb(results)
        return {**results, "summary": self.kind.summary(cfg.model.label(), scored, report)}

    def _log_wandb(self, results: dict[str, Any]) -> None:
        import wandb

        run = wandb.init(
            project=self.cfg.wandb.project,
            name=f"{self.kind.name}-{self.cfg.model.label()}",
            config=self.resolved,
            dir=str(self.out),
            tags=list(self.cfg.wandb.tags),
            mode=self.cfg.wandb.mode or ("online" if wandb_has_key() else "offline"),
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
        for future in self._sandboxes.values():
            close_started(future)  # waits for a pool still starting
        self.store.close()
