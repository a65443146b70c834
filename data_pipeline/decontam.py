"""Decontamination: drop training rows that copy an evaluation benchmark.

A row is contaminated when its `before` or `after` code is a near-duplicate of a benchmark
program (MinHash-LSH candidates, confirmed by the signatures' Jaccard estimate at
`threshold`), or when its instruction equals a benchmark instruction once case, spacing
and trailing punctuation are normalised.

Benchmarks are read by evaluation's own loaders (`core.benchmarks`), so the texts checked
are exactly the ones the model is shown and expected to write: every problem's `before`
and `after` and its instructions, in every variant a benchmark has (HumanEvalFix's fix,
fixtests and fixdocs show different code). CanItEdit's licence forbids training on it:
keep it in the list.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np
from datasets import Dataset
from datasketch import LeanMinHash, MinHashLSH

from core.benchmarks import Benchmark, load_every_variant, options_from
from core.benchmarks.options import BenchmarkOptions
from data_pipeline.config import DecontamOptions, DedupOptions
from data_pipeline.executors import Executor
from data_pipeline.minhash import minhash_signatures
from data_pipeline.stages import StageResult, split_by_reason


def normalize_instruction(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower().rstrip(".!?;: ")


def source_label(source: BenchmarkOptions) -> str:
    """How a benchmark is named in the manifest: its name, plus its path when not the default."""
    return source.name if source.path is None else f"{source.name}:{source.path}"


def load_benchmarks(sources: list[Any]) -> list[Benchmark]:
    """Each source (options, or a mapping of them) in every variant, labelled by `source_label`."""
    options = [options_from(s) for s in sources]
    return [Benchmark(source_label(o), bench.problems) for o in options for bench in load_every_variant(o)]


class BenchmarkIndex:
    """MinHash-LSH over every benchmark program, plus the set of normalised instructions."""

    def __init__(self, benchmarks: list[Benchmark], opts: DecontamOptions, dedup: DedupOptions):
        # Code tokens whatever the dedup preset: a benchmark copy is a copy of its code, case included.
        self.cfg = replace(dedup.minhash, threshold=opts.threshold, tokens="code", lowercase=False)
        self.threshold = opts.threshold
        self.lsh = MinHashLSH(threshold=opts.threshold, num_perm=self.cfg.num_perm)
        self.owner: list[str] = []
        self.signatures: list[np.ndarray] = []
        self.instructions: dict[str, str] = {}
        for bench in benchmarks:
            programs = bench.programs()
            if programs:
                for sig in minhash_signatures(programs, self.cfg):
                    key = str(len(self.owner))
                    self.lsh.insert(
                        key, LeanMinHash(seed=self.cfg.seed, hashvalues=sig, scheme=self.cfg.scheme)
                    )
                    self.owner.append(bench.name)
                    self.signatures.append(sig)
            if opts.match_instructions:
                self.instructions.update({normalize_instruction(i): bench.name for i in bench.instructions()})

    def code_match(self, sig: np.ndarray) -> str | None:
        for key in self.lsh.query(LeanMinHash(seed=self.cfg.seed, hashvalues=sig, scheme=self.cfg.scheme)):
            j = int(key)
            if float(np.mean(self.signatures[j] == sig)) >= self.threshold:
                return self.owner[j]
        return None


def decontam_batch(batch: dict[str, list], index: BenchmarkIndex, columns: list[str]) -> dict[str, list]:
    """Batched form for executors: adds `drop_reason` and the matched `benchmark` (or "")."""
    code = [minhash_signatures(batch[column], index.cfg) for column in columns]
    reasons, benchmarks = [], []
    for i, instruction in enumerate(batch["instruction"]):
        bench = next((b for sigs in code if (b := index.code_match(sigs[i]))), None)
        reason = "contaminated_code" if bench else ""
        if not bench and index.instructions:
            bench = index.instructions.get(normalize_instruction(instruction))
            reason = "contaminated_instruction" if bench else ""
        reasons.append(reason)
        benchmarks.append(bench or "")
    return {**batch, "drop_reason": reasons, "benchmark": benchmarks}


def decontaminate(
    ds: Dataset, opts: DecontamOptions, dedup: DedupOptions, executor: Executor
) -> tuple[Dataset, StageResult]:
    """Rows that copy no benchmark; signatures are computed batch by batch and never gathered."""
    index = BenchmarkIndex(load_benchmarks(list(opts.benchmarks)), opts, dedup)
    if len(ds) == 0:
        return ds, StageResult("decontaminate", input=0, kept=0)
    marked = executor.map_batches(
        ds, decontam_batch, {"index": index, "columns": list(opts.columns)}, desc="Decontaminating"
    )
    by_benchmark = Counter(
        b for batch in marked.select_columns("benchmark").iter(10_000) for b in batch["benchmark"] if b
    )
    kept, reasons = split_by_reason(marked.remove_columns("benchmark"))
    return kept, StageResult(
        "decontaminate",
        input=len(ds),
        kept=len(kept),
        dropped=reasons,
        extra={
            "by_benchmark": dict(sorted(by_benchmark.items())),
            "benchmarks": [source_label(b) for b in opts.benchmarks],
        },
    )
