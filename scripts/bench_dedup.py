"""Near-dedup on real code: our MinHash + LSH against datasketch and rensa, and the build CLI.

The corpus is built at run time from the Python files installed here (the standard library
and site-packages, 500 B to 50 KB, UTF-8, exact copies dropped), in an order fixed by
``--seed``. A ``--dup-fraction`` of rows are planted near-duplicates: a copy of an earlier
row's file with 1 to ``--max-edits`` lines replaced, inserted or deleted (lines taken from
other files). Each row is shaped like a commit: ``before`` is the file and ``after`` the
same file with one line edited, so the dedup text (``before + "\\n" + after``) is what
real edit data gives, two near-identical copies of a file. Every prefix of the corpus is a
corpus of its own (a plant's source is always earlier), so all sizes share it.

What is measured, each method in a fresh process of this script (``--worker``) reading the
same rows, interleaved round-robin over ``--reps`` repetitions, timed from the list of
texts to the set of kept rows (signatures, LSH, clusters keeping the lowest id) after a
warm-up on 8 texts and two copies (imports, numba cache load, the exact check's kernels):

- ours: ``minhash_signatures`` (batches of ``--batch``) + ``find_duplicates`` with the
  pipeline's default ``MinHashConfig(exact_check=True)``, and with ``exact_check=False``;
- datasketch, bulk: ``MinHash.bulk`` + ``MinHashLSH`` insert and query, then union-find;
- datasketch, per token: ``MinHash.update`` once per shingle, on the first
  ``--per-token-docs`` rows only, its docs/s taken as the rate at the full size;
- rensa: ``RMinHash.from_token_sets`` + ``RMinHashLSH`` insert and query, then union-find.

Baselines get our shingles (``core.shingles.shingles``, each window joined with spaces)
and the cheapest hashing they accept (xxh64 of the shingle string for datasketch, rensa's
own string hash), and the LSH bands ours uses without the exact check (for rensa,
``num_perm`` = bands x rows, as it needs num_perm divisible by bands). Workers run with one
thread (``RAYON_NUM_THREADS=1``): CPU/wall above 1 would show extra threads, below 1 a busy
machine.

Also reported: precision and recall of each method's duplicate pairs and removed rows
against exact Jaccard of the shingle sets (64-bit shingle hashes) over *all* pairs of the
``--docs`` corpus (sparse product, in blocks), and recall on the planted pairs. Pair counts
are dominated by the few large clusters of near-identical files (vendored copies, generated
modules); removed rows weigh every row once. Ours with the exact check merges its LSH
candidates whose exact Jaccard clears the threshold, so its pairs are those candidates
filtered by the same exact Jaccard. Peak RSS is each worker's own (VmHWM; see `maxrss_mb`).
Our throughput is measured at each of ``--sizes`` (and ``--scale-methods``), and the build
CLI (``python -m data_pipeline.build``, local executor, one process; a run in the same
round-robin) on the rows of the largest size, where per-row costs outweigh the process's
fixed ones (imports, loading the compiled kernels): its dedup stage
(``manifest.timings.dedup``) and end-to-end wall against the library's time on those rows. A failing CLI is reported in its table, not fatal.

    python scripts/bench_dedup.py            # about 8 minutes on 2 cores
    python scripts/bench_dedup.py --quick    # about a minute
    python scripts/bench_dedup.py --docs 10000 --sizes 5000,20000 --scale-methods ours,rensa
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from dedup_corpus import build_corpus, exact_pairs, pair_jaccard, read_rows, write_jsonl
from dedup_methods import LIBRARY, PIPELINE_CFG, keep_lowest, run_method
from rich.console import Console
from rich.table import Table

from core.neardup.minhash import minhash_signatures
from core.neardup.pairs import candidate_pairs
from data_pipeline.dedup_text import dedup_texts

FULL = {"docs": 5000, "sizes": "5000,10000,20000", "reps": 3, "per_token_docs": 200}
QUICK = {"docs": 800, "sizes": "800,1600", "reps": 1, "per_token_docs": 40}
BASELINES = ("datasketch_bulk", "datasketch_token", "rensa")
TARGETS = {"vs_rensa": 6.0, "cli_dedup_over_library": 1.1, "scaling": 0.9}
SINGLE_THREAD = {"RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


# ---- workers: one fresh process per measurement ----


def maxrss_mb() -> float:
    """Peak RSS of this process's own address space (VmHWM).

    ``ru_maxrss`` would do on its own but for one thing: Linux carries the spawning parent's
    peak across fork and exec into the child's ``ru_maxrss``, and the parent here holds the
    whole corpus. VmHWM starts afresh at exec; ``ru_maxrss`` is the fallback off Linux.
    """
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024


def edit_texts(rows: list[dict]) -> list[str]:
    """The texts the build deduplicates these rows on (`DedupOptions.text="edit"`)."""
    return dedup_texts({k: [r[k] for r in rows] for k in ("before", "after")}, "edit")


def library_worker(method: str, corpus: Path, n: int, batch: int) -> dict:
    """Time one method on the first ``n`` rows; pairs of ours are listed after the clock stops."""
    texts = edit_texts(read_rows(corpus, n))
    run_method(
        method, texts[:8] + texts[:2], batch
    )  # imports, numba cache load; a duplicate pair: every kernel
    loaded = maxrss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    keep, pairs = run_method(method, texts, batch)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = maxrss_mb()
    if pairs is None:  # what find_duplicates merges: LSH candidates (exact-checked later)
        cfg = LIBRARY[method]
        pairs = candidate_pairs(minhash_signatures(texts, cfg), cfg)
    return {
        "docs": n,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "removed": np.flatnonzero(~keep).tolist(),
        "pairs": pairs.tolist(),
        "rss_peak_mb": peak,
        "rss_loaded_mb": loaded,
    }


def cli_argv(corpus: Path, out: Path, overrides: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "data_pipeline.build",
        "source=files",
        f"source.paths=[{corpus}]",
        "pipeline=editpackft",
        "pipeline.filters=[]",
        "pipeline.decontaminate.enabled=false",
        "stats=false",
        "plots=false",
        f"out={out}",
        *overrides,
    ]


def cli_worker(corpus: Path, overrides: list[str]) -> dict:
    """Wall and manifest timings of the build CLI on ``corpus``, in a fresh output folder."""
    with tempfile.TemporaryDirectory(prefix="bench-dedup-cli-") as out:
        t0 = time.perf_counter()
        proc = subprocess.run(cli_argv(corpus, Path(out), overrides), capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode:  # reported, not fatal: the other sections still stand
            return {"error": (proc.stderr.strip().splitlines() or ["no stderr"])[-1][:300]}
        manifest = json.loads((Path(out) / "manifest.json").read_text())
    dedup = next(s for s in manifest["stages"] if s["name"] == "dedup")
    return {
        "docs": manifest["input"],
        "seconds": manifest["timings"]["dedup"],
        "wall_seconds": wall,
        "total_seconds": manifest["timings"]["total_seconds"],
        "source_seconds": manifest["timings"]["source"],
        "removed_count": dedup["input"] - dedup["kept"],
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def spawn(method: str, corpus: Path, n: int, args: argparse.Namespace) -> dict:
    """Run one measurement in a fresh interpreter, one thread, and return its JSON report."""
    argv = [sys.executable, __file__, "--worker", method, "--corpus", str(corpus), "--docs", str(n)]
    argv += ["--batch", str(args.batch), *(f"--cli-override={o}" for o in args.cli_override)]
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **SINGLE_THREAD})
    if proc.returncode:
        sys.exit(f"worker {method} (n={n}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def worker_main(args: argparse.Namespace) -> None:
    if args.worker == "cli":
        report = cli_worker(args.corpus, args.cli_override)
    else:
        report = library_worker(args.worker, args.corpus, args.docs, args.batch)
    print(json.dumps(report))


# ---- measurement plan ----


def interleaved(
    plan: list[tuple[str, int]], shared: Path, cli: Path, args
) -> dict[tuple[str, int], list[dict]]:
    """Each (method, rows) once per repetition, the order rotated every repetition.

    Library workers read the first rows of ``shared``; the CLI reads all of ``cli``.
    """
    runs: dict[tuple[str, int], list[dict]] = {key: [] for key in plan}
    for rep in range(args.reps):
        shift = rep % len(plan)
        for method, n in plan[shift:] + plan[:shift]:
            runs[method, n].append(spawn(method, cli if method == "cli" else shared, n, args))
    return runs


def rates(reports: list[dict]) -> list[float]:
    return [r["docs"] / r["seconds"] for r in reports]


def spread(values: list[float], fmt: str = "{:.0f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


# ---- quality ----


def method_pairs(method: str, report: dict, truth: dict) -> set[tuple[int, int]]:
    """The pairs a method merges; ours with the exact check merges only candidates with J >= threshold."""
    pairs = {tuple(p) for p in report["pairs"]}
    if method in LIBRARY and LIBRARY[method].exact_check:
        pairs = {p for p in pairs if p in truth}
    return pairs


def true_removed(n: int, truth: dict) -> set[int]:
    pairs = np.asarray([p for p in truth if p[1] < n], dtype=np.int64).reshape(-1, 2)
    return set(np.flatnonzero(~keep_lowest(n, pairs)).tolist())


def quality(method: str, report: dict, truth: dict, plants: dict[int, int]) -> dict:
    """Pair and removed-row precision/recall against exact Jaccard over all pairs of the rows it ran on."""
    n = report["docs"]
    truth_n = {p for p in truth if p[1] < n}
    found = method_pairs(method, report, truth)
    removed, should = set(report["removed"]), true_removed(n, truth)
    planted = {(s, p) for p, s in plants.items() if p < n and (s, p) in truth}
    return {
        "space": f"all {n * (n - 1) // 2:,} pairs of {n} rows",
        "pairs": len(found),
        "true_pairs": len(truth_n),
        "precision": len(found & truth_n) / max(len(found), 1),
        "recall": len(found & truth_n) / max(len(truth_n), 1),
        "planted_recall": len(found & planted) / max(len(planted), 1),
        "removed": len(removed),
        "removed_precision": len(removed & should) / max(len(removed), 1),
        "removed_recall": len(removed & should) / max(len(should), 1),
    }


# ---- tables ----


def corpus_table(c: Corpus) -> Table:
    sizes_kb = [len(t) / 1e3 for t in edit_texts(c.rows[: c.n])]
    threshold = PIPELINE_CFG.threshold
    t = Table(title=f"Corpus: installed Python files; the first {c.n} rows for speed and quality")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_row(".py files of 500 B-50 KB installed", f"{c.files_found}")
    t.add_row("rows built (largest size)", f"{len(c.rows)}")
    t.add_row("dedup text KB: mean / median", f"{np.mean(sizes_kb):.1f} / {np.median(sizes_kb):.1f}")
    t.add_row("planted near-duplicates", f"{len(c.plant_jaccard)} ({len(c.plant_jaccard) / c.n:.0%})")
    if c.plant_jaccard:
        q = np.quantile(c.plant_jaccard, [0, 0.25, 0.5, 0.75, 1])
        t.add_row("Jaccard plant-source: min / q1 / median / q3 / max", " / ".join(f"{v:.2f}" for v in q))
        t.add_row(f"plants at J >= {threshold}", f"{sum(j >= threshold for j in c.plant_jaccard)}")
    planted = {(s, p) for p, s in c.plants.items() if p < c.n}
    t.add_row(
        f"pairs at exact J >= {threshold}: planted / found in the installed files",
        f"{len(planted & set(c.truth))} / {len(set(c.truth) - planted)}",
    )
    return t


def speed_table(runs: dict, n: int, args) -> Table:
    t = Table(
        title=f"End to end, texts -> kept rows, one process, {n} rows, {args.reps} interleaved reps: median (min-max)"
    )
    for col in (
        "method",
        "rows timed",
        "docs/s",
        "seconds",
        "CPU/wall",
        "ours / method",
        "peak RSS MB (+ over loaded)",
    ):
        t.add_column(col, justify="left" if col == "method" else "right")
    base = statistics.median(rates(runs["ours", n]))
    for method in (*LIBRARY, *BASELINES):
        reports = runs[method, n]
        r = rates(reports)
        label = LABELS[method]
        if method == "datasketch_token":
            label += f" (first {reports[0]['docs']} rows, rate taken for {n})"
        cpu = statistics.median(x["cpu_seconds"] / x["seconds"] for x in reports)
        peak = statistics.median(x["rss_peak_mb"] for x in reports)
        grown = statistics.median(x["rss_peak_mb"] - x["rss_loaded_mb"] for x in reports)
        t.add_row(
            label,
            f"{reports[0]['docs']}",
            spread(r),
            spread([x["seconds"] for x in reports], "{:.2f}"),
            f"{cpu:.2f}",
            f"{base / statistics.median(r):.1f}x",
            f"{peak:.0f} (+{grown:.0f})",
        )
    return t


LABELS = {
    "ours": "ours, exact check (pipeline default)",
    "ours_lsh": "ours, LSH only",
    "datasketch_bulk": "datasketch MinHash.bulk + MinHashLSH",
    "datasketch_token": "datasketch MinHash.update per shingle + MinHashLSH",
    "rensa": "rensa RMinHash + RMinHashLSH",
}


def quality_table(q: dict) -> Table:
    first = next(iter(q.values()))
    t = Table(
        title=f"Quality against exact Jaccard >= {PIPELINE_CFG.threshold} of shingle sets ({first['space']})"
    )
    for col in (
        "method",
        "pairs merged",
        "pair precision",
        "pair recall",
        "planted recall",
        "rows removed",
        "removed precision",
        "removed recall",
    ):
        t.add_column(col, justify="left" if col == "method" else "right")
    for method, x in q.items():
        t.add_row(
            LABELS[method] + ("" if x["space"] == first["space"] else f" ({x['space']})"),
            f"{x['pairs']} (true {x['true_pairs']})",
            f"{x['precision']:.3f}",
            f"{x['recall']:.3f}",
            f"{x['planted_recall']:.3f}",
            f"{x['removed']}",
            f"{x['removed_precision']:.3f}",
            f"{x['removed_recall']:.3f}",
        )
    return t


def scaling_table(runs: dict, sizes: list[int], methods: list[str]) -> Table:
    t = Table(title="Throughput by corpus size, one process: docs/s median (min-max)")
    t.add_column("rows", justify="right")
    for m in methods:
        t.add_column(LABELS[m], justify="right")
        t.add_column("vs smallest", justify="right")
    for n in sizes:
        cells = []
        for m in methods:
            rate = statistics.median(rates(runs[m, n]))
            cells += [spread(rates(runs[m, n])), f"{rate / statistics.median(rates(runs[m, sizes[0]])):.2f}x"]
        t.add_row(f"{n}", *cells)
    return t


def cli_table(runs: dict, n: int) -> Table:
    cli, lib = runs["cli", n], runs["ours", n]
    lib_s = statistics.median(x["seconds"] for x in lib)
    t = Table(title=f"Build CLI vs library on the same {n} rows (CLI: executor local, one process): seconds")
    for col in ("figure", "seconds median (min-max)", "over library"):
        t.add_column(col, justify="left" if col == "figure" else "right")
    t.add_row(
        "library: minhash_signatures + find_duplicates",
        spread([x["seconds"] for x in lib], "{:.2f}"),
        "1.00x",
    )
    if cli_error(cli):
        t.add_row("[red]CLI failed", cli_error(cli), "")
        return t
    for key, label in (
        ("seconds", "CLI dedup stage (manifest timings.dedup)"),
        ("source_seconds", "CLI source stage"),
        ("total_seconds", "CLI total_seconds"),
        ("wall_seconds", "CLI wall, interpreter start to exit"),
    ):
        values = [x[key] for x in cli]
        t.add_row(label, spread(values, "{:.2f}"), f"{statistics.median(values) / lib_s:.2f}x")
    t.add_row("rows removed: CLI / library", f"{cli[0]['removed_count']} / {len(lib[0]['removed'])}", "")
    t.add_row(
        "CLI peak RSS MB (largest process)", f"{statistics.median(x['rss_peak_mb'] for x in cli):.0f}", ""
    )
    return t


def cli_error(cli: list[dict]) -> str:
    return next((x["error"] for x in cli if "error" in x), "")


def cli_median(cli: list[dict], key: str) -> float:
    return float("nan") if cli_error(cli) else statistics.median(x[key] for x in cli)


def targets_table(figures: dict) -> Table:
    t = Table(title="Targets")
    for col in ("target", "value", "met"):
        t.add_column(col)
    for label, value, goal, higher in (
        (
            f"ours (exact check) >= {TARGETS['vs_rensa']}x rensa, end to end per core",
            figures["ratio_vs_rensa"],
            TARGETS["vs_rensa"],
            True,
        ),
        (
            f"CLI dedup stage <= {TARGETS['cli_dedup_over_library']}x library",
            figures["cli_dedup_over_library"],
            TARGETS["cli_dedup_over_library"],
            False,
        ),
        (
            f"throughput at largest size >= {TARGETS['scaling']}x smallest",
            figures["scaling"],
            TARGETS["scaling"],
            True,
        ),
    ):
        met = value >= goal if higher else value <= goal
        t.add_row(
            label, f"{value:.2f}", "[green]yes" if met else "[red]no" if value == value else "not measured"
        )
    return t


# ---- main ----


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"smoke run: defaults {QUICK}")
    p.add_argument(
        "--docs", type=int, help=f"rows for the method comparison and quality (default {FULL['docs']})"
    )
    p.add_argument(
        "--sizes", help=f"comma-separated rows for the throughput scaling (default {FULL['sizes']})"
    )
    p.add_argument(
        "--scale-methods", default="ours", help="methods measured at every size: ours, ours_lsh, rensa, ..."
    )
    p.add_argument("--reps", type=int, help=f"interleaved repetitions (default {FULL['reps']})")
    p.add_argument(
        "--per-token-docs",
        type=int,
        help=f"rows for datasketch per-shingle updates (default {FULL['per_token_docs']})",
    )
    p.add_argument("--dup-fraction", type=float, default=0.1, help="share of rows planted as near-duplicates")
    p.add_argument("--max-edits", type=int, default=8, help="line edits per planted copy: 1 to this many")
    p.add_argument(
        "--batch", type=int, default=1000, help="rows per minhash_signatures call (the executor's batch)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cli-override", action="append", default=[], help="extra build CLI override, repeatable")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.scale_methods = args.scale_methods.split(",")
    return args


@dataclass
class Corpus:
    """The rows of the largest size, and what the quality section knows about the first ``n``."""

    rows: list[dict]
    plants: dict[int, int]  # planted row -> its source row
    files_found: int
    n: int
    truth: dict[tuple[int, int], float]  # exact Jaccard of every pair of the first n rows at >= threshold
    plant_jaccard: list[float]  # of each plant among the first n rows to its source


def make_corpus(n: int, sizes: list[int], args: argparse.Namespace) -> Corpus:
    rows, plants, files = build_corpus(max(n, *sizes), args.seed, args.dup_fraction, args.max_edits)
    texts = edit_texts(rows[:n])
    ngram = PIPELINE_CFG.ngram
    plant_j = pair_jaccard(texts, [(s, p) for p, s in plants.items() if p < n], ngram)
    return Corpus(rows, plants, files, n, exact_pairs(texts, ngram, PIPELINE_CFG.threshold), plant_j)


def plan_of(n: int, sizes: list[int], args) -> list[tuple[str, int]]:
    """(method, rows) of every measurement: all methods at n, the scaled ones at every size, and
    the CLI with ours at the largest size (where per-row costs dominate the process's fixed ones)."""
    plan = [(m, n) for m in (*LIBRARY, "datasketch_bulk", "rensa")]
    plan.append(("datasketch_token", min(n, args.per_token_docs)))
    plan += [(m, s) for s in sizes for m in args.scale_methods if (m, s) not in plan]
    return plan + [(m, sizes[-1]) for m in ("ours", "cli") if (m, sizes[-1]) not in plan]


def main() -> None:
    args = parse_args()
    if args.worker:
        return worker_main(args)
    sizes, n = sorted(int(s) for s in args.sizes.split(",")), args.docs
    corpus = make_corpus(n, sizes, args)
    with tempfile.TemporaryDirectory(prefix="bench-dedup-") as tmp:
        shared, cli = Path(tmp, "corpus.jsonl"), Path(tmp, f"corpus-{sizes[-1]}.jsonl")
        write_jsonl(corpus.rows, shared)
        write_jsonl(corpus.rows[: sizes[-1]], cli)
        runs = interleaved(plan_of(n, sizes, args), shared, cli, args)
    runs["datasketch_token", n] = runs["datasketch_token", min(n, args.per_token_docs)]
    report(runs, corpus, sizes, args)


def report(runs: dict, corpus: Corpus, sizes: list[int], args: argparse.Namespace) -> None:
    n = corpus.n
    console = Console(width=200)
    console.print(corpus_table(corpus))
    console.print(speed_table(runs, n, args))
    q = {m: quality(m, runs[m, n][0], corpus.truth, corpus.plants) for m in (*LIBRARY, *BASELINES)}
    console.print(quality_table(q))
    console.print(scaling_table(runs, sizes, args.scale_methods))
    console.print(cli_table(runs, sizes[-1]))
    median_rate = {m: statistics.median(rates(runs[m, n])) for m in (*LIBRARY, *BASELINES)}
    figures = {
        "ratio_vs_rensa": median_rate["ours"] / median_rate["rensa"],
        "cli_dedup_over_library": cli_median(runs["cli", sizes[-1]], "seconds")
        / statistics.median(x["seconds"] for x in runs["ours", sizes[-1]]),
        "scaling": statistics.median(rates(runs["ours", sizes[-1]]))
        / statistics.median(rates(runs["ours", sizes[0]])),
    }
    console.print(targets_table(figures))
    print_result(n, sizes, median_rate, figures, q, runs)


def print_result(n, sizes, median_rate, figures, q, runs) -> None:
    fields = {"docs": n, "reps": len(runs["ours", n])}
    fields.update({f"{m}_docs_per_s": f"{r:.1f}" for m, r in median_rate.items()})
    fields.update(
        {f"ratio_vs_{m}": f"{median_rate['ours'] / r:.2f}" for m, r in median_rate.items() if m != "ours"}
    )
    for size in sizes:
        fields[f"ours_docs_per_s_{size}"] = f"{statistics.median(rates(runs['ours', size])):.1f}"
    fields[f"scaling_{sizes[-1]}_over_{sizes[0]}"] = f"{figures['scaling']:.3f}"
    fields["cli_dedup_over_library"] = f"{figures['cli_dedup_over_library']:.3f}"
    cli = runs["cli", sizes[-1]]
    fields["cli_docs"] = sizes[-1]
    fields["cli_dedup_s"] = f"{cli_median(cli, 'seconds'):.3f}"
    fields["cli_wall_s"] = f"{cli_median(cli, 'wall_seconds'):.3f}"
    fields["library_s"] = f"{statistics.median(x['seconds'] for x in runs['ours', sizes[-1]]):.3f}"
    for m, x in q.items():
        for key in ("precision", "recall", "removed_precision", "removed_recall"):
            fields[f"{m}_{key}"] = f"{x[key]:.4f}"
    for m in (*LIBRARY, *BASELINES):
        fields[f"{m}_rss_mb"] = f"{statistics.median(x['rss_peak_mb'] for x in runs[m, n]):.0f}"
    print("RESULT " + " ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
