"""Rewards/s of RL's reward path against a fresh interpreter per completion.

A GRPO step judges a batch of completions (`--batch`, 1,000 by default: e.g. 125 prompts x 8
samples) before the policy can move. This times `VerdictRewards.rewards("pass", ...)`
(train/rl_rewards.py: CanItEdit's kind runs each program split in the sandbox pool, one worker
per core) on batches of real synthetic tasks (`train.synthetic_edits.synthetic_tasks`), a mix of
completions:

- correct: the task's reference edit (passes);
- unchanged: the task's `before` (runs, fails its tests);
- broken: the called function returns None, or raises (runs, fails).

Every completion runs (no syntax errors, which ours would fail without running), so both sides do
the same work. Against it, the way a reward function is often first written: one fresh
subprocess per completion (`python -I FILE`, program + tests in one file, `subprocess.run` with a
timeout, exit code 0 is a pass) on a thread pool of the same size; and the same without `site`
(`python -I -S`), the cheapest start a subprocess gets. Each round runs every contender once on a
new batch (new completions, so no cached verdicts), in a rotating order; medians and (min-max)
spread over `--rounds`, and the ratio of ours to each baseline per round. The sandbox's start and
the first batch (which decides, once per task, that its problem runs split, as RL's task set-up
does) are reported apart. Ours and the baselines must agree on every pass.

    python scripts/bench_rl.py            # 1,000 completions x 5 rounds: a few minutes on 2 cores
    python scripts/bench_rl.py --quick    # 200 completions x 3 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from core.formats import get_format
from core.sandbox import Sandbox, SandboxLimits
from core.sandbox.config import SandboxConfig
from eval.benchmarks import get_kind
from train.rl_rewards import RewardConfig, RLTask, VerdictRewards
from train.synthetic_edits import synthetic_tasks

QUICK = {"batch": 200, "rounds": 3, "tasks": 100}
FULL = {"batch": 1000, "rounds": 5, "tasks": 250}
MIX = {"correct": 0.4, "unchanged": 0.3, "broken": 0.3}
SPLIT = "descriptive"
OURS, SUBPROCESS, NOSITE = (
    "ours: VerdictRewards (split, sandbox pool)",
    "subprocess per completion (python -I)",
    "subprocess per completion (python -I -S)",
)
LABELS = {OURS: "ours", SUBPROCESS: "subprocess", NOSITE: "subprocess -S"}


def load_tasks(n: int, seed: int, folder: Path) -> dict[str, RLTask]:
    """`n` synthetic tasks, written as CanItEdit's schema and loaded by its kind (as RL loads them)."""
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in synthetic_tasks(n, seed)))
    kind = get_kind("canitedit")
    problems = kind.load(kind.options(name="canitedit", path=str(path)))
    return {f"{p.id}/{SPLIT}": RLTask(f"{p.id}/{SPLIT}", p, SPLIT, kind) for p in problems}


def broken(tests: str, rng: random.Random) -> str:
    """A program that runs and fails: the function the tests call answers None or raises."""
    name = re.match(r"assert (\w+)\(", tests)
    assert name, tests
    body = "return None" if rng.random() < 0.5 else "raise ValueError('not done')"
    return f"def {name.group(1)}(*args, **kwargs):\n    {body}\n"


def make_batch(
    tasks: dict[str, RLTask], size: int, rng: random.Random
) -> tuple[list[str], list[str], list[str]]:
    """(task ids, codes, what each is) of one step's completions, tasks drawn with repetition."""
    ids, codes, kinds = [], [], []
    for _ in range(size):
        task_id = rng.choice(list(tasks))
        problem = tasks[task_id].problem
        kind = rng.choices(list(MIX), weights=list(MIX.values()))[0]
        code = {"correct": problem.after, "unchanged": problem.before}.get(kind) or broken(problem.tests, rng)
        # a unique trailing comment: every batch is new to the reward's cache
        ids.append(task_id)
        codes.append(f"{code}\n# sample {rng.getrandbits(48):x}\n")
        kinds.append(kind)
    return ids, codes, kinds


def ours(rewards: VerdictRewards, ids: list[str], completions: list[str]) -> list[bool]:
    return [r == 1.0 for r in rewards.rewards("pass", ids, completions)]


def subprocess_baseline(
    flags: list[str], workers: int, timeout_s: float, folder: Path
) -> Callable[..., list[bool]]:
    """One fresh interpreter per completion: program + tests in a temp file, exit code 0 passes."""

    def run_one(program: str) -> bool:
        with tempfile.NamedTemporaryFile("w", suffix=".py", dir=folder, delete=False) as f:
            f.write(program)
        try:
            proc = subprocess.run(
                [sys.executable, *flags, f.name], capture_output=True, timeout=timeout_s, cwd=folder
            )
            return proc.returncode == 0
        except subprocess.TimeoutExpired:
            return False
        finally:
            os.unlink(f.name)

    def judge(tasks: dict[str, RLTask], ids: list[str], codes: list[str]) -> list[bool]:
        programs = [
            tasks[t].problem.program(code) + "\n" + tasks[t].problem.tests
            for t, code in zip(ids, codes, strict=True)
        ]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(run_one, programs))

    return judge


