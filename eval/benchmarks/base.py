"""The benchmark contract: what a benchmark kind declares so that `eval.run` can evaluate it.

A kind is a subclass of `BenchmarkKind` in one module (a built-in's in `eval/benchmarks/`, a
plugin's anywhere), registered once in the platform's registry (`core.benchmarks.KINDS`, through
`eval.benchmarks.register` or an entry point). It declares:

- `name` and `options`: its options dataclass (`core.benchmarks.options.BenchmarkOptions` plus its
  own fields); the `benchmark` config group is validated against it, so an option of another kind
  is an unknown key;
- `load(options)`: its problems, each carrying the kind's typed `payload`;
- `check(options)`: machine checks before anything heavy loads (the source exists, toolchains);
- `interpreter(problem)`: which Python runs the problem's programs (None: the sandbox's own);
- `execute(jobs, ctx)`: one verdict record per sample (the runner stores them and resumes);
- `score(ctx)`: its metrics per split and a per-problem table;
- `report(model, scored, ctx)`: report.md, and `summary(...)`: what the console prints.

The runner (`eval/evaluation.py`) never names a kind: it generates, hands the samples without a
verdict to `execute` a chunk at a time (`eval.samples.run_missing`), and writes what `score` and
`report` return.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from core.benchmarks import KINDS
from core.benchmarks.options import BenchmarkOptions
from core.errors import ConfigError
from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.samples import Key, SampleStore

Scored = dict[str, Any]  # {"metrics": {split: {metric: value}}, "per_problem": [row, ...]}


@dataclass(frozen=True)
class Job:
    """One generated sample to judge: its key, its problem and the code that runs."""

    key: Key
    problem: Problem
    code: str


@dataclass(frozen=True)
class ExecContext:
    sandbox: Sandbox  # started for the jobs' interpreter
    limits: SandboxLimits
    max_code_bytes: int  # larger code fails as too_large without running
    coverage: bool = False  # passing split runs also measure ExcessCode's lines (score.coverage=probes)
    coverage_limits: SandboxLimits | None = None  # of the second runs that measure split runs with helpers


@dataclass
class ScoreContext:
    store: SampleStore
    problems: dict[str, Problem]
    splits: list[str]
    ks: list[int]
    out: Path
    sandbox: Callable[[], Sandbox]  # the default sandbox, started on first use
    limits: SandboxLimits  # for runs made while scoring (e.g. coverage)
    excess_code: bool  # measure coverage of passing samples where the kind reports ExcessCode
    probes: bool = True  # score.coverage=probes: split samples' lines from probes (eval/excess_code.py)
    options: BenchmarkOptions | None = None  # the benchmark's options, for definitions chosen by name


class BenchmarkKind(ABC):
    name: ClassVar[str]
    options: ClassVar[type[BenchmarkOptions]]
    # Its programs run as they are (program + tests), so the audit can run and mutate them.
    runs_as_is: ClassVar[bool] = False
    # Its Python verdicts come from split runs where a problem allows (eval/execute.py); False: its
    # `execute` decides in the program's own process, so RL leaves its tasks out by default.
    split_verdicts: ClassVar[bool] = False

    def load(self, options: BenchmarkOptions) -> list[Problem]:
        """The problems: by default the loader registered under the kind's name (a built-in's, in
        `core/benchmarks/`); a kind of its own defines this."""
        if self.name not in KINDS:
            raise ConfigError(f"benchmark kind {self.name!r} is not registered and defines no load(options)")
        return KINDS[self.name].load(options)

    load.reads_the_registry = True  # type: ignore[attr-defined]

    def check(self, options: BenchmarkOptions, key: str = "benchmark") -> None:
        options.check_source(key)

    def interpreter(self, problem: Problem) -> str | None:
        return None

    @abstractmethod
    def execute(self, jobs: list[Job], ctx: ExecContext) -> list[dict[str, Any]]:
        """A verdict per job, in order: at least `status` and `passed` (stored with its key)."""

    @abstractmethod
    def score(self, ctx: ScoreContext) -> Scored:
        """Metrics per split and a per-problem table, from the store's records."""

    @abstractmethod
    def report(self, model: str, scored: Scored, ctx: ScoreContext) -> str:
        """report.md."""

    def summary(self, model: str, scored: Scored, report: str) -> str:
        """What `eval.run` prints when it has scored (report.md holds the rest)."""
        return report
