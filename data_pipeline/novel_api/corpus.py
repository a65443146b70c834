"""SFT and RAFT corpora from novel-API tasks, as edit examples `train/` reads.

Tasks are split by **task** (the paper's single task-level split, seeded: an API's tasks may fall
on both sides, so whether tuning internalises an API can be asked), by **API** (ours: every task
of an API on one side, so training never sees an API it is evaluated on), or by **library**
(leave-one-library-out, `holdout=LIB`: that library's tasks are the test split). The test tasks are
the evaluation's; train rows that copy one (a reference that near-duplicates a test task's code)
are dropped by the pipeline's decontamination (`data_pipeline/decontam.py`, reading the benchmark
through `core.benchmarks`, the loader evaluation uses). Equal instructions are not a copy here:
a template gives an API's levels one description and the bundle one knowledge text, so a train
task of a test task's API has that task's instruction; dropping it would undo the task-level
split's API overlap. Those rows are kept and counted (`kept_sharing_test_description`).

An edit example: before = the context with its `# TODO` line, instruction = the description
plus knowledge, after = the reference. **SFT**: the full bundle per example, as the paper
trains (`sft_cell="Full"`), or any one preset, or ``random`` (ours: a cell of the grid without the
empty baseline, drawn per example).
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
from core.neardup.instructions import normalize_instruction
from core.schema import EDIT_COLUMNS, MANIFEST_FILE, PARQUET_FILE
from data_pipeline.novel_api.raft import RAFTConfig, raft_examples

SFT_CELLS = tuple(c for c in CELL_PRESETS if c != "baseline")
SPLITS = ("task", "api", "library")


def assign_splits(
    tasks: list[dict], test_fraction: float, seed: int, holdout: str | None = None, by: str = "task"
) -> list[dict]:
    """Every task with `split`: train or test; ``by`` task (the paper's), api, or library (the
    test split is the ``holdout`` library's tasks; a holdout alone means by library)."""
    if holdout is not None or by == "library":
        if holdout is None:
            raise ValueError("a split by library needs the held-out library (corpus.holdout=LIB)")
        return [{**t, "split": "test" if t["library"] == holdout else "train"} for t in tasks]
    if by not in SPLITS:
        raise ValueError(f"corpus.split={by!r}: choose one of {SPLITS}")
    units = sorted({str(t["id"] if by == "task" else t["qualname"]) for t in tasks})
    random.Random(seed).shuffle(units)
    n_test = min(len(units), max(1, math.ceil(test_fraction * len(units)))) if units else 0
    test = set(units[:n_test])
    unit = (lambda t: str(t["id"])) if by == "task" else (lambda t: str(t["qualname"]))
    return [{**t, "split": "test" if unit(t) in test else "train"} for t in tasks]


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


def sft_rows(
    tasks: list[dict], bundles: dict[str, dict], seed: int, cell: str = "Full"
) -> list[dict[str, str]]:
    """One example per task with the knowledge of ``cell`` (a preset, or ``random``: one per task)."""
    if cell != "random" and cell not in CELL_PRESETS:
        raise ValueError(f"corpus.sft_cell={cell!r}: choose random or one of {sorted(CELL_PRESETS)}")
    rows = []
    for task in tasks:
        chosen = random.Random(f"{seed}:{task['id']}").choice(SFT_CELLS) if cell == "random" else cell
        knowledge = render_knowledge(bundles[task["qualname"]], CELL_PRESETS[chosen])
        rows.append(_row(task, instruction(task, knowledge), "novelapi-sft", {"cell": chosen}))
    return rows


def raft_rows(tasks: list[dict], bundles: dict[str, dict], config: RAFTConfig) -> list[dict[str, str]]:
    made = raft_examples(tasks, bundles, config, lambda b: render_knowledge(b, PARTS))
    return [
        _row(
            ex,
            instruction(ex, ex["documents"]),
            "novelapi-raft",
            {"oracle_in_context": ex["oracle_in_context"], "documents": ex["context_ids"]},
        )
        for ex in made
    ]


def decontaminate_rows(rows: list[dict], benchmark: Path) -> tuple[list[dict], dict[str, Any]]:
    """Drop rows whose reference near-duplicates a test task's code (`contaminated_code`).

    Instructions are not compared: a train task of a test task's API shares its description and
    knowledge by construction (see the module's docstring), which is the task-level split's design.
    """
    if not rows:
        return rows, {"input": 0, "kept": 0, "dropped": {}}
    from datasets import Dataset

    from data_pipeline.config import DecontamOptions, DedupOptions
    from data_pipeline.decontam import decontaminate
    from data_pipeline.executors import LocalExecutor

    # Tasks are templated (every L2 context can be the same few lines): compare the references, and
    # only near-copies (0.8), or the template alone would match every evaluation task.
    opts = DecontamOptions(
        benchmarks=[{"name": "novelapi", "path": str(benchmark)}],
        threshold=0.8,
        columns=["after"],
        match_instructions=False,
    )
    kept, result = decontaminate(Dataset.from_list(rows), opts, DedupOptions(), LocalExecutor(num_proc=1))
    return kept.to_list(), {"input": result.input, "kept": result.kept, "dropped": result.dropped}


def shared_descriptions(rows: list[dict], tasks: list[dict]) -> dict[str, int]:
    """Kept rows whose task's description equals a test task's (normalised), by whether the test
    task targets the same API: counted, not dropped, so a corpus shows how much of the split's
    API overlap it carries."""
    by_id = {str(t["id"]): t for t in tasks}
    test = {
        (normalize_instruction(t["description"]), t["qualname"]) for t in tasks if t.get("split") == "test"
    }
    test_descriptions = {d for d, _ in test}
    counts = {"same_api": 0, "other_api": 0}
    for row in rows:
        task = by_id[str(json.loads(row["meta"])["task"])]
        description = normalize_instruction(task["description"])
        if (description, task["qualname"]) in test:
            counts["same_api"] += 1
        elif description in test_descriptions:
            counts["other_api"] += 1
    return counts


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
    sft_cell: str = "Full",
) -> dict[str, Any]:
    """Write folder/corpus/<kind>/ for each kind; `tasks` carry their split already."""
    train = [t for t in tasks if t.get("split") == "train"]
    summary: dict[str, Any] = {"train_tasks": len(train), "test_tasks": len(tasks) - len(train)}
    for kind in kinds:
        rows = sft_rows(train, bundles, seed, sft_cell) if kind == "sft" else raft_rows(train, bundles, raft)
        kept, decontam = decontaminate_rows(rows, folder)
        manifest = {
            "input": len(rows),
            "kept": len(kept),
            "dropped": decontam["dropped"],  # by reason; input = kept + sum(dropped)
            "drop_reasons": {
                "contaminated_code": "the reference near-duplicates a test task's code (Jaccard >= 0.8)"
            },
            "kept_sharing_test_description": shared_descriptions(kept, tasks),
            "kind": kind,
            "seed": seed,
            "cells": dict(Counter(json.loads(r["meta"]).get("cell", "raft") for r in kept)),
            "raft": raft.__dict__ if kind == "raft" else None,
        }
        write_corpus(kept, folder / "corpus" / kind, manifest)
        summary[kind] = manifest
    return summary
