"""Execution rewards for RL on code edits: one batch of verdicts per step, read by every reward.

A completion's reward is a verdict of the registered benchmark kind its task came from: the
same `kind.execute` that `eval.run` calls, on the same program (`problem.program(fmt.extract(
completion))`), so a model is rewarded exactly as it is later scored. Python problems run split
(the tests in a trusted process, the candidate behind a plain-data boundary; docs/sandbox.md), so
no candidate code decides a pass, except checks it must decide itself (`==` between two of its
objects), which are counted as delegated and can be weighted down.

trl calls each reward function on the same batch one after another; `VerdictRewards` runs the
batch's programs once (in the sandbox pool, in parallel) and every reward reads those verdicts.
A run that fails, times out or cannot run gets reward 0 and is counted; it never fails the step.

Rewards (each weight a key of the `reward` config):
- `pass`: 1 when the verdict passes; a pass resting on delegated checks gets `delegated` instead;
- `tests`: the fraction of the tests' assert statements that held (split runs; other runs: 0 or 1);
- `format`: the completion is a whole program in the prompt format (it extracts to code that
  compiles and is not empty);
- `excess_code`: minus the share of a passing run's statements that never ran, over the whole
  file (program + tests, as CanItEdit's ExcessCode counts them). Not reward-grade: the lines are traced in the candidate's own process (a policy could fake them),
  so use it as a light penalty only.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.formats import PromptFormat
from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from core.sandbox.result import STATUSES
from eval.benchmarks.base import BenchmarkKind, ExecContext, Job
from eval.execute import early_verdict, precheck

log = logging.getLogger(__name__)

REWARDS = ("pass", "tests", "format", "excess_code")
EARLY = ("empty", "syntax_error", "too_large")  # statuses of programs that never ran (eval/execute.py)
JUDGED = ("split", "delegated", "in_process", "command", "none")


@dataclass
class RewardConfig:
    """Weights of the rewards (0 leaves one out) and how much a delegated pass is worth."""

    passed: float = 1.0  # the `pass` reward (a Python keyword cannot be a config key)
    tests: float = 0.0
    format: float = 0.0
    excess_code: float = 0.0  # a penalty weight: not reward-grade (see the module docstring)
    delegated: float = 1.0  # what a pass resting on delegated checks earns, in [0, 1]

    def __post_init__(self) -> None:
        if not 0 <= self.delegated <= 1:
            raise ValueError(f"reward.delegated={self.delegated}: give a value in [0, 1]")
        if min(self.passed, self.tests, self.format, self.excess_code) < 0:
            raise ValueError("reward weights must be >= 0 (excess_code is subtracted by its own reward)")
        if not any(self.weights().values()):
            raise ValueError("every reward weight is 0: give reward.passed (or another) a positive weight")

    def weights(self) -> dict[str, float]:
        """Each reward's weight by its name in the logs."""
        return {
            "pass": self.passed,
            "tests": self.tests,
            "format": self.format,
            "excess_code": self.excess_code,
        }


@dataclass(frozen=True)
class RLTask:
    """One RL prompt: a problem in one of its splits (instructions), and the kind that judges it."""

    task_id: str  # "<problem id>/<split>", the dataset's `task_id` column
    problem: Problem
    split: str
    kind: BenchmarkKind


def vouched(record: dict[str, Any]) -> bool:
    """Whether nothing of the candidate's decided the outcome: no delegated check, and not the
    declared unverified mode (a problem whose own code needs raw memory access)."""
    return not record.get("delegated_checks") and record.get("status") != "passed_unverified"


def pass_reward(record: dict[str, Any], delegated: float) -> float:
    """1 for a pass; `delegated` for a pass that rests on what the candidate's code decided."""
    if not record.get("passed"):
        return 0.0
    return 1.0 if vouched(record) else delegated


def tests_reward(record: dict[str, Any], delegated: float) -> float:
    """The fraction of assert statements that held in a split run; 0 or 1 (as `pass`) otherwise."""
    total = record.get("tests_total")
    if record.get("mode") == "split" and total:
        share = (record.get("tests_passed") or 0) / total
        return share * (1.0 if vouched(record) else delegated)
    return pass_reward(record, delegated)


def excess_penalty(record: dict[str, Any], code: str, tests: str) -> float:
    """Minus the share of a passing run's statements (program + tests) that never ran (0 without a
    measurement)."""
    from eval.excess_code import CoverageError, CoverageReport

    if not record.get("passed") or "coverage" not in record:
        return 0.0
    try:
        report = CoverageReport.from_measured(record["coverage"], len((code + "\n" + tests).splitlines()))
    except CoverageError:
        return 0.0
    return -(100 - report.percent) / 100


def verdict_kind(record: dict[str, Any]) -> str:
    """How a verdict was reached, for the monitor: split, delegated, in_process, command, or none."""
    mode = record.get("mode")
    if mode == "split" and record.get("delegated_checks"):
        return "delegated"
    return mode or "none"  # none: it failed before running (empty, syntax error, too large)


