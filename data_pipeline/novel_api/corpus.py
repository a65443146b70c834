"""SFT and RAFT corpora from novel-API tasks, as edit examples `train/` reads.

Tasks are split **by API** (every task of an API on one side, so training never sees an API
it is evaluated on; seeded), or leave-one-library-out (`holdout=LIB`: that library's tasks
are the test split). The test tasks are the evaluation's; train rows are decontaminated
against them with the pipeline's decontamination (`data_pipeline/decontam.py`, reading the
benchmark through `core.benchmarks`, the loader evaluation uses).

An edit example: before = the context with its `# TODO` line, instruction = the description
plus knowledge, after = the reference. **SFT**: one knowledge cell per example, drawn from the
study's grid without the empty baseline (tuning teaches a model to use supplied knowledge).
**RAFT**: the task's own bundle (the oracle) among k distractors, present in a fraction P of
the examples (`raft.py`), rendered whole (every S/E/M part) and delimited.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

from core.benchmarks.novelapi import instruction
from core.knowledge import CELL_PRESETS, PARTS, render_knowledge
from core.schema import EDIT_COLUMNS, MANIFEST_FILE, PARQUET_FILE
from data_pipeline.novel_api.raft import RAFTConfig, raft_examples

SFT_CELLS = tuple(c for c in CELL_PRESETS if c != "baseline")


def assign_splits(
    tasks: list[dict], test_fraction: float, seed: int, holdout: str | None = None
) -> list[dict]:
    """Every task with `split`: train or test, by API (or by library with `holdout`)."""
    if holdout is not None:
        return [{**t, "split": "test" if t["library"] == holdout else "train"} for t in tasks]
    apis = sorted({t["qualname"] for t in tasks})
    random.Random(seed).shuffle(apis)
    n_test = min(len(apis), max(1, math.ceil(test_fraction * len(apis)))) if apis else 0
    test = set(apis[:n_test])
    return [{**t, "split": "test" if t["qualname"] in test else "train"} for t in tasks]


def _row(task: dict, text: str, source: str, meta: dict[str, Any]) -> dict[str, str]:
    return {
        "id": f"{task['id']}#{meta.get('cell', 'raft')}",
        "before": task["context"],
        "after": task["reference"],
        "instruction": text,
        "lang": "python",
        "source": source,
        "meta": json.dumps({"task": task["id"], "qualname": task["qualname"], **meta}),
    }


def sft_rows(tasks: list[dict], bundles: dict[str, dict], seed: int) -> list[dict[str, str]]:
    rows = []
    for task in tasks:
        cell = random.Random(f"{seed}:{task['id']}").choice(SFT_CELLS)
        knowledge = render_knowledge(bundles[task["qualname"]], CELL_PRESETS[cell])
        rows.append(_row(task, instruction(task, knowledge), "novelapi-sft", {"cell": cell}))
    return rows


def raft_rows(tasks: list[dict], bundles: dict[str, dict], config: RAFTConfig) -> list[dict[str, str]]:
    made = raft_examples(tasks, bundles, config, lambda b: render_knowledge(b, PARTS))
    return [
        _row(
            ex,
            instruction(ex, ex["context"]),
            "novelapi-raft",
            {"oracle_in_context": ex["oracle_in_context"], "documents": ex["context_ids"]},
        )
        for ex in made
    ]


def decontaminate_rows(rows: list[dict], benchmark: Path) -> tuple[list[dict], dict[str, Any]]:
    """Drop rows that copy a test task (code near-duplicates or an identical instruction)."""
    if not rows:
        return rows, {"input": 0, "kept": 0, "dropped": {}}
    from datasets import Dataset

    from data_pipeline.config import DecontamOptions, DedupOptions
    from data_pipeline.decontam import decontaminate
    from data_pipeline.executors import LocalExecutor

    # Tasks are templated (every L2 context can be the same few lines): compare the references, and
    # only near-copies (0.8), or the template alone would match every evaluation task.
    opts = DecontamOptions(
        benchmarks=[{"name": "novelapi", "path": str(benchmark)}], threshold=0.8, columns=["after"]
    )
    kept, result = decontaminate(Dataset.from_list(rows), opts, DedupOptions(), LocalExecutor(num_proc=1))
    return kept.to_list(), {"input": result.input, "kept": result.kept, "dropped": result.dropped}


def write_corpus(rows: list[dict], out: Path, manifest: dict[str, Any]) -> None:
    """`out/data.parquet` + `out/manifest.json`: a build folder `train/sft.py data.path=` reads."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=pa.schema([(c, pa.string()) for c in EDIT_COLUMNS]))
    pq.write_table(table, out / f".{PARQUET_FILE}.tmp")
    (out / f".{PARQUET_FILE}.tmp").replace(out / PARQUET_FILE)
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")


def build_corpora(
    folder: Path,
    kinds: list[str],
    tasks: list[dict],
    bundles: dict[str, dict],
    seed: int,
    raft: RAFTConfig,
) -> dict[str, Any]:
    """Write folder/corpus/<kind>/ for each kind; `tasks` carry their split already."""
    train = [t for t in tasks if t.get("split") == "train"]
    summary: dict[str, Any] = {"train_tasks": len(train), "test_tasks": len(tasks) - len(train)}
    for kind in kinds:
        rows = sft_rows(train, bundles, seed) if kind == "sft" else raft_rows(train, bundles, raft)
        kept, decontam = decontaminate_rows(rows, folder)
        manifest = {
            "input": len(rows),
            "kept": len(kept),
            "dropped": decontam["dropped"],
            "kind": kind,
            "seed": seed,
            "cells": dict(Counter(json.loads(r["meta"]).get("cell", "raft") for r in kept)),
            "raft": raft.__dict__ if kind == "raft" else None,
        }
        write_corpus(kept, folder / "corpus" / kind, manifest)
        summary[kind] = manifest
    return summary
