"""Structured configs of `python -m data_pipeline.build`.

Groups: `source` (hub, files, disk, git), `pipeline` (editpackft, editpackft-released,
commits2023ft, commits2023raw, editpackft+commits2023ft) and `executor` (local, ray). Unknown keys fail at
start-up; `validate` checks what types cannot (paths, rule names) before any work starts.
The schema nests the domain types it configures (`MinHashConfig`, core's benchmark options),
so their own checks run at start-up too.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.benchmarks import options_from
from core.config import register_schema
from core.minhash_config import MinHashConfig
from core.mutation import OPERATORS, PATTERNS
from core.sandbox.config import SandboxConfig

SOURCE_KINDS = ("hub", "files", "disk", "git", "tree", "pypi", "benchmark")
CODE_KINDS = ("tree", "pypi", "benchmark")  # code with tests: the sources of pipeline=fix-tasks
PIPELINE_KINDS = ("edits", "fix_tasks")
ALL_OPERATORS = (*OPERATORS, *PATTERNS)
EXECUTOR_KINDS = ("local", "ray")
OUTPUT_FORMATS = ("arrow", "parquet")


@dataclass
class GitOptions:
    refs: list[str] = field(default_factory=lambda: ["HEAD"])  # branches, tags, commit ids, or "--all"
    first_parent: bool = False  # True: the mainline only (merges counted under merge_commit)
    multi_file: str = "keep_one"  # keep_one (Commits2023FT) | drop (OctoPack) | keep_all
    extensions: list[str] = field(default_factory=lambda: [".py"])
    max_file_bytes: int = 100_000  # a row-size bound; context fit is decided at tokenization
    include_merges: bool = False
    max_commits: int | None = None


@dataclass
class SourceConfig:
    kind: str = "hub"
    name: str | None = None  # hub dataset id
    subset: str | None = None  # hub config, e.g. "python"
    split: str = "train"
    streaming: bool = True  # stream hub datasets instead of downloading them whole
    # files: jsonl/json/parquet; disk: built folders; tree: folders, git clones, sdists (.tar.gz, .zip)
    paths: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)  # pypi: sdists to download, e.g. ["boltons==25.0.0"]
    benchmarks: list[Any] = field(default_factory=list)  # benchmark: [{name: canitedit, path: FILE}]
    repos: list[str] = field(default_factory=list)  # git: local clones
    columns: dict[str, str] = field(default_factory=dict)  # raw column -> contract column
    max_bytes: int = 1_000_000  # larger before/after texts are dropped as oversized
    limit: int | None = None  # read at most this many raw rows
    lang: str = "python"
    git: GitOptions = field(default_factory=GitOptions)

    def validate(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"source.kind={self.kind!r}: choose one of {SOURCE_KINDS}")
        if self.kind == "hub" and not self.name:
            raise ValueError("source=hub needs source.name (a hub dataset id)")
        if self.kind == "pypi" and not self.packages:
            raise ValueError("source=pypi needs source.packages=[name==version,...]")
        unpinned = [p for p in self.packages if not re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+!_-]+", p)]
        if self.kind == "pypi" and unpinned:
            raise ValueError(
                f"source.packages: pin each one as name==version (the build resumes on the version it names): {unpinned}"
            )
        if self.kind == "benchmark":
            if not self.benchmarks:
                raise ValueError("source=benchmark needs source.benchmarks=[{name: canitedit, path: FILE}]")
            for i, bench in enumerate(self.benchmarks):
                options = options_from(bench, f"source.benchmarks[{i}]")
                if options.path is None:
                    raise ValueError(
                        f"source.benchmarks[{i}]: give the path of a training set in {options.name}'s "
                        "schema (an evaluation benchmark's own problems are what decontamination removes)"
                    )
                options.check_source(f"source.benchmarks[{i}]")
                self.benchmarks[i] = options
        if self.kind in ("files", "disk", "tree"):
            if not self.paths:
                raise ValueError(f"source={self.kind} needs source.paths=[...]")
            missing = [p for p in self.paths if not Path(p).exists()]
            if missing:
                raise ValueError(f"source.paths: {missing} do not exist")
        if self.kind == "git":
            from data_pipeline.git_source import validate_repos

            if not self.repos:
                raise ValueError("source=git needs source.repos=[/path/to/clone,...]")
            validate_repos(self.repos)


@dataclass
class FilterSpec:
    name: str = ""
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class DedupOptions:
    enabled: bool = True
    # The pipeline confirms LSH candidates by exact Jaccard (precision ~1, recall kept high).
    minhash: MinHashConfig = field(default_factory=lambda: MinHashConfig(exact_check=True))
    # What a row is deduplicated on (data_pipeline/dedup_text.py): "edit" (before, after) or
    # "formatted" (the training text, instruction included, as EditPackFT was).
    text: str = "edit"

    def __post_init__(self) -> None:
        from data_pipeline.dedup_text import TEXT_COLUMNS

        if self.text not in TEXT_COLUMNS:
            raise ValueError(f"pipeline.dedup.text={self.text!r}: choose one of {tuple(TEXT_COLUMNS)}")


def default_benchmarks() -> list[Any]:
    """CanItEdit (on the hub; skipped with a notice where the hub cannot be reached), HumanEvalFix and
    the fixtures (both shipped in the repository)."""
    return [{"name": "canitedit"}, {"name": "humanevalfix"}, {"name": "fixtures"}]


@dataclass
class DecontamOptions:
    enabled: bool = True
    # Read by eval's own loaders (core.benchmarks), e.g. [{name: canitedit}, {name: humanevalfix,
    # languages: [python, js]}, {name: canitedit, path: FILE.jsonl}]; `path: null` is the default source.
    # Each entry takes the options of the benchmark it names (BenchmarkOptions once validated).
    benchmarks: list[Any] = field(default_factory=default_benchmarks)
    threshold: float = 0.5  # Jaccard of code shingles above which a row counts as a copy
    match_instructions: bool = True  # identical (normalised) instructions are dropped too
    columns: list[str] = field(default_factory=lambda: ["before", "after"])  # the code compared


@dataclass
class FixTaskOptions:
    """pipeline=fix-tasks: how units are mutated and judged (docs/fix_tasks.md)."""

    mutants_per_unit: int = 6  # candidate bugs run per unit, spread over the operators
    operators: list[str] = field(default_factory=lambda: list(ALL_OPERATORS))
    max_module_lines: int = 600  # longer modules are skipped (counted): a row holds the whole module
    timeout_factor: float = 10.0  # a mutant's time limit: this times the original's run, at least...
    min_timeout_s: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.operators) - set(ALL_OPERATORS))
        if unknown or not self.operators:
            raise ValueError(f"pipeline.fix.operators={self.operators}: choose from {list(ALL_OPERATORS)}")
        if self.mutants_per_unit < 1 or self.max_module_lines < 1:
            raise ValueError("pipeline.fix.mutants_per_unit and max_module_lines must be at least 1")
        if self.timeout_factor <= 0 or self.min_timeout_s <= 0:
            raise ValueError("pipeline.fix.timeout_factor and min_timeout_s must be positive")


@dataclass
class PipelineConfig:
    name: str = "editpackft"
    kind: str = "edits"  # edits (rows of a source) | fix_tasks (bugs injected into code with tests)
    fix: FixTaskOptions = field(default_factory=FixTaskOptions)
    filters: list[FilterSpec] = field(default_factory=list)
    dedup: DedupOptions = field(default_factory=DedupOptions)
    decontaminate: DecontamOptions = field(default_factory=DecontamOptions)
    sample: int | None = None  # keep a random sample of this many rows (commits2023raw)
    seed: int = 0

    def rules(self) -> list[tuple[str, dict[str, Any]]]:
        return [(f.name, dict(f.params)) for f in self.filters]

    def validate(self) -> None:
        from data_pipeline.filters import check_rules

        if self.kind not in PIPELINE_KINDS:
            raise ValueError(f"pipeline.kind={self.kind!r}: choose one of {PIPELINE_KINDS}")
        check_rules(self.rules())
        if self.decontaminate.enabled:
            if not self.decontaminate.benchmarks:
                raise ValueError(
                    "pipeline.decontaminate.benchmarks is empty; name the benchmarks to check against"
                )
            for i, bench in enumerate(self.decontaminate.benchmarks):
                key = f"pipeline.decontaminate.benchmarks[{i}]"
                options = options_from(bench, key)
                options.check_source(key)
                self.decontaminate.benchmarks[i] = options


@dataclass
class ExecutorConfig:
    kind: str = "local"
    num_proc: int | None = None  # local: processes; ray without an address: CPUs of the local Ray
    address: str | None = None  # ray cluster address, e.g. "auto"; None starts a local Ray
    batch_size: int = 1000  # rows per call of a batch function
    shard_rows: int = 100_000  # rows per shard of the sharded dedup job (and of Ray map tasks)
    partition_rows: int = 2_000_000  # band keys per LSH bucket task: bounds a bucket task's memory
    # Shards of running jobs; on a multi-node Ray cluster, storage every node mounts. None: <out>/.work
    work_dir: str | None = None

    def validate(self) -> None:
        if self.kind not in EXECUTOR_KINDS:
            raise ValueError(f"executor.kind={self.kind!r}: choose one of {EXECUTOR_KINDS}")
        for key in ("batch_size", "shard_rows", "partition_rows"):
            if getattr(self, key) < 1:
                raise ValueError(f"executor.{key}={getattr(self, key)}: must be at least 1")


@dataclass
class BuildConfig:
    source: SourceConfig = field(default_factory=SourceConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    out: str = "data/out"
    format: str = "arrow"  # arrow (save_to_disk) | parquet
    stats: bool = True
    plots: bool = True
    push_to_hub: str | None = None  # a repo id; pushed only when set
    # pipeline=fix-tasks runs every candidate bug with its tests here (split runs, docs/sandbox.md)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)

    def validate(self) -> None:
        if self.format not in OUTPUT_FORMATS:
            raise ValueError(f"format={self.format!r}: choose one of {OUTPUT_FORMATS}")
        fix = self.pipeline.kind == "fix_tasks"
        if fix != (self.source.kind in CODE_KINDS):
            raise ValueError(
                f"pipeline={self.pipeline.name} reads "
                + (
                    f"code with tests: source={'|'.join(CODE_KINDS)}"
                    if fix
                    else "edit rows: source=hub|files|disk|git"
                )
                + f", not source={self.source.kind}"
            )
        self.source.validate()
        self.pipeline.validate()
        self.executor.validate()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


register_schema("build_schema", BuildConfig)
