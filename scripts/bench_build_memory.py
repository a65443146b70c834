"""Peak memory and wall time of the build CLI on a large synthetic edit corpus.

Generates ``--rows`` short edit rows (a few hundred bytes each: a small Python module before
and after one edit, with a commit-style imperative instruction; about ``--dup-fraction`` of
rows are near-duplicates of a recent row with one constant changed), streamed to a jsonl
file so the generator holds no corpus in memory. Then runs

    python -m data_pipeline.build source=files 'source.paths=[rows.jsonl]' pipeline=editpackft
        pipeline.decontaminate.enabled=false stats=false plots=false out=...

as a subprocess, samples the RSS of its whole process tree (psutil when installed, else
/proc) every ``--interval`` seconds, and prints the peak RSS (sum over the tree and the
largest single process), the wall time, rows/s and the manifest's per-stage timings with
the peak RSS seen while each stage ran (stage ends come from the CLI's "stage NAME:" log).
The sum over the tree counts a page shared by several processes once for each of them.

    python scripts/bench_build_memory.py                     # 1M rows
    python scripts/bench_build_memory.py --rows 100000 --keep
    python scripts/bench_build_memory.py --override executor.num_proc=2 --decontaminate
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

from rich.console import Console
from rich.table import Table

WORDS = [
    "user",
    "item",
    "order",
    "price",
    "count",
    "total",
    "name",
    "path",
    "line",
    "value",
    "score",
    "event",
    "queue",
    "cache",
    "token",
    "record",
    "entry",
    "batch",
    "chunk",
    "frame",
    "point",
    "node",
    "edge",
    "graph",
    "file",
    "block",
    "page",
    "row",
    "column",
    "field",
    "key",
    "limit",
    "offset",
    "index",
    "size",
    "weight",
    "rate",
    "delay",
    "retry",
    "timeout",
    "buffer",
    "config",
    "option",
]
BODIES = (
    "    total = {c}\n    for {x} in {p}:\n        total += {x} * {k}\n    return total\n",
    "    if len({p}) > {k}:\n        {p} = {p}[:{k}]\n    return max({p}) - min({p}) + {c}\n",
    "    {x} = [{y} for {y} in {p} if {y} > {k}]\n    return len({x}) + {c}\n",
    "    result = {{}}\n    for {x} in {p}:\n        result[{x}] = result.get({x}, {c}) + {k}\n    return result\n",
    "    with open({p}) as fh:\n        {x} = fh.read().splitlines()\n    return {x}[{c}:{k}]\n",
    "    {x} = str({p}).strip().split()\n    return [{y}.lower() for {y} in {x} if {y}][{c}:{k}]\n",
)
IMPORTS = ("import os\n", "import json\n", "from pathlib import Path\n", "import logging\n", "")
EDITS = ("rename", "docstring", "constant", "guard", "default")


def ident(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}_{rng.choice(WORDS)}"


def draw(rng: random.Random) -> dict:
    """The random choices a row is made of; a near-duplicate reuses them with one changed."""
    return {
        "fn": f"{rng.choice(('get', 'load', 'count', 'merge', 'parse', 'build'))}_{ident(rng)}",
        "p": ident(rng),
        "x": ident(rng),
        "y": rng.choice(WORDS),
        "c": rng.randrange(100),
        "k": rng.randrange(2, 1000),
        "body": rng.randrange(len(BODIES)),
        "import": rng.randrange(len(IMPORTS)),
        "edit": rng.choice(EDITS),
        "new": ident(rng),
    }


def module(d: dict, fn: str, k: int, head: str = "", guard: bool = False, default: bool = False) -> str:
    params = f"{d['p']}, {d['x']}_limit={k}" if default else d["p"]
    guard_lines = f"    if not {d['p']}:\n        return None\n" if guard else ""
    body = BODIES[d["body"]].format(p=d["p"], x=d["x"], y=d["y"], c=d["c"], k=k)
    return f"{IMPORTS[d['import']]}\n\ndef {fn}({params}):\n{head}{guard_lines}{body}"


def edit(d: dict) -> tuple[str, str, str]:
    """(before, after, instruction) of one edit of the module ``d`` describes."""
    before = module(d, d["fn"], d["k"])
    kind = d["edit"]
    if kind == "rename":
        return before, module(d, f"{d['fn']}_{d['new']}", d["k"]), f"Rename {d['fn']} to {d['fn']}_{d['new']}"
    if kind == "docstring":
        doc = f'    """Return the {d["x"].replace("_", " ")} of {d["p"]}."""\n'
        return before, module(d, d["fn"], d["k"], head=doc), f"Add a docstring to {d['fn']}"
    if kind == "constant":
        return before, module(d, d["fn"], d["k"] + 1), f"Increase the {d['x']} limit in {d['fn']} by one"
    if kind == "guard":
        return before, module(d, d["fn"], d["k"], guard=True), f"Guard {d['fn']} against empty {d['p']}"
    return before, module(d, d["fn"], d["k"], default=True), f"Add a {d['x']}_limit parameter to {d['fn']}"


def generate(path: Path, rows: int, seed: int, dup_fraction: float, window: int = 1000) -> int:
    """Write ``rows`` jsonl rows; returns how many are near-duplicates of one of the last ``window`` rows."""
    rng, recent, dups = random.Random(seed), deque(maxlen=window), 0
    with path.open("w") as fh:
        for i in range(rows):
            if recent and rng.random() < dup_fraction:
                d = {**recent[rng.randrange(len(recent))], "c": rng.randrange(100)}
                dups += 1
            else:
                d = draw(rng)
                recent.append(d)
            before, after, instruction = edit(d)
            fh.write(
                json.dumps({"id": f"gen-{i}", "before": before, "after": after, "instruction": instruction})
            )
            fh.write("\n")
    return dups


# ---- process-tree RSS ----


def tree_rss_psutil(pid: int) -> tuple[int, int]:
    """(sum, largest) RSS in bytes of ``pid`` and its descendants."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0
    sizes = []
    for p in procs:
        try:
            sizes.append(p.memory_info().rss)
        except psutil.NoSuchProcess:
            continue
    return sum(sizes), max(sizes, default=0)