class VerdictRewards:
    """The reward functions trl calls (`functions()`), over one batch of verdicts per step."""

    def __init__(
        self,
        tasks: dict[str, RLTask],
        fmt: PromptFormat,
        sandboxes: Callable[[str | None], Sandbox],
        limits: SandboxLimits,
        config: RewardConfig,
        max_code_bytes: int = 200_000,
    ) -> None:
        self.tasks, self.fmt, self.sandboxes, self.limits = tasks, fmt, sandboxes, limits
        self.config, self.max_code_bytes = config, max_code_bytes
        self._batch: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        self._records: list[dict[str, Any]] = []
        self.codes: list[str] = []
        self.judge_s = 0.0  # how long the last batch took to judge

    # ------------------------------------------------------------------------------ verdicts
    def verdicts(self, task_ids: Sequence[str], completions: Sequence[str]) -> list[dict[str, Any]]:
        """One verdict per completion; the batch trl just asked about is judged once."""
        batch = (tuple(task_ids), tuple(completions))
        if batch != self._batch:
            self.codes = [
                self.tasks[t].problem.program(self.fmt.extract(c)) for t, c in zip(*batch, strict=True)
            ]
            start = time.perf_counter()
            self._records = self._judge(batch[0], self.codes)
            self.judge_s = time.perf_counter() - start
            self._batch = batch
        return self._records

    def _judge(self, task_ids: Sequence[str], codes: Sequence[str]) -> list[dict[str, Any]]:
        """The kinds' verdicts, one `execute` call per (kind, interpreter); what cannot run fails alone."""
        records: list[dict[str, Any] | None] = [None] * len(codes)
        groups: dict[tuple[str, str | None], list[int]] = {}
        for i, (task_id, code) in enumerate(zip(task_ids, codes, strict=True)):
            task = self.tasks[task_id]
            early = precheck(code, task.problem.language, self.max_code_bytes)
            if early is not None:
                records[i] = early_verdict(*early)
                continue
            groups.setdefault((task.kind.name, task.kind.interpreter(task.problem)), []).append(i)
        coverage = self.config.excess_code > 0
        for (_, python), indices in groups.items():
            kind = self.tasks[task_ids[indices[0]]].kind
            ctx = ExecContext(self.sandboxes(python), self.limits, self.max_code_bytes, coverage)
            jobs = [
                Job(
                    (task_ids[i], self.tasks[task_ids[i]].split, i), self.tasks[task_ids[i]].problem, codes[i]
                )
                for i in indices
            ]
            for i, record in zip(indices, self._execute(kind, jobs, ctx), strict=True):
                if not kind.split_verdicts and record.get("mode") is None and record["status"] not in EARLY:
                    record["mode"] = "in_process"  # the kind's own run: its spy is in the program's process
                records[i] = record
        return [r if r is not None else early_verdict("error", "no verdict") for r in records]

    @staticmethod
    def _execute(kind: BenchmarkKind, jobs: list[Job], ctx: ExecContext) -> list[dict[str, Any]]:
        """The batch's verdicts; if the batch call breaks, each job alone, and a job that still
        breaks gets a failing `error` verdict (the step goes on; the monitor counts it)."""
        try:
            return kind.execute(jobs, ctx)
        except Exception as err:  # noqa: BLE001 - a reward must not end a training step
            log.warning("reward: the batch of %d runs failed (%s); running them one by one", len(jobs), err)
        records = []
        for job in jobs:
            try:
                records.extend(kind.execute([job], ctx))
            except Exception as err:  # noqa: BLE001
                records.append(early_verdict("error", f"{type(err).__name__}: {err}"))
        return records

    # ------------------------------------------------------------------------------- rewards
    def rewards(self, name: str, task_ids: Sequence[str], completions: Sequence[str]) -> list[float]:
        """The reward `name` (one of REWARDS, unweighted) of each completion."""
        records = self.verdicts(task_ids, completions)
        delegated = self.config.delegated
        if name == "pass":
            return [pass_reward(r, delegated) for r in records]
        if name == "tests":
            return [tests_reward(r, delegated) for r in records]
        if name == "format":
            return [0.0 if r["status"] in EARLY else 1.0 for r in records]
        if name == "excess_code":
            return [
                excess_penalty(r, code, self.tasks[t].problem.tests)
                for r, code, t in zip(records, self.codes, task_ids, strict=True)
            ]
        raise ValueError(f"unknown reward {name!r}: choose one of {REWARDS}")

    @staticmethod
    def monitor(records: Sequence[dict[str, Any]]) -> dict[str, float]:
        """The batch's share of verdicts per status and per way of judging (`verdicts/<status>`,
        `judged/<how>`), every known one each time, so trl's means over a logging step are shares."""
        n = max(len(records), 1)
        statuses = Counter(r["status"] for r in records)
        judged = Counter(verdict_kind(r) for r in records)
        shares = {
            f"verdicts/{s}": statuses[s] / n
            for s in (*STATUSES, *EARLY, *statuses.keys() - STATUSES.keys() - set(EARLY))
        }
        shares.update({f"judged/{k}": judged[k] / n for k in JUDGED})
        return shares

    def functions(self) -> tuple[list[Callable[..., list[float]]], list[float]]:
        """trl's reward functions and their weights: one per reward with a positive weight. The
        first also logs the monitor's shares for its batch (trl's `log_metric`)."""
        funcs, weights = [], []
        for name, weight in self.config.weights().items():
            if weight > 0:
                funcs.append(self._function(name, first=not funcs))
                weights.append(weight)
        return funcs, weights

    def _function(self, name: str, first: bool) -> Callable[..., list[float]]:
        def reward(
            prompts: list[Any], completions: list[Any], task_id: list[str], **kwargs: Any
        ) -> list[float]:
            texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
            values = self.rewards(name, task_id, texts)
            log_metric = kwargs.get("log_metric")
            if first and log_metric is not None:
                for metric, share in self.monitor(self._records).items():
                    log_metric(metric, share)
                log_metric("rewards_per_second", len(texts) / max(self.judge_s, 1e-9))
            return values

        reward.__name__ = name  # trl logs rewards/<name>/mean
        return reward