def spread(values: list[float], unit: str = "") -> str:
    return f"{statistics.median(values):,.1f}{unit} ({min(values):,.1f}-{max(values):,.1f})"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"smoke run: defaults {QUICK}")
    p.add_argument("--batch", type=int, help=f"completions per step (default {FULL['batch']})")
    p.add_argument("--rounds", type=int, help=f"interleaved rounds (default {FULL['rounds']})")
    p.add_argument("--tasks", type=int, help=f"distinct synthetic tasks (default {FULL['tasks']})")
    p.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="sandbox workers and baseline threads"
    )
    p.add_argument("--timeout", type=float, default=10.0, help="per-run wall-clock limit, seconds")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    console = Console()
    rng = random.Random(args.seed)
    fmt = get_format("editcoder")
    limits = SandboxLimits(timeout_s=args.timeout)
    with tempfile.TemporaryDirectory(prefix="bench-rl-") as tmp:
        folder = Path(tmp)
        tasks = load_tasks(args.tasks, args.seed, folder)
        start = time.perf_counter()
        sandbox: Sandbox = SandboxConfig(workers=args.workers).open()
        started_s = time.perf_counter() - start
        try:
            rewards = VerdictRewards(tasks, fmt, lambda python: sandbox, limits, RewardConfig())
            # the first batch decides each task's run mode (RL's set-up does this once, for every task)
            ids = list(tasks)
            start = time.perf_counter()
            first = ours(rewards, ids, [fmt.completion(t.problem.after) for t in tasks.values()])
            warmup_s = time.perf_counter() - start
            if not all(first):
                raise SystemExit(
                    f"{first.count(False)} of {len(first)} reference edits failed under the sandbox"
                )
            contenders: dict[str, Callable[[dict[str, RLTask], list[str], list[str]], list[bool]]] = {
                OURS: lambda _, i, c: ours(rewards, i, [fmt.completion(code) for code in c]),
                SUBPROCESS: subprocess_baseline(["-I"], args.workers, args.timeout, folder),
                NOSITE: subprocess_baseline(["-I", "-S"], args.workers, args.timeout, folder),
            }
            names = list(contenders)
            rates: dict[str, list[float]] = {name: [] for name in names}
            disagree = 0
            passed: list[int] = []
            for round_ in range(args.rounds):
                ids, codes, kinds = make_batch(tasks, args.batch, rng)
                outcomes = {}
                for name in names[round_ % len(names) :] + names[: round_ % len(names)]:  # rotate the order
                    start = time.perf_counter()
                    outcomes[name] = contenders[name](tasks, ids, codes)
                    rates[name].append(args.batch / (time.perf_counter() - start))
                expected = [k == "correct" for k in kinds]
                disagree += sum(outcomes[name] != expected for name in names)
                passed.append(sum(expected))
                rates_now = ", ".join(f"{LABELS[name]} {rates[name][-1]:,.0f}/s" for name in names)
                print(f"round {round_ + 1}/{args.rounds}: {rates_now}", flush=True)
        finally:
            sandbox.close()
    base = OURS
    table = Table(
        title=f"Rewards/s, {args.batch} completions per batch ({statistics.median(passed):.0f} correct), "
        f"{args.workers} workers; median (min-max) of {args.rounds} interleaved rounds"
    )
    for column in ("contender", "rewards/s", "ours / this (per round)"):
        table.add_column(column)
    ratios = {}
    for name in names:
        ratios[name] = [a / b for a, b in zip(rates[base], rates[name], strict=True)]
        table.add_row(name, spread(rates[name]), "" if name == base else spread(ratios[name], "x"))
    console.print(table)
    console.print(
        f"sandbox start {started_s:.2f} s; first batch ({len(tasks)} references, deciding run modes) "
        f"{warmup_s:.2f} s; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    if disagree:
        console.print(
            f"[red]{disagree} batches where a contender's passes differ from the correct completions"
        )
    fields = {
        "batch": args.batch,
        "rounds": args.rounds,
        "workers": args.workers,
        "ours_per_s": f"{statistics.median(rates[base]):.1f}",
        "subprocess_per_s": f"{statistics.median(rates[SUBPROCESS]):.1f}",
        "subprocess_nosite_per_s": f"{statistics.median(rates[NOSITE]):.1f}",
        "ratio": f"{statistics.median(ratios[SUBPROCESS]):.2f}",
        "ratio_nosite": f"{statistics.median(ratios[NOSITE]):.2f}",
        "disagreements": disagree,
    }
    print("RESULT " + " ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