def tree_rss_proc(pid: int) -> tuple[int, int]:
    """The same from /proc, where psutil is not installed."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    sizes, todo = [], [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            sizes.append(int(Path(f"/proc/{p}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
        except OSError:
            continue
    return sum(sizes), max(sizes, default=0)


def rss_sampler():
    try:
        import psutil  # noqa: F401

        return tree_rss_psutil
    except ImportError:
        return tree_rss_proc


# ---- the run ----


def cli_argv(data: Path, out: Path, args: argparse.Namespace) -> list[str]:
    return [
        sys.executable,
        "-m",
        "data_pipeline.build",
        "source=files",
        f"source.paths=[{data}]",
        f"pipeline={args.pipeline}",
        f"pipeline.decontaminate.enabled={str(args.decontaminate).lower()}",
        f"stats={str(args.stats).lower()}",
        f"plots={str(args.plots).lower()}",
        f"out={out}",
        *args.override,
    ]


def run_sampled(argv: list[str], interval: float) -> dict:
    """Run ``argv``, sampling its tree's RSS; returns wall, samples and timed 'stage NAME:' log lines."""
    sample = rss_sampler()
    log: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    reader = threading.Thread(target=lambda: log.extend((time.perf_counter() - t0, ln) for ln in proc.stdout))
    reader.start()
    samples = []
    while proc.poll() is None:
        samples.append((time.perf_counter() - t0, *sample(proc.pid)))
        time.sleep(interval)
    wall = time.perf_counter() - t0
    reader.join()
    if proc.returncode:
        sys.exit("build failed:\n" + "".join(line for _, line in log[-40:]))
    return {"wall": wall, "samples": samples, "log": log}


OUTPUT = "sort + write output"


def stage_peaks(samples: list[tuple[float, int, int]], log: list[tuple[float, str]]) -> dict[str, float]:
    """Peak tree RSS (MB) between the end of the previous stage and the end of each stage, then to exit."""
    ends = [(t, m.group(1)) for t, line in log if (m := re.search(r"stage (\w+):", line))]
    peaks, start = {}, 0.0
    for end, name in [*ends, (float("inf"), OUTPUT)]:
        peaks[name] = max((s for when, s, _ in samples if start < when <= end), default=0) / 2**20
        start = end
    return peaks


