"""Decontamination: drop training rows that copy an evaluation benchmark.

A row is contaminated when its `before` or `after` code is a near-duplicate of a benchmark
program (MinHash-LSH candidates, confirmed by the signatures' Jaccard estimate at
`threshold`), or when its instruction equals a benchmark instruction once case, spacing
and trailing punctuation are normalised. Benchmarks are CanItEdit-schema jsonl files
(`before, after, instruction_descriptive, instruction_lazy`) and HumanEvalPack files
(`prompt, declaration, canonical_solution, buggy_solution, instruction`), given as files,
folders of jsonl, or hub ids (`hub:nuprl/CanItEdit`, `hub:bigcode/humanevalpack:python`). CanItEdit's licence forbids training on it: keep it in the list.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from datasets import Dataset
from datasketch import LeanMinHash, MinHashLSH

from data_pipeline.config import DecontamOptions, DedupOptions
from data_pipeline.dedup import minhash_signatures
from data_pipeline.executors import Executor
from data_pipeline.near_dedup import minhash_config, signatures
from data_pipeline.stages import StageResult


@dataclass
class Benchmark:
    name: str
    programs: list[str] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)


def normalize_instruction(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower().rstrip(".!?;: ")


def _problem_texts(record: dict) -> tuple[list[str], list[str]]:
    if "before" in record and "after" in record:  # CanItEdit schema
        programs = [record["before"], record["after"]]
        instructions = [record.get(k) for k in ("instruction_descriptive", "instruction_lazy", "instruction")]
    elif "canonical_solution" in record:  # HumanEvalPack
        declaration = record.get("declaration") or record.get("prompt", "")
        programs = [
            record.get("prompt", "") + record["canonical_solution"],
            declaration + record["canonical_solution"],
        ]
        if record.get("buggy_solution"):
            programs.append(declaration + record["buggy_solution"])
        instructions = [record.get("instruction")]
    else:
        raise ValueError(
            f"benchmark record {str(record)[:80]}... has neither CanItEdit nor HumanEvalPack fields"
        )
    return [p for p in programs if p and p.strip()], [
        i for i in instructions if isinstance(i, str) and i.strip()
    ]


def _hub_benchmark(entry: str) -> Benchmark:
    import datasets

    name, _, subset = entry.removeprefix("hub:").partition(":")
    bench = Benchmark(name=entry.removeprefix("hub:"))
    for record in datasets.load_dataset(name, subset or None, split="test"):
        programs, instructions = _problem_texts(record)
        bench.programs += programs
        bench.instructions += instructions
    return bench


def load_benchmarks(paths: list[str]) -> list[Benchmark]:
    """Benchmarks from jsonl files, folders of them, or `hub:ID[:SUBSET]` (test split)."""
    benchmarks = [_hub_benchmark(p) for p in paths if p.startswith("hub:")]
    for path in (Path(p) for p in paths if not p.startswith("hub:")):
        files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for file in files:
            bench = Benchmark(name=f"{path.name}/{file.stem}" if path.is_dir() else file.stem)
            for line_no, line in enumerate(file.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    programs, instructions = _problem_texts(json.loads(line))
                except (json.JSONDecodeError, ValueError) as err:
                    raise ValueError(f"{file}:{line_no}: not a benchmark problem ({err})") from err
                bench.programs += programs
                bench.instructions += instructions
            benchmarks.append(bench)
    return benchmarks


class BenchmarkIndex:
    """MinHash-LSH over every benchmark program, plus the set of normalised instructions."""

    def __init__(self, benchmarks: list[Benchmark], opts: DecontamOptions, dedup: DedupOptions):
        self.cfg = replace(minhash_config(dedup), threshold=opts.threshold)
        self.threshold = opts.threshold
        self.lsh = MinHashLSH(threshold=opts.threshold, num_perm=self.cfg.num_perm)
        self.owner: list[str] = []
        self.signatures: list[np.ndarray] = []
        self.instructions: dict[str, str] = {}
        for bench in benchmarks:
            if bench.programs:
                for sig in minhash_signatures(bench.programs, self.cfg):
                    key = str(len(self.owner))
                    self.lsh.insert(
                        key, LeanMinHash(seed=self.cfg.seed, hashvalues=sig, scheme=self.cfg.scheme)
                    )
                    self.owner.append(bench.name)
                    self.signatures.append(sig)
            if opts.match_instructions:
                self.instructions.update({normalize_instruction(i): bench.name for i in bench.instructions})

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
    before = signatures(ds, index.cfg, executor, ("before",))
    after = signatures(ds, index.cfg, executor, ("after",))
    reasons: Counter[str] = Counter()
    by_benchmark: Counter[str] = Counter()
    keep = []
    for i, instruction in enumerate(ds["instruction"]):
        bench = index.code_match(before[i]) or index.code_match(after[i])
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
        extra={"by_benchmark": dict(sorted(by_benchmark.items())), "benchmarks": list(opts.benchmarks)},
    )
