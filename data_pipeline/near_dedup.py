"""The near-dedup stage of a build: the sharded MinHash job (`minhash_job.py`) over the stage's rows."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from datasets import Dataset

from core.neardup.dedup import warm_kernels
from data_pipeline.config import DedupOptions
from data_pipeline.executors import Executor, LocalExecutor
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


def start_warming(executor: Executor) -> threading.Thread | None:
    """The job's compiled kernels loading on a thread while the stages before near-dedup run.

    numba's start is mostly Python, but the source stage spends much of its time writing with the
    GIL released, so the two overlap: the build gains what the first call would have cost (0.3 s
    on 20,000 rows; the dedup stage joins the thread within its own time, so what is left is
    counted there). Only where every stage runs in this process (the local executor, one process):
    a stage that forks workers (``num_proc``) must not fork while the thread holds numba's locks, and
    Ray's workers start their own."""
    if not isinstance(executor, LocalExecutor) or (executor.num_proc or 1) > 1:
        return None
    thread = threading.Thread(target=_warm, name="editforge-warm-kernels", daemon=True)
    thread.start()
    return thread


def _warm() -> None:
    try:
        warm_kernels()
    except Exception:  # noqa: BLE001 - the stage's own first call raises whatever this hid
        logging.getLogger(__name__).debug("warming the near-dedup kernels failed", exc_info=True)
