"""RL tasks: problems with tests in the edit contract (before, instruction, tests), from any registered
benchmark kind's files, decontaminated against the evaluation benchmarks, with a manifest.

Each source is a benchmark's options (`{name: canitedit, path: tasks.jsonl}`, a novel-API task
folder, API-update problems), loaded by the kind's own loader, so a task is judged by the kind
evaluation uses. One task per (problem, split). Dropped, each counted with its reason:
- `not_runnable`: the problem cannot run on this machine (a missing toolchain);
- `in_process`: a Python problem that cannot run split (its tests reach into the program), or any
  problem of a kind whose verdicts are decided in the program's process (the API-update and
  novel-API kinds' spies: `split_verdicts` false), so the candidate's own process would decide its
  verdict; `tasks.include_in_process=true` keeps them (with a warning);
- `contaminated_code` / `contaminated_instruction`: the task's code or instruction copies an
  evaluation benchmark (data_pipeline's decontamination, the same index and threshold).
`synthetic: N` adds N generated tasks of the tiny recipes' toy family (train/synthetic_edits.py).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.benchmarks import options_from
from core.errors import ConfigError
from core.formats import PromptFormat
from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from data_pipeline.config import DecontamOptions, DedupOptions
from train.rl_rewards import RLTask

log = logging.getLogger(__name__)


@dataclass
class TasksConfig:
    # Each a benchmark's options: {name: canitedit, path: FILE.jsonl}, {name: novelapi, path: DIR}, ...
    sources: list[Any] = field(default_factory=list)
    synthetic: int = 0  # generated toy tasks (written to OUTPUT_DIR/tasks/synthetic.jsonl)
    seed: int = 0  # of the synthetic tasks
    splits: list[str] | None = None  # instructions to use (None: every split of each problem)
    include_in_process: bool = False
    decontaminate: DecontamOptions = field(default_factory=DecontamOptions)

    def validate(self) -> None:
        if not self.sources and self.synthetic < 1:
            raise ConfigError("tasks: give tasks.sources (benchmark files) or tasks.synthetic=N")


@dataclass
class TaskSet:
    tasks: dict[str, RLTask]
    manifest: dict[str, Any]


def load_sources(config: TasksConfig, out: Path) -> list[tuple[str, list[Problem], Any]]:
    """(label, problems, kind) per source; the synthetic tasks are written as CanItEdit's schema."""
    from eval.benchmarks import get_kind
    from train.synthetic_edits import synthetic_tasks

    sources = list(config.sources)
    if config.synthetic:
        path = out / "tasks" / "synthetic.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = synthetic_tasks(config.synthetic, config.seed)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        sources.append({"name": "canitedit", "path": str(path)})
    loaded = []
    for i, source in enumerate(sources):
        options = options_from(source, f"tasks.sources[{i}]")
        kind = get_kind(options.name, f"tasks.sources[{i}].name")
        kind.check(options, f"tasks.sources[{i}]")
        label = options.name if options.path is None else f"{options.name}:{options.path}"
        loaded.append((label, kind.load(options), kind))
    return loaded


def build_tasks(
    config: TasksConfig, out: Path, sandbox: Sandbox, limits: SandboxLimits, dedup: DedupOptions | None = None
) -> TaskSet:
    """The tasks to train on and a manifest of what was kept and dropped, and why."""
    from eval.split_mode import run_modes

    dropped: Counter[str] = Counter()
    by_benchmark: Counter[str] = Counter()
    per_source: dict[str, dict[str, int]] = {}
    candidates: list[RLTask] = []
    owners: dict[str, str] = {}  # problem id -> its source: a batch's runs are keyed by problem id
    total = 0  # every (problem, chosen split): kept or dropped with a reason
    for label, problems, kind in load_sources(config, out):
        for problem in problems:
            if owners.setdefault(problem.id, label) != label:
                raise ConfigError(
                    f"tasks: {owners[problem.id]} and {label} both hold problem {problem.id!r}; "
                    "give each source its own ids"
                )
        if kind.split_verdicts:
            python = [
                p
                for p in problems
                if not p.not_runnable and p.language == "python" and kind.interpreter(p) is None
            ]
            modes = run_modes(sandbox, python, limits) if python else {}
            in_process = {pid for pid, mode in modes.items() if not mode.split}
        else:  # the kind's own execute decides in the program's process (a spy): every problem of it
            in_process = {p.id for p in problems if not p.not_runnable}
        if in_process and config.include_in_process:
            log.warning(
                "tasks: %d problems of %s run in process (the candidate's process decides their verdicts); "
                "kept because tasks.include_in_process=true",
                len(in_process),
                label,
            )
        made = 0
        for problem in problems:
            splits = [s for s in problem.splits if config.splits is None or s in config.splits]
            total += len(splits)
            if problem.not_runnable:
                dropped["not_runnable"] += len(splits)
            elif problem.id in in_process and not config.include_in_process:
                dropped["in_process"] += len(splits)
            else:
                candidates += [RLTask(f"{problem.id}/{split}", problem, split, kind) for split in splits]
                made += len(splits)
        per_source[label] = {"problems": len(problems), "tasks": made}
    kept = _decontaminate(candidates, config.decontaminate, dedup or DedupOptions(), dropped, by_benchmark)
    tasks = {task.task_id: task for task in kept}
    if not tasks:
        raise ConfigError(f"tasks: no task left to train on (dropped: {dict(dropped)})")
    manifest = {
        "sources": per_source,
        "candidates": total,
        "kept": len(tasks),
        "dropped": {reason: n for reason, n in sorted(dropped.items()) if n},
        "contaminated_by_benchmark": dict(sorted(by_benchmark.items())),
    }
    return TaskSet(tasks, manifest)


def _decontaminate(
    tasks: list[RLTask],
    opts: DecontamOptions,
    dedup: DedupOptions,
    dropped: Counter[str],
    by_benchmark: Counter[str],
) -> list[RLTask]:
    """The tasks whose code and instruction copy no evaluation benchmark (counted per reason)."""
    if not opts.enabled or not tasks:
        return tasks
    from data_pipeline.decontam import BenchmarkIndex, decontam_batch, load_benchmarks, usable_sources

    sources, _ = usable_sources(opts, "tasks.decontaminate.benchmarks")
    index = BenchmarkIndex(load_benchmarks(sources), opts, dedup)
    batch = {
        "before": [t.problem.before for t in tasks],
        "after": [t.problem.after for t in tasks],
        "instruction": [t.problem.instructions[t.split] for t in tasks],
    }
    marked = decontam_batch(batch, index, [c for c in opts.columns if c in batch])
    kept = []
    for task, reason, bench in zip(tasks, marked["drop_reason"], marked["benchmark"], strict=True):
        if reason:
            dropped[reason] += 1
            by_benchmark[bench] += 1
        else:
            kept.append(task)
    return kept


def task_prompt(task: RLTask, fmt: PromptFormat, tokenizer: Any = None) -> str:
    """The prompt evaluation would show for the task (`eval.generate.build_requests`: the problem's
    shown code, its split's instruction, a chat format rendered with `tokenizer`)."""
    from eval.generate import build_requests

    return build_requests([task.problem], [task.split], fmt, tokenizer)[0].prompt
