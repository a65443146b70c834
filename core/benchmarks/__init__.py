"""Benchmarks: CanItEdit, HumanEvalFix and the project's own fixtures, as `Problem` lists.

Evaluation and decontamination both load benchmarks here, so training data is checked
against exactly the texts the model is shown. `BenchmarkSource` says where a benchmark comes
from (`path: null` is its default: the hub for CanItEdit, the copy shipped in `core/data/` for
HumanEvalFix, `fixtures.jsonl` here for the fixtures; `hub:ID` names the hub; anything else is
a local path). CanItEdit's splits are its instruction kinds (descriptive, lazy); HumanEvalFix's
are languages (and it has variants: fix, fixtests, fixdocs); the fixtures follow CanItEdit's schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.benchmarks.apiupdate import load_apiupdate
from core.benchmarks.canitedit import load_canitedit
from core.benchmarks.editbench import load_editbench
from core.benchmarks.humanevalfix import VARIANTS, load_humanevalfix
from core.benchmarks.novelapi import RETRIEVALS, load_novelapi
from core.errors import ConfigError
from core.hub import check_ref, existing_path, hub_offline, is_hub
from core.problems import Problem

FIXTURES = Path(__file__).resolve().parent / "fixtures.jsonl"
NAMES = ("canitedit", "humanevalfix", "fixtures", "apiupdate", "novelapi", "editbench")
BUNDLES = ("full", "stripped")
BUILT = {"apiupdate": "python -m eval.build_apiupdate", "novelapi": "python -m data_pipeline.novel_api"}


@dataclass
class BenchmarkSource:
    """Which benchmark, read from where (the `benchmark` group of eval, decontamination's list)."""

    name: str = "fixtures"  # canitedit | humanevalfix | fixtures | apiupdate | novelapi
    path: str | None = None  # None: the default source; hub:ID: the hub; else a local file/folder
    languages: list[str] = field(default_factory=lambda: ["python"])  # humanevalfix splits
    variant: str = "fixtests"  # humanevalfix: fix | fixtests | fixdocs (bigcode's standard: fixtests)
    # novelapi: which knowledge cells (None: the study's grid), where the knowledge comes from
    # (oracle: the task's own bundle; bm25 | dense: the retriever's top bundle for the description),
    # full or stripped (the API's names written <API>), the dense encoder, and a library filter.
    cells: list[str] | None = None
    retrieval: str = "oracle"
    bundle: str = "full"
    retriever_model: str | None = None
    libraries: list[str] | None = None

    def validate(self, key: str = "benchmark") -> None:
        if self.name not in NAMES:
            raise ConfigError(f"{key}.name={self.name!r}: choose one of {NAMES}")
        if self.variant not in VARIANTS:
            raise ConfigError(f"{key}.variant={self.variant!r}: choose one of {VARIANTS}")
        if self.path is not None:
            check_ref(self.path, f"{key}.path")
        elif self.name in BUILT:
            raise ConfigError(f"{key}={self.name} needs {key}.path=<folder written by {BUILT[self.name]}>")
        if self.retrieval not in RETRIEVALS:
            raise ConfigError(f"{key}.retrieval={self.retrieval!r}: choose one of {RETRIEVALS}")
        if self.bundle not in BUNDLES:
            raise ConfigError(f"{key}.bundle={self.bundle!r}: choose one of {BUNDLES}")
        if self.retrieval == "dense" and not self.retriever_model:
            raise ConfigError(f"{key}.retrieval=dense needs {key}.retriever_model=<hub id or folder>")

    def check_source(self, key: str = "benchmark") -> None:
        """Before loading: a local path must exist; a hub source finds out now whether the hub
        is reachable (so the libraries, imported later, read their cache instead of retrying)."""
        if self.path is not None and not is_hub(self.path):
            existing_path(self.path, f"{key}.path", "leave it null for the default source")
        elif self.path is not None or self.name in ("canitedit", "editbench"):
            hub_offline()


@dataclass
class Benchmark:
    name: str
    problems: list[Problem]

    @property
    def splits(self) -> list[str]:
        seen: dict[str, None] = {}
        for p in self.problems:
            seen.update(dict.fromkeys(p.splits))
        return list(seen)

    def programs(self) -> list[str]:
        """Every program a problem shows the model or expects back: `before` and `after`."""
        return [text for p in self.problems for text in (p.before, p.after) if text.strip()]

    def instructions(self) -> list[str]:
        """Every instruction the model is shown, all splits."""
        return [text for p in self.problems for text in p.instructions.values() if text.strip()]


def load_benchmark(
    name: str,
    path: str | None = None,
    languages: list[str] | None = None,
    variant: str = "fixtests",
    source: BenchmarkSource | None = None,
) -> Benchmark:
    """`variant` (fix | fixtests | fixdocs) is HumanEvalFix's; `source` carries novelapi's options."""
    if name == "canitedit":
        return Benchmark(name, load_canitedit(path))
    if name == "fixtures":
        return Benchmark(name, load_canitedit(path or str(FIXTURES)))
    if name == "humanevalfix":
        return Benchmark(name, load_humanevalfix(path, languages or ["python"], variant))
    if name == "apiupdate":
        return Benchmark(name, load_apiupdate(path))
    if name == "editbench":
        return Benchmark(name, load_editbench(path))
    if name == "novelapi":
        src = source or BenchmarkSource(name=name, path=path)
        return Benchmark(
            name,
            load_novelapi(
                path, src.cells, src.retrieval, src.bundle == "stripped", src.retriever_model, src.libraries
            ),
        )
    raise ConfigError(f"unknown benchmark {name!r}; choose one of {NAMES}")


def load_source(source: BenchmarkSource) -> Benchmark:
    return load_benchmark(source.name, source.path, list(source.languages), source.variant, source)


def load_every_variant(source: BenchmarkSource) -> list[Benchmark]:
    """The benchmark as each of its variants shows it (HumanEvalFix: fix, fixtests, fixdocs)."""
    if source.name != "humanevalfix":
        return [load_source(source)]
    return [load_benchmark(source.name, source.path, list(source.languages), v) for v in VARIANTS]
