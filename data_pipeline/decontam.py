"""Decontamination: drop training rows that copy an evaluation benchmark.

A row is contaminated when its `before` or `after` code is a near-duplicate of a benchmark
program, or when its instruction equals a benchmark instruction once case, spacing and
trailing punctuation are normalised (`core.neardup.instructions`). Near-duplicates are
found by the dedup engine (`core.neardup.pairs.ReferenceIndex`) at `threshold`, with the
exact check: LSH candidates whose Jaccard similarity reaches it, by the signatures' estimate
when clear and by the shingle sets when close.

Benchmarks are read by evaluation's own loaders (`core.benchmarks`), so the texts checked
are exactly the ones the model is shown and expected to write: every problem's `before`
and `after` and its instructions, in every variant a benchmark has (HumanEvalFix's fix,
fixtests and fixdocs show different code). CanItEdit's licence forbids training on it:
keep it in the list.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from datasets import Dataset

from core.benchmarks import Benchmark, load_every_variant, options_from
from core.benchmarks.options import BenchmarkOptions
from core.errors import ConfigError
from core.hub import existing_path, hub_offline, is_hub
from core.neardup.instructions import normalize_instruction
from core.neardup.pairs import ReferenceIndex
from data_pipeline.config import DecontamOptions, DedupOptions, default_benchmarks
from data_pipeline.executors import Executor
from data_pipeline.stages import StageResult, split_by_reason

log = logging.getLogger(__name__)


def source_label(source: BenchmarkOptions | Mapping[str, Any]) -> str:
    """How a benchmark is named in the manifest: its name, plus its path when not the default."""
    options = options_from(source)
    return options.name if options.path is None else f"{options.name}:{options.path}"


def usable_sources(
    opts: DecontamOptions, key: str = "pipeline.decontaminate.benchmarks"
) -> tuple[list[Any], list[str]]:
    """(the sources to check against, the labels of those skipped). Decided at start-up and again by
    the stage, the same way: a local path must exist; a source on the hub only, where the hub cannot
    be reached, is skipped when it is one of the defaults (with a one-line notice, once) and fails
    with one line naming ``key`` when the user named it."""
    defaults = {source_label(s) for s in default_benchmarks()}
    usable, skipped = [], []
    for source in opts.benchmarks:
        options = options_from(source, key)
        label = source_label(options)
        on_hub = is_hub(options.path) if options.path is not None else options.hub_default
        if options.path is not None and not on_hub:
            existing_path(
                options.path, f"{key}[{label}].path", "or leave path null for the benchmark's own source"
            )
        if on_hub and hub_offline():
            if label not in defaults:
                raise ConfigError(
                    f"{key}: {label} is on the hub, which is offline or unreachable here; pass a local copy "
                    f"({{name: {options.name}, path: FILE}}) or drop it from the list"
                )
            skipped.append(label)
            if label not in _NOTIFIED:
                _NOTIFIED.add(label)
                log.warning(
                    "decontamination: %s is on the hub only, which is offline or unreachable here: skipped "
                    "(set %s with a local copy of it to check against it)",
                    label,
                    key,
                )
            continue
        usable.append(source)
    return usable, skipped


_NOTIFIED: set[str] = set()


def load_benchmarks(sources: list[Any]) -> list[Benchmark]:
    """Each source (options, or a mapping of them) in every variant, labelled by `source_label`."""
    options = [options_from(s) for s in sources]
    return [Benchmark(source_label(o), bench.problems) for o in options for bench in load_every_variant(o)]


class BenchmarkIndex:
    """Every benchmark program indexed for near-duplicate search, plus the set of normalised instructions."""

    def __init__(self, benchmarks: list[Benchmark], opts: DecontamOptions, dedup: DedupOptions):
        # Code tokens whatever the dedup preset: a benchmark copy is a copy of its code, case
        # included; and always the exact check, so a copy is a Jaccard of at least `threshold`.
        self.cfg = replace(
            dedup.minhash,
            threshold=opts.threshold,
            tokens="code",
            lowercase=False,
            exact_check=True,
            candidate_threshold=None,
        )
        self.owner: list[str] = []
        programs: list[str] = []
        self.instructions: dict[str, str] = {}
        for bench in benchmarks:
            programs += bench.programs()
            self.owner += [bench.name] * (len(programs) - len(self.owner))
            if opts.match_instructions:
                self.instructions.update({normalize_instruction(i): bench.name for i in bench.instructions()})
        self.programs = ReferenceIndex(programs, self.cfg)

    def code_matches(self, texts: Sequence[str]) -> list[str | None]:
        """For each text, the benchmark of the first program it near-duplicates, or None."""
        first: dict[int, int] = {}
        for i, j in self.programs.pairs(texts).tolist():  # sorted: a text's lowest program first
            first.setdefault(i, j)
        return [self.owner[first[i]] if i in first else None for i in range(len(texts))]


def decontam_batch(batch: dict[str, list], index: BenchmarkIndex, columns: list[str]) -> dict[str, list]:
    """Batched form for executors: adds `drop_reason` and the matched `benchmark` (or "")."""
    code = [index.code_matches(batch[column]) for column in columns]
    reasons, benchmarks = [], []
    for i, instruction in enumerate(batch["instruction"]):
        bench = next((matches[i] for matches in code if matches[i]), None)
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
    sources, skipped = usable_sources(opts)
    index = BenchmarkIndex(load_benchmarks(sources), opts, dedup)
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
            "benchmarks": [source_label(b) for b in sources],
            "skipped_benchmarks": skipped,  # on the hub only, which was unreachable
        },
    )
