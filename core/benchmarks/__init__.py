"""Benchmarks as `Problem` lists: where each comes from and how it is read.

Evaluation and decontamination both load benchmarks here, so training data is checked against
exactly the texts the model is shown. `SOURCES` maps a benchmark's name to its options dataclass
(`BenchmarkOptions` plus its own fields) and its loader; `options_from` builds the right options
from a config, strictly. `path: null` is a benchmark's default source (the hub for CanItEdit and
EDIT-Bench, the copy shipped in `core/data/` for HumanEvalFix, `fixtures.jsonl` for the fixtures;
the built benchmarks need a folder), `hub:ID` names the hub, anything else is a local path.

How a benchmark is evaluated (its jobs, verdicts, metrics and report) is the evaluation's
business: `eval/benchmarks/` holds one plugin per kind, built on these sources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from core.benchmarks import apiupdate, canitedit, editbench, humanevalfix, novelapi
from core.benchmarks.options import BenchmarkOptions, to_options
from core.errors import ConfigError
from core.problems import Problem


@dataclass(frozen=True)
class Source:
    """A benchmark's options schema and the loader that reads its problems with them."""

    options: type[BenchmarkOptions]
    load: Callable[[Any], list[Problem]]


SOURCES: dict[str, Source] = {
    "canitedit": Source(canitedit.CanItEditOptions, lambda o: canitedit.load_canitedit(o.path)),
    "fixtures": Source(canitedit.FixturesOptions, canitedit.load_fixtures),
    "humanevalfix": Source(humanevalfix.HumanEvalFixOptions, humanevalfix.load),
    "apiupdate": Source(apiupdate.ApiUpdateOptions, apiupdate.load),
    "novelapi": Source(novelapi.NovelApiOptions, novelapi.load),
    "editbench": Source(editbench.EditBenchOptions, editbench.load),
}


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


def source_of(name: str, key: str = "benchmark") -> Source:
    if name not in SOURCES:
        raise ConfigError(f"{key}.name={name!r}: choose one of {tuple(SOURCES)}")
    return SOURCES[name]


def options_from(plain: Mapping[str, Any] | BenchmarkOptions, key: str = "benchmark") -> BenchmarkOptions:
    """The options of the benchmark `plain` names, strictly (an option of another kind fails)."""
    if isinstance(plain, BenchmarkOptions):
        return plain
    name = plain.get("name", BenchmarkOptions.name)
    return to_options(source_of(str(name), key).options, plain, key)


def load_source(options: BenchmarkOptions) -> Benchmark:
    return Benchmark(options.name, source_of(options.name).load(options))


def load_benchmark(name: str, path: str | None = None, **options: Any) -> Benchmark:
    """`load_benchmark("humanevalfix", languages=["js"])`: a benchmark by name and options."""
    return load_source(options_from({"name": name, "path": path, **options}))


def load_every_variant(options: BenchmarkOptions) -> list[Benchmark]:
    """The benchmark as each of its variants shows it (HumanEvalFix: fix, fixtests, fixdocs)."""
    return [load_source(v) for v in options.variants()]