def stage_table(manifest: dict, peaks: dict[str, float]) -> Table:
    t = Table(title="Stages (manifest)")
    for col in ("stage", "in", "kept", "seconds", "rows in/s", "peak tree RSS MB"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    for s in manifest["stages"]:
        rate = s["input"] / s["seconds"] if s["seconds"] else float("nan")
        peak = f"{peaks[s['name']]:.0f}" if s["name"] in peaks else "-"
        t.add_row(s["name"], f"{s['input']:,}", f"{s['kept']:,}", f"{s['seconds']:.2f}", f"{rate:,.0f}", peak)
    rest = manifest["timings"]["total_seconds"] - sum(s["seconds"] for s in manifest["stages"])
    t.add_row(OUTPUT, f"{manifest['kept']:,}", "", f"{rest:.2f}", "", f"{peaks[OUTPUT]:.0f}")
    return t


def summary_table(fields: dict) -> Table:
    t = Table(title=f"Build of {fields['rows']:,} synthetic rows")
    t.add_column("figure")
    t.add_column("value", justify="right")
    for label, key in (
        ("input jsonl MB", "input_mb"),
        ("near-duplicates planted", "planted"),
        ("generate seconds", "generate_s"),
        ("build wall seconds (interpreter start to exit)", "wall_s"),
        ("manifest total_seconds", "total_s"),
        ("rows/s, wall", "rows_per_s"),
        ("rows kept", "kept"),
        ("peak RSS MB, sum over process tree", "peak_rss_mb"),
        ("peak RSS MB, largest process", "peak_largest_mb"),
        ("RSS samples", "samples"),
    ):
        t.add_row(label, f"{fields[key]}")
    return t


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dup-fraction", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pipeline", default="editpackft")
    p.add_argument("--decontaminate", action="store_true", help="keep the decontamination stage on")
    p.add_argument("--stats", action="store_true", help="write statistics (off by default)")
    p.add_argument("--plots", action="store_true", help="write plots (needs --stats)")
    p.add_argument("--override", action="append", default=[], help="extra build CLI override, repeatable")
    p.add_argument("--interval", type=float, default=0.2, help="RSS sampling period, seconds")
    p.add_argument("--workdir", type=Path, help="where the jsonl and the output go (default: a temp folder)")
    p.add_argument("--keep", action="store_true", help="keep the jsonl and the built output")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-build-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    data, out = work / "rows.jsonl", work / "out"
    try:
        t0 = time.perf_counter()
        planted = generate(data, args.rows, args.seed, args.dup_fraction)
        generate_s = time.perf_counter() - t0
        run = run_sampled(cli_argv(data, out, args), args.interval)
        manifest = json.loads((out / "manifest.json").read_text())
        input_mb = data.stat().st_size / 2**20
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    fields = {
        "rows": args.rows,
        "input_mb": f"{input_mb:.1f}",
        "planted": planted,
        "generate_s": f"{generate_s:.1f}",
        "wall_s": f"{run['wall']:.1f}",
        "total_s": f"{manifest['timings']['total_seconds']:.1f}",
        "rows_per_s": f"{args.rows / run['wall']:.0f}",
        "kept": manifest["kept"],
        "peak_rss_mb": f"{max((s for _, s, _ in run['samples']), default=0) / 2**20:.0f}",
        "peak_largest_mb": f"{max((m for _, _, m in run['samples']), default=0) / 2**20:.0f}",
        "samples": len(run["samples"]),
    }
    console = Console(width=160)
    console.print(summary_table(fields))
    console.print(stage_table(manifest, stage_peaks(run["samples"], run["log"])))
    if args.keep:
        console.print(f"kept: {data} and {out}")
    stages = {f"{s['name']}_s": f"{s['seconds']:.2f}" for s in manifest["stages"]}
    print("RESULT " + " ".join(f"{k}={v}" for k, v in {**fields, **stages}.items()))


if __name__ == "__main__":
    main()
