"""The near-dedup stage: MinHash signatures through the executor, then LSH + union-find.

Signatures are a pure per-batch function, so they run under `datasets.map(num_proc)` or
Ray Data alike; clustering needs every signature at once and runs in the driver.
"""

from __future__ import annotations

import numpy as np
from datasets import Dataset

from data_pipeline.config import DedupOptions
from data_pipeline.dedup import MinHashConfig, dedup_text, find_duplicates, signature_batch
from data_pipeline.executors import Executor
from data_pipeline.stages import StageResult

SIGNATURE_COLUMN = "minhash"


def signatures(ds: Dataset, cfg: MinHashConfig, executor: Executor, fields: tuple[str, ...]) -> np.ndarray:
    signed = executor.map_batches(
        ds.select_columns(["id", *fields]),
        signature_batch,
        {"cfg": cfg, "fields": fields},
        desc="MinHash signatures",
    )
    # datasets reads uint64 lists back as Python ints; the bits are what matter.
    return np.asarray(signed.with_format("numpy")[SIGNATURE_COLUMN], dtype=np.uint64).reshape(
        len(ds), cfg.num_perm
    )


def near_dedup(ds: Dataset, opts: DedupOptions, executor: Executor) -> tuple[Dataset, StageResult]:
    cfg = opts.minhash
    if len(ds) == 0:
        return ds, StageResult("dedup", input=0, kept=0)
    sigs = signatures(ds, cfg, executor, ("before", "after"))
    ids = list(ds["id"])
    texts = [dedup_text(r) for r in ds.select_columns(["before", "after"])] if cfg.exact_check else None
    result = find_duplicates(ids, sigs, cfg, texts=texts)
    kept = ds.select([i for i, keep in enumerate(result.keep) if keep])
    removed = len(ds) - len(kept)
    extra = {
        "clusters": result.n_clusters,
        "candidate_pairs": result.n_candidate_pairs,
        "pairs_rejected_by_exact_check": result.n_pairs_rejected_by_exact_check,
    }
    return kept, StageResult(
        "dedup",
        input=len(ds),
        kept=len(kept),
        dropped={"near_duplicate": removed} if removed else {},
        extra=extra,
    )
