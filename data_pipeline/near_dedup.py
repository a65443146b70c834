"""The near-dedup stage of a build: the sharded MinHash job (`minhash_job.py`) over the stage's rows."""

from __future__ import annotations

from pathlib import Path

from datasets import Dataset

from data_pipeline.config import DedupOptions
from data_pipeline.executors import Executor
from data_pipeline.minhash_job import run_minhash_dedup
from data_pipeline.stages import StageResult


def near_dedup(
    ds: Dataset, opts: DedupOptions, executor: Executor, work: Path
) -> tuple[Dataset, StageResult]:
    """`ds` without near-duplicates; `work` holds the job's shards, so a killed job resumes there."""
    kept, counts = run_minhash_dedup(ds, opts.minhash, opts.text, executor, work)
    removed = len(ds) - len(kept)
    return kept, StageResult(
        "dedup",
        input=len(ds),
        kept=len(kept),
        dropped={"near_duplicate": removed} if removed else {},
        extra=counts,
    )
