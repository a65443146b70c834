"""The build pipeline: source -> filters -> near-dedup -> decontamination -> sample -> output.

Each stage is a small function from a Dataset to (kept Dataset, StageResult); the runner
chains them through the `StageStore`, so a killed build resumes at the first unfinished
stage and ends with the same output. Row accounting holds across the whole run:
`input = kept + sum(dropped by reason)`, and `manifest.json` records it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from datasets import Dataset

from core.errors import UserError
from core.schema import DATASET_DIR, MANIFEST_FILE, PARQUET_FILE, TASKS_FILE, edit_features
from data_pipeline.config import BuildConfig
from data_pipeline.decontam import decontaminate
from data_pipeline.executors import Executor, make_executor
from data_pipeline.filters import filter_batch
from data_pipeline.input_identity import identity_summary, input_identity
from data_pipeline.near_dedup import near_dedup, start_warming
from data_pipeline.sources import describe_source, iter_records
from data_pipeline.stages import (
    StageResult,
    StageStore,
    claim_output,
    fingerprint,
    save_rows,
    split_by_reason,
    top_reasons,
    write_rows,
)

log = logging.getLogger(__name__)

FEATURES = edit_features()


def source_stage(
    cfg: BuildConfig, _: Dataset | None, executor: Executor, work: Path
) -> tuple[Dataset, StageResult]:
    """Read the source into `work` (memory stays flat); every raw row is kept or counted under a reason.

    An input with no rows, or none left once the bad ones are dropped, is the user's to fix: a
    `UserError`, after writing the (empty) output and its manifest in the second case, so the
    drop reasons can be read.
    """
    started = time.perf_counter()
    counts: Counter[str] = Counter()
    total = 0

    def rows():
        nonlocal total
        for row, reason in iter_records(cfg.source):
            total += 1
            if row is None:
                counts[reason] += 1
            else:
                yield row

    ds = write_rows(rows(), FEATURES, work / "source.arrow")
    if total == 0:
        raise UserError(f"{describe_source(cfg.source)}: no rows to read; point the source at data with rows")
    ds = _dedupe_ids(ds, counts)
    result = StageResult("source", input=total, kept=len(ds), dropped=dict(sorted(counts.items())))
    if not result.kept:
        message = (
            f"{describe_source(cfg.source)}: all {total} rows were dropped at the source "
            f"({top_reasons(result.dropped)}); see {Path(cfg.out) / MANIFEST_FILE} and fix the input"
        )
        identity = identity_summary(input_identity(cfg.source))
        manifest = build_manifest(cfg, [result], time.perf_counter() - started, identity)
        write_output(replace(cfg, push_to_hub=None), ds, {**manifest, "error": message})
        raise UserError(message)
    return ds, result


def _dedupe_ids(ds: Dataset, counts: Counter[str]) -> Dataset:
    """Ids must be unique (dedup keeps the lowest id): a repeated id keeps its first row.

    Ids are read in batches, so only the set of ids is held, not a copy of the column.
    """
    seen: set[str] = set()
    repeats: set[int] = set()
    ids = (i for batch in ds.select_columns("id").iter(batch_size=10_000) for i in batch["id"])
    for index, ident in enumerate(ids):
        if ident in seen:
            repeats.add(index)
        seen.add(ident)
    if repeats:
        counts["duplicate_id"] += len(repeats)
        ds = ds.select([i for i in range(len(ds)) if i not in repeats])
    return ds


def filter_stage(
    cfg: BuildConfig, ds: Dataset, executor: Executor, work: Path
) -> tuple[Dataset, StageResult]:
    rules = cfg.pipeline.rules()
    marked = executor.map_batches(ds, filter_batch, {"rules": rules}, desc="Filtering")
    kept, dropped = split_by_reason(marked)
    return kept, StageResult("filter", input=len(ds), kept=len(kept), dropped=dropped, extra={"rules": rules})


def dedup_stage(cfg: BuildConfig, ds: Dataset, executor: Executor, work: Path) -> tuple[Dataset, StageResult]:
    return near_dedup(ds, cfg.pipeline.dedup, executor, work)


def decontam_stage(
    cfg: BuildConfig, ds: Dataset, executor: Executor, work: Path
) -> tuple[Dataset, StageResult]:
    return decontaminate(ds, cfg.pipeline.decontaminate, cfg.pipeline.dedup, executor)


def sample_stage(
    cfg: BuildConfig, ds: Dataset, executor: Executor, work: Path
) -> tuple[Dataset, StageResult]:
    n = min(cfg.pipeline.sample or len(ds), len(ds))
    kept = ds.shuffle(seed=cfg.pipeline.seed).select(range(n)).flatten_indices()
    return kept, StageResult(
        "sample", input=len(ds), kept=n, dropped={"not_sampled": len(ds) - n} if n < len(ds) else {}
    )


# (config, previous stage's rows, executor, a folder for the stage's shards that survives a kill)
Stage = Callable[[BuildConfig, Any, Executor, Path], tuple[Dataset, StageResult]]


def planned_stages(cfg: BuildConfig) -> list[tuple[str, Stage, Any]]:
    """(name, function, the config slice its output depends on), in order."""
    p = cfg.pipeline
    if p.kind == "fix_tasks":  # one stage makes and judges the rows; units are deduplicated in it
        from data_pipeline.fix_tasks.stage import fix_tasks_stage

        judged = (
            cfg.source,
            p.fix,
            p.dedup if p.dedup.enabled else None,
            cfg.sandbox.limits,
            cfg.sandbox.strict,
        )
        stages: list[tuple[str, Stage, Any]] = [("source", fix_tasks_stage, judged)]
        if p.decontaminate.enabled:
            stages.append(("decontaminate", decontam_stage, (p.decontaminate, p.dedup)))
        if p.sample is not None:
            stages.append(("sample", sample_stage, (p.sample, p.seed)))
        return stages
    stages = [("source", source_stage, cfg.source)]
    if p.filters:
        stages.append(("filter", filter_stage, p.rules()))
    if p.dedup.enabled:
        stages.append(("dedup", dedup_stage, p.dedup))
    if p.decontaminate.enabled:
        stages.append(("decontaminate", decontam_stage, (p.decontaminate, p.dedup)))
    if p.sample is not None:
        stages.append(("sample", sample_stage, (p.sample, p.seed)))
    return stages


def run_pipeline(cfg: BuildConfig) -> dict[str, Any]:
    """Build `cfg.out`; returns the manifest. Finished stages of an earlier run are reused."""
    cfg.validate()
    out = Path(cfg.out)
    lock = claim_output(out)  # one build per `out`; a killed run's temporaries are removed
    try:
        return _build(cfg, out)
    finally:
        lock.release()


def _build(cfg: BuildConfig, out: Path) -> dict[str, Any]:
    store = StageStore(out)
    e = cfg.executor
    # This build's own folder under a shared work_dir: it is removed whole once the build succeeds.
    scratch = (
        Path(e.work_dir) / f"editforge-{fingerprint(str(out.resolve()))}" if e.work_dir else out / ".work"
    )
    executor = make_executor(
        e.kind, e.num_proc, e.address, e.batch_size, e.shard_rows, e.partition_rows, scratch
    )
    results: list[StageResult] = []
    ds: Dataset | None = None
    identity = input_identity(cfg.source)  # read once: the rows and the manifest describe the same bytes
    key = fingerprint("input", identity)  # a changed input reruns every stage
    started = time.perf_counter()
    stages = planned_stages(cfg)
    warming = start_warming(executor) if any(name == "dedup" for name, _, _ in stages) else None
    try:
        for index, (name, stage, depends_on) in enumerate(stages):
            key = fingerprint(key, name, depends_on)
            cached = store.load(index, name, key)
            if cached is not None:
                ds, result = cached
                result.extra["resumed"] = True
                log.info("stage %s: reused (%d kept)", name, result.kept)
            else:
                t0 = time.perf_counter()
                if name == "dedup" and warming is not None:
                    warming.join()  # within the stage's time: what the warming has left is the stage's
                work = scratch / f"{index:02d}-{name}-{key}"  # survives a kill: the stage resumes there
                ds, result = stage(cfg, ds, executor, work)
                result.seconds = round(time.perf_counter() - t0, 3)
                ds = store.save(index, name, key, ds, result)
                shutil.rmtree(work, ignore_errors=True)
                log.info(
                    "stage %s: %d in, %d kept, dropped %s", name, result.input, result.kept, result.dropped
                )
            results.append(result)
    finally:
        if warming is not None:
            warming.join()
        executor.close()
    assert ds is not None
    final = ds.sort("id")
    manifest = build_manifest(cfg, results, time.perf_counter() - started, identity_summary(identity))
    write_output(cfg, final, manifest)
    shutil.rmtree(scratch, ignore_errors=True)  # shards of finished stages and of Ray map tasks
    return manifest


def build_manifest(
    cfg: BuildConfig, results: list[StageResult], seconds: float, identity: dict[str, Any]
) -> dict[str, Any]:
    from data_pipeline.versions import versions

    dropped: Counter[str] = Counter()
    for r in results:
        for reason, n in r.dropped.items():
            dropped[f"{r.name}:{reason}"] += n
    manifest = {
        "input": results[0].input,
        "kept": results[-1].kept,
        "dropped": dict(sorted(dropped.items())),
        "input_identity": identity,
        "stages": [r.__dict__ for r in results],
        "config": cfg.as_dict(),
        "versions": versions(),
        "timings": {"total_seconds": round(seconds, 3), **{r.name: r.seconds for r in results}},
    }
    if cfg.pipeline.dedup.enabled:  # fix tasks: the units' near-dedup
        manifest["minhash"] = {**cfg.pipeline.dedup.minhash.as_manifest(), "text": cfg.pipeline.dedup.text}
    if manifest["input"] != manifest["kept"] + sum(dropped.values()):
        raise AssertionError(
            f"row accounting broken: {manifest['input']} in, {manifest['kept']} kept, {dropped}"
        )
    return manifest


def write_output(cfg: BuildConfig, ds: Dataset, manifest: dict[str, Any]) -> None:
    """Swap the finished dataset, manifest and statistics into `cfg.out` atomically."""
    out = Path(cfg.out)
    tmp = out / f".output.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if cfg.format == "parquet":
        ds.to_parquet(str(tmp / PARQUET_FILE))
    else:
        save_rows(ds, tmp / DATASET_DIR)
    if cfg.pipeline.kind == "fix_tasks":
        from data_pipeline.fix_tasks.tasks import write_tasks

        write_tasks(ds, tmp / TASKS_FILE)
    if cfg.stats:
        from data_pipeline.stats import write_statistics

        manifest["stats"] = write_statistics(ds, tmp, plots=cfg.plots)
    (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, default=str))
    _install(tmp, out)
    if cfg.push_to_hub:
        ds.push_to_hub(cfg.push_to_hub)


_OUTPUT_NAMES = (DATASET_DIR, PARQUET_FILE, MANIFEST_FILE, TASKS_FILE, "stats.json", "stats.md", "plots")


def _install(tmp: Path, out: Path) -> None:
    # Move every produced entry into place (replace = one rename per entry), then drop stale ones.
    produced = {p.name for p in tmp.iterdir()}
    for name in _OUTPUT_NAMES:
        target = out / name
        if name not in produced and target.exists():
            shutil.rmtree(target) if target.is_dir() else target.unlink()
    for entry in tmp.iterdir():
        target = out / entry.name
        if target.is_dir():
            shutil.rmtree(target)
        os.replace(entry, target)
    tmp.rmdir()
