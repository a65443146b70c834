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

import numpy as np
from datasets import Dataset
from datasketch import LeanMinHash, MinHashLSH

from core.benchmarks import Benchmark, BenchmarkSource, load_every_variant
from data_pipeline.config import DecontamOptions, DedupOptions
from data_pipeline.dedup import minhash_signatures
from data_pipeline.executors import Executor
from data_pipeline.near_dedup import signatures
from data_pipeline.stages import StageResult


def normalize_instruction(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower().rstrip(".!?;: ")


def source_label(source: BenchmarkSource) -> str:
    """How a benchmark is named in the manifest: its name, plus its path when not the default."""
    return source.name if source.path is None else f"{source.name}:{source.path}"


def load_benchmarks(sources: list[BenchmarkSource]) -> list[Benchmark]:
    """Each source in every variant, labelled by `source_label`."""
    return [Benchmark(source_label(s), bench.problems) for s in sources for bench in load_every_variant(s)]


class BenchmarkIndex:
    """MinHash-LSH over every benchmark program, plus the set of normalised instructions."""

    def __init__(self, benchmarks: list[Benchmark], opts: DecontamOptions, dedup: DedupOptions):
        self.cfg = replace(dedup.minhash, threshold=opts.threshold)
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


def decontaminate(
    ds: Dataset, opts: DecontamOptions, dedup: DedupOptions, executor: Executor
) -> tuple[Dataset, StageResult]:
    index = BenchmarkIndex(load_benchmarks(list(opts.benchmarks)), opts, dedup)
    if len(ds) == 0:
        return ds, StageResult("decontaminate", input=0, kept=0)
    code = [signatures(ds, index.cfg, executor, (column,)) for column in opts.columns]
    reasons: Counter[str] = Counter()
    by_benchmark: Counter[str] = Counter()
    keep = []
    for i, instruction in enumerate(ds["instruction"]):
        bench = next((b for sigs in code if (b := index.code_match(sigs[i]))), None)
        reason = "contaminated_code" if bench else ""
        if not bench and index.instructions:
            bench = index.instructions.get(normalize_instruction(instruction))
            reason = "contaminated_instruction" if bench else ""
        keep.append(not reason)
        if reason:
            reasons[reason] += 1
            by_benchmark[bench] += 1
    kept = ds.select([i for i, k in enumerate(keep) if k])
    return kept, StageResult(
        "decontaminate",
        input=len(ds),
        kept=len(kept),
        dropped=dict(sorted(reasons.items())),
        extra={
            "by_benchmark": dict(sorted(by_benchmark.items())),
            "benchmarks": [source_label(b) for b in opts.benchmarks],
        },
    )
